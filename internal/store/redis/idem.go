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
		cmd, replicated := s.evalReplicated(ctx, idemBegin, []string{s.keys.idem(req.Key)}, req.Fingerprint, req.OwnerToken,
			req.ProcessingTTL.Microseconds(), req.Retention.Microseconds())
		r, err := cmd.Slice()
		if err != nil {
			return err
		}
		code := toInt(r[0])
		switch {
		case code < 0:
			return store.ErrFingerprintMismatch
		case store.Outcome(code) == store.Execute && !replicated:
			// A failover could lose the claim and let a second caller
			// execute: the caller clears it by its token.
			return errNotReplicated
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
		cmd, replicated := s.evalReplicated(ctx, idemFinish, []string{s.keys.idem(req.Key)}, req.OwnerToken, kind, out,
			req.ResultTTL.Microseconds(), s.keys.channel(store.IdemTopic(req.Key)))
		n, err := cmd.Int64()
		switch {
		case err != nil:
			return err
		case n == 0:
			return store.ErrNotOwner
		case !replicated:
			return errNotReplicated
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
