package memory

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
)

type idemRec struct {
	state       store.Outcome // Execute means processing
	fingerprint string
	owner       string
	deadline    time.Time // processing: the owner's lease
	expire      time.Time // the record is forgotten from then on
	result      []byte
	failure     *store.Failure
}

// BeginIdempotent implements store.Idempotency.
func (s *Store) BeginIdempotent(_ context.Context, req store.BeginIdempotent) (store.IdemState, error) {
	now := s.now()
	s.im.Lock()
	defer s.im.Unlock()
	r := s.idem[req.Key]
	if r != nil && !now.Before(r.expire) {
		r = nil
	}
	if r != nil && r.fingerprint != req.Fingerprint {
		return store.IdemState{}, store.ErrFingerprintMismatch
	}
	switch {
	case r == nil || (r.state == store.Execute && !now.Before(r.deadline)):
		deadline := now.Add(us(req.ProcessingTTL))
		s.idem[req.Key] = &idemRec{
			state: store.Execute, fingerprint: req.Fingerprint, owner: req.OwnerToken,
			deadline: deadline, expire: deadline.Add(us(req.Retention)),
		}
		return store.IdemState{Outcome: store.Execute, OwnerToken: req.OwnerToken, ExpireTime: deadline, TTL: deadline.Sub(now)}, nil
	case r.state == store.Execute:
		return store.IdemState{Outcome: store.InProgress, ExpireTime: r.deadline, TTL: r.deadline.Sub(now)}, nil
	default:
		return store.IdemState{
			Outcome: r.state, Result: r.result, Failure: r.failure,
			ExpireTime: r.expire, TTL: r.expire.Sub(now),
		}, nil
	}
}

// owned returns the processing record of key owned by owner, or nil. s.im
// must be held.
func (s *Store) owned(key, owner string, now time.Time) *idemRec {
	r := s.idem[key]
	if r == nil || r.state != store.Execute || r.owner != owner || !now.Before(r.deadline) {
		return nil
	}
	return r
}

// FinishIdempotent implements store.Idempotency.
func (s *Store) FinishIdempotent(_ context.Context, req store.FinishIdempotent) error {
	now := s.now()
	s.im.Lock()
	r := s.owned(req.Key, req.OwnerToken, now)
	if r == nil {
		s.im.Unlock()
		return store.ErrNotOwner
	}
	switch {
	case req.Failure != nil && req.Failure.Retryable:
		delete(s.idem, req.Key)
	case req.Failure != nil:
		f := *req.Failure
		*r = idemRec{state: store.Failed, fingerprint: r.fingerprint, failure: &f, expire: now.Add(us(req.ResultTTL))}
	default:
		res := append([]byte{}, req.Result...)
		*r = idemRec{state: store.Completed, fingerprint: r.fingerprint, result: res, expire: now.Add(us(req.ResultTTL))}
	}
	s.im.Unlock()
	s.hub.Notify(store.IdemTopic(req.Key))
	return nil
}

// ExtendIdempotent implements store.Idempotency.
func (s *Store) ExtendIdempotent(_ context.Context, key, owner string, ttl time.Duration) (time.Time, error) {
	now := s.now()
	s.im.Lock()
	defer s.im.Unlock()
	r := s.owned(key, owner, now)
	if r == nil {
		return time.Time{}, store.ErrNotOwner
	}
	retention := r.expire.Sub(r.deadline)
	r.deadline = now.Add(us(ttl))
	r.expire = r.deadline.Add(retention)
	return r.deadline, nil
}

// sweepIdem deletes forgotten keys, looking at up to sweepBatch, and reports
// how many it deleted.
func (s *Store) sweepIdem() int {
	now := s.now()
	n, seen := 0, 0
	s.im.Lock()
	defer s.im.Unlock()
	for k, r := range s.idem {
		if seen++; seen > sweepBatch {
			break
		}
		if !now.Before(r.expire) {
			delete(s.idem, k)
			n++
		}
	}
	return n
}
