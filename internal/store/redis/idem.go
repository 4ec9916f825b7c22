package redis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// BeginIdempotent implements store.Idempotency.
func (s *Store) BeginIdempotent(ctx context.Context, req store.BeginIdempotent) (store.IdemState, error) {
	var st store.IdemState
	err := s.do(ctx, "BeginIdempotent", s.keys.idem(req.Key), func(ctx context.Context) error {
		cmd, replicated := s.evalReplicated(ctx, idemBegin, []string{s.keys.idem(req.Key)}, req.Fingerprint, req.OwnerToken,
			req.ProcessingTTL.Microseconds(), req.Retention.Microseconds())
		got, err := decodeBegin(cmd)
		if err != nil {
			return err
		}
		if got.Outcome == store.Execute {
			if !replicated {
				// A failover could lose the claim and let a second caller
				// execute: the caller clears it by its token.
				return errNotReplicated
			}
			got.OwnerToken = req.OwnerToken
		}
		st = got
		return nil
	})
	if err != nil {
		return store.IdemState{}, err
	}
	return st, nil
}

// decodeBegin reads idem_begin.lua's reply.
func decodeBegin(cmd *redis.Cmd) (store.IdemState, error) {
	r, err := replyOf(idemBegin, cmd)
	if err != nil {
		return store.IdemState{}, err
	}
	if r.code(codeOK, codeMismatch) != codeOK {
		if err := r.done(); err != nil {
			return store.IdemState{}, err
		}
		return store.IdemState{}, store.ErrFingerprintMismatch
	}
	outcome := store.Outcome(r.codeAt(1, int64(store.Execute), int64(store.InProgress), int64(store.Completed), int64(store.Failed)))
	exp, now := r.int(2), r.int(3)
	st := store.IdemState{Outcome: outcome, ExpireTime: unixMicro(exp), TTL: micros(exp - now)}
	switch outcome {
	case store.Completed:
		st.Result = []byte(r.str(4))
	case store.Failed:
		st.Failure = &store.Failure{Message: r.str(4)}
	}
	if err := r.done(); err != nil {
		return store.IdemState{}, err
	}
	return st, nil
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
		if err := decodeFinish(cmd); err != nil {
			return err
		}
		if !replicated {
			return errNotReplicated
		}
		return nil
	})
}

// decodeFinish reads idem_finish.lua's reply: nil if it stored the outcome.
func decodeFinish(cmd *redis.Cmd) error {
	c, err := codeOf(idemFinish, cmd, codeOK, codeNo)
	if err == nil && c == codeNo {
		return store.ErrNotOwner
	}
	return err
}

// ExtendIdempotent implements store.Idempotency.
func (s *Store) ExtendIdempotent(ctx context.Context, key, owner string, ttl time.Duration) (time.Time, error) {
	var t time.Time
	err := s.do(ctx, "ExtendIdempotent", s.keys.idem(key), func(ctx context.Context) (err error) {
		t, err = decodeIdemExtend(s.eval(ctx, idemExtend, []string{s.keys.idem(key)}, owner, ttl.Microseconds()))
		return err
	})
	return t, err
}

// decodeIdemExtend reads idem_extend.lua's reply.
func decodeIdemExtend(cmd *redis.Cmd) (time.Time, error) {
	r, err := replyOf(idemExtend, cmd)
	if err != nil {
		return time.Time{}, err
	}
	if r.code(codeOK, codeNo) != codeOK {
		if err := r.done(); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, store.ErrNotOwner
	}
	dl := r.int(1)
	if err := r.done(); err != nil {
		return time.Time{}, err
	}
	return unixMicro(dl), nil
}
