package redis

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

var limitScripts = map[store.Algorithm]*script{
	store.FixedWindow:   limitFixedWindow,
	store.SlidingWindow: limitSlidingWindow,
	store.SlidingLog:    limitSlidingLog,
	store.TokenBucket:   limitGCRA,
	store.LeakyBucket:   limitGCRA,
}

// Allow implements store.Limits: one script, one round trip.
func (s *Store) Allow(ctx context.Context, key string, l store.Limit, cost int64, peek bool) (store.Decision, error) {
	var d store.Decision
	err := s.do(ctx, "Allow", s.keys.limit(key, l)[0], func(ctx context.Context) (err error) {
		p := "0"
		if peek {
			p = "1"
		}
		sc := limitScripts[l.Algorithm]
		d, err = decodeDecision(sc, s.eval(ctx, sc, s.keys.limit(key, l),
			l.Limit, l.Period.Microseconds(), cost, p, l.Capacity()))
		return err
	})
	return d, err
}

// decodeDecision reads the reply of a limit_*.lua script (sc), which all
// reply alike.
func decodeDecision(sc *script, cmd *redis.Cmd) (store.Decision, error) {
	r, err := replyOf(sc, cmd)
	if err != nil {
		return store.Decision{}, err
	}
	allowed := r.code(codeOK, codeNo) == codeOK
	remaining, retry, reset := r.int(1), r.int(2), r.int(3)
	if err := r.done(); err != nil {
		return store.Decision{}, err
	}
	return store.Decision{Allowed: allowed, Remaining: remaining, RetryAfter: micros(retry), ResetAfter: micros(reset)}, nil
}
