package redis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// An idempotency key is one hash (kKey): st "p" processing, "c"
// completed, "f" failed; fp, the fingerprint; own, the owner's token; dl,
// the processing deadline µs; ex, when it is forgotten µs; out, the
// stored outcome.

// idemBeginArgs are lua/idem_begin.lua's: the fingerprint, the owner
// token, the processing ttl µs, the retention µs of an abandoned key, and
// RefuseNew (the node is past its memory high-water mark): a key without
// a record is refused, one with a record still answered, and taken over.
type idemBeginArgs struct {
	Fingerprint string `lua:"fingerprint"`
	Owner       string `lua:"owner"`
	TTL         int64  `lua:"ttl,int"`
	Retention   int64  `lua:"retention,int"`
	RefuseNew   bool   `lua:"refuseNew,bool"`
}

// idemFinishArgs are lua/idem_finish.lua's: the owner token, State "c"
// result, "f" terminal failure or "x" retryable failure (the key is
// deleted), the encoded outcome, the result ttl µs and the key's wake-up
// channel.
type idemFinishArgs struct {
	Owner   string `lua:"owner"`
	State   string `lua:"state"`
	Outcome string `lua:"outcome"`
	TTL     int64  `lua:"ttl,int"`
	Channel string `lua:"channel"`
}

// idemExtendArgs are lua/idem_extend.lua's: the owner token and the
// processing ttl µs.
type idemExtendArgs struct {
	Owner string `lua:"owner"`
	TTL   int64  `lua:"ttl,int"`
}

// BeginIdempotent implements store.Idempotency.
func (s *Store) BeginIdempotent(ctx context.Context, req store.BeginIdempotent) (store.IdemState, error) {
	var st store.IdemState
	err := s.do(ctx, "BeginIdempotent", s.keys.idem(req.Key), func(ctx context.Context) error {
		cmd, replicated := s.evalReplicated(ctx, idemBegin, []string{s.keys.idem(req.Key)}, idemBeginArgs{
			Fingerprint: req.Fingerprint, Owner: req.OwnerToken, TTL: req.ProcessingTTL.Microseconds(),
			Retention: req.Retention.Microseconds(), RefuseNew: s.memoryHigh(ctx, s.keys.idem(req.Key)),
		})
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
	if c := r.code(codeOK, codeMismatch, codeMemoryHigh); c != codeOK {
		if err := r.done(); err != nil {
			return store.IdemState{}, err
		}
		if c == codeMemoryHigh {
			return store.IdemState{}, store.ErrMemoryHigh
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
		cmd, replicated := s.evalReplicated(ctx, idemFinish, []string{s.keys.idem(req.Key)}, idemFinishArgs{
			Owner: req.OwnerToken, State: kind, Outcome: out, TTL: req.ResultTTL.Microseconds(),
			Channel: s.keys.channel(store.IdemTopic(req.Key)),
		})
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
		t, err = decodeIdemExtend(s.eval(ctx, idemExtend, []string{s.keys.idem(key)}, idemExtendArgs{owner, ttl.Microseconds()}))
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
