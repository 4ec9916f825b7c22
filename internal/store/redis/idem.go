package redis

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// BeginIdempotent implements store.Idempotency.
func (s *Store) BeginIdempotent(ctx context.Context, req store.BeginIdempotent) (store.IdemState, error) {
	var st store.IdemState
	err := s.do(ctx, "BeginIdempotent", s.keys.idem(req.Key), func(ctx context.Context) error {
		r, err := s.eval(ctx, idemBegin, []string{s.keys.idem(req.Key)}, req.Fingerprint, req.OwnerToken,
			req.ProcessingTTL.Microseconds(), req.Retention.Microseconds()).Slice()
		if err != nil {
			return err
		}
		code := toInt(r[0])
		if code < 0 {
			return store.ErrFingerprintMismatch
		}
		exp, now := toInt(r[1]), toInt(r[2])
		st = store.IdemState{Outcome: store.Outcome(code), ExpireTime: unixMicro(exp), TTL: micros(exp - now)}
		switch st.Outcome {
		case store.Execute:
			st.OwnerToken = req.OwnerToken
		case store.Completed:
			st.Result = []byte(toStr(r[3]))
		case store.Failed:
			st.Failure = &store.Failure{Message: toStr(r[3])}
		}
		return nil
	})
	return st, err
}

// FinishIdempotent implements store.Idempotency.
func (s *Store) FinishIdempotent(ctx context.Context, req store.FinishIdempotent) error {
	return s.do(ctx, "FinishIdempotent", s.keys.idem(req.Key), func(ctx context.Context) error {
		kind, out := "c", string(req.Result)
		if req.Failure != nil {
			kind, out = "f", req.Failure.Message
			if req.Failure.Retryable {
				kind = "x"
			}
		}
		n, err := s.evalReplicated(ctx, idemFinish, []string{s.keys.idem(req.Key)}, req.OwnerToken, kind, out,
			req.ResultTTL.Microseconds(), s.keys.channel(store.IdemTopic(req.Key))).Int64()
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrNotOwner
		}
		return nil
	})
}

// ExtendIdempotent implements store.Idempotency.
func (s *Store) ExtendIdempotent(ctx context.Context, key, owner string, ttl time.Duration) (time.Time, error) {
	var t time.Time
	err := s.do(ctx, "ExtendIdempotent", s.keys.idem(key), func(ctx context.Context) error {
		dl, err := s.eval(ctx, idemExtend, []string{s.keys.idem(key)}, owner, ttl.Microseconds()).Int64()
		if err != nil {
			return err
		}
		if dl == 0 {
			return store.ErrNotOwner
		}
		t = unixMicro(dl)
		return nil
	})
	return t, err
}
