package redis

import (
	"context"

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
	err := s.do(ctx, "Allow", s.keys.limit(key, l)[0], func(ctx context.Context) error {
		p := "0"
		if peek {
			p = "1"
		}
		r, err := s.eval(ctx, limitScripts[l.Algorithm], s.keys.limit(key, l),
			l.Limit, l.Period.Microseconds(), cost, p, l.Capacity()).Slice()
		if err != nil {
			return err
		}
		d = store.Decision{
			Allowed: toInt(r[0]) == 1, Remaining: toInt(r[1]),
			RetryAfter: micros(toInt(r[2])), ResetAfter: micros(toInt(r[3])),
		}
		return nil
	})
	return d, err
}
