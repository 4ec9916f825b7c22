package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// cleanup deletes from Redis what the run left that does not expire by
// itself: the fence counters of the lock names it used (they never expire,
// by design), the queues it filled, in coordd's namespace and in the direct
// baseline's, asynq's queues, and envoy ratelimit's counters (they would
// expire, but up to EXPIRATION_JITTER_MAX_SECONDS, 5 minutes, late). Rate-limit keys, idempotency keys and
// released locks expire on their own.
func (b *bench) cleanup(ctx context.Context, c redis.UniversalClient) error {
	var keys []string
	names := b.usedLocks
	if b.cfg.has("lock-release") {
		names = append(names, b.keyNames...)
	}
	for _, ns := range []string{b.cfg.Namespace, directNS} {
		for _, n := range names {
			keys = append(keys, b.keys.lock(scope(ns, n))...)
		}
		for _, q := range b.usedQueues {
			keys = append(keys, b.keys.queue(scope(ns, q))...)
		}
	}
	keys = append(keys, b.usedRedisKeys...)
	var errs []error
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 1000)]
		keys = keys[len(batch):]
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range batch {
				p.Del(ctx, k)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
			break
		}
	}
	if b.envoyUsed {
		if err := deleteMatching(ctx, c, globEscape(b.envoyKeyPrefix())+"*"); err != nil {
			errs = append(errs, err)
		}
	}
	if b.contended {
		if err := deleteMatching(ctx, c, b.contendedPattern()); err != nil {
			errs = append(errs, err)
		}
	}
	if len(b.usedAsynqQueues) > 0 {
		insp := asynq.NewInspectorFromRedisClient(c)
		for _, q := range b.usedAsynqQueues {
			if err := insp.DeleteQueue(q, true); err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
				errs = append(errs, err)
			}
			// DeleteQueue leaves the queue's counters: the totals (no
			// expiry) and the daily ones (90 days).
			for _, k := range asynqStatKeys(q, time.Now()) {
				if err := c.Del(ctx, k).Err(); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// contendedPattern matches every key of the names the contention scenarios
// used, whatever the kind (lock, semaphore) and however many keys coordd's
// layout gives a name (holders, tickets, meta...): those names all hold the
// run's ID (cb:contended:ID..., cb:sem:ID...).
func (b *bench) contendedPattern() string {
	return globEscape(b.keys.prefix) + ":{?:*:cb:*:" + b.runID + "*"
}

// globEscape escapes the characters special in a Redis MATCH pattern.
func globEscape(s string) string {
	var out strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			out.WriteByte('\\')
		}
		out.WriteRune(r)
	}
	return out.String()
}

// deleteMatching deletes the keys matching pattern from every master (one
// SCAN each, a DEL per key: they may be in different slots).
func deleteMatching(ctx context.Context, c redis.UniversalClient, pattern string) error {
	del := func(ctx context.Context, n redis.Cmdable) error {
		var keys []string
		it := n.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		if err := it.Err(); err != nil || len(keys) == 0 {
			return err
		}
		_, err := n.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Del(ctx, k)
			}
			return nil
		})
		return err
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return del(ctx, n) })
	}
	return del(ctx, c)
}

// asynqStatKeys are the counters asynq keeps per queue, for the run's day
// and the day before (a run across midnight UTC).
func asynqStatKeys(q string, now time.Time) []string {
	keys := []string{"asynq:{" + q + "}:processed", "asynq:{" + q + "}:failed"}
	for _, d := range []time.Time{now.UTC(), now.UTC().AddDate(0, 0, -1)} {
		day := d.Format(time.DateOnly)
		keys = append(keys, "asynq:{"+q+"}:processed:"+day, "asynq:{"+q+"}:failed:"+day)
	}
	return keys
}
