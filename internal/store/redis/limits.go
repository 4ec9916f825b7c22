package redis

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// Allow implements store.Limits: AllowAll with one limit.
func (s *Store) Allow(ctx context.Context, key string, l store.Limit, cost int64, peek bool) (store.Decision, error) {
	return s.AllowAll(ctx, key, []store.Limit{l}, cost, peek)
}

// AllowAll implements store.Limits: one script (lua/limit_allow.lua), one
// round trip, whatever the number of limits (their keys share the key's
// hash tag).
func (s *Store) AllowAll(ctx context.Context, key string, limits []store.Limit, cost int64, peek bool) (store.Decision, error) {
	if err := store.CheckLimits(limits); err != nil {
		return store.Decision{}, err
	}
	keys := make([]string, 0, len(limits)+1)
	args := limitAllowArgs{Cost: cost, Peek: peek, N: len(limits), Params: make([]int64, 0, 4*len(limits))}
	for _, l := range limits {
		keys = append(keys, s.keys.limit(key, l)...)
		args.Params = append(args.Params, int64(l.Algorithm), l.Limit, l.Period.Microseconds(), l.Capacity())
	}
	var d store.Decision
	err := s.do(ctx, "Allow", keys[0], func(ctx context.Context) (err error) {
		d, err = decodeDecision(s.eval(ctx, limitAllow, keys, args), len(limits))
		return err
	})
	return d, err
}

// limitAllowArgs are lua/limit_allow.lua's, on limiterKeys, each limit's
// limiter keys in order (limit_prelude.lua: two for a sliding log, else
// one): the cost, Peek (decide, take nothing), the number of limits N, and
// per limit four Params: its algorithm (store.Algorithm), limit, period µs
// and capacity.
type limitAllowArgs struct {
	Cost   int64   `lua:"cost,int"`
	Peek   bool    `lua:"peek,bool"`
	N      int     `lua:"n,int"`
	Params []int64 `lua:"params,intrest"`
}

// decodeDecision reads limit_allow.lua's reply to a call of n limits.
func decodeDecision(cmd *redis.Cmd, n int) (store.Decision, error) {
	r, err := replyOf(limitAllow, cmd)
	if err != nil {
		return store.Decision{}, err
	}
	allowed := r.code(codeOK, codeNo) == codeOK
	remaining, retry, reset, decided := r.int(1), r.int(2), r.int(3), r.int(4)
	if decided < 0 || decided >= int64(n) {
		r.fail(4, "deciding limit %d of %d", decided, n)
	}
	if err := r.done(); err != nil {
		return store.Decision{}, err
	}
	return store.Decision{Allowed: allowed, Remaining: remaining, RetryAfter: micros(retry), ResetAfter: micros(reset), Limit: int(decided)}, nil
}

// CountHits implements store.Limits: a script (lua/limit_hits.lua) per
// counter; one alone goes as any call does (in a batch, if batching is
// on), several in one pipeline (on a Cluster, one per master).
func (s *Store) CountHits(ctx context.Context, hits []store.Hit) ([]store.HitCount, error) {
	if err := store.CheckHits(hits); err != nil {
		return nil, err
	}
	out := make([]store.HitCount, len(hits))
	calls := make([]call, len(hits))
	for i, h := range hits {
		calls[i] = call{limitHits, []string{s.keys.counter(h.Key, h.Period)},
			limitHitsArgs{Period: h.Period.Microseconds(), Hits: min(h.Hits, store.MaxHitCount), MaxCount: store.MaxHitCount}}
	}
	err := s.do(ctx, "CountHits", calls[0].keys[0], func(ctx context.Context) error {
		var cmds []*redis.Cmd
		if len(calls) == 1 {
			cmds = []*redis.Cmd{s.eval(ctx, limitHits, calls[0].keys, calls[0].args)}
		} else {
			cmds = s.evalPipelined(ctx, calls)
		}
		for i, cmd := range cmds {
			r, err := replyOf(limitHits, cmd)
			if err != nil {
				return err
			}
			r.code(codeOK)
			out[i] = store.HitCount{Count: r.int(1), Now: unixMicro(r.int(2))}
			if err := r.done(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// limitHitsArgs are lua/limit_hits.lua's: the period µs, the hits to add,
// and the count where a counter stops (store.MaxHitCount).
type limitHitsArgs struct {
	Period   int64 `lua:"period,int"`
	Hits     int64 `lua:"hits,int"`
	MaxCount int64 `lua:"maxCount,int"`
}
