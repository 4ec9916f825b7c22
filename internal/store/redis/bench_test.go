package redis

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// BenchmarkRedis measures what coordd costs over embedding a Redis library:
// the same work through coordd (generated gRPC client → coordd → the Redis
// store) and straight to Redis (the same Lua script, sent by go-redis), in
// one run, at 64 concurrent callers, on the Cluster and on a standalone
// Redis. "x-direct" is coordd's time per op over the direct one's, measured
// just before it.
//
//	eval "$(scripts/redis-cluster.sh start)"
//	go test -run '^$' -bench BenchmarkRedis -benchtime 3s ./internal/store/redis
func BenchmarkRedis(b *testing.B) {
	b.Run("cluster", func(b *testing.B) { benchRedis(b, redistest.Cluster(b)) })
	b.Run("standalone", func(b *testing.B) { benchRedis(b, []string{redistest.Standalone(b)}) })
}

func benchRedis(b *testing.B, addrs []string) {
	mode := "standalone"
	if len(addrs) > 1 {
		mode = "cluster"
	}
	ctx := context.Background()
	// Not openStore: the benchmark function runs several times, and each
	// run's store closes (with its client) when the run ends.
	st, err := Open(ctx, Config{Mode: mode, Addrs: addrs, PoolSize: 64, Prefix: "bench", MaxBatch: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	conn := servertest.Serve(b, st, clock.Real{})
	limits := coordv1.NewRateLimitServiceClient(conn)
	locks := coordv1.NewLockServiceClient(conn)
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	var seq atomic.Int64
	key := func() string { return keys[rand.IntN(len(keys))] }

	var directNs float64
	run := func(b *testing.B, direct bool, op func() error) {
		b.SetParallelism(32) // 64 callers on 2 cores
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if direct {
			directNs = ns
		} else if directNs > 0 {
			b.ReportMetric(ns/directNs, "x-direct")
		}
	}

	// Allow: a token bucket of a million per second (always allowed), on
	// 10,000 keys.
	lim := store.Limit{Algorithm: store.TokenBucket, Limit: 1_000_000, Period: time.Second}
	b.Run("allow/direct", func(b *testing.B) {
		run(b, true, func() error {
			return st.eval(ctx, limitAllow, st.keys.limit(store.Scope("default", key()), lim), limitAllowArgs{
				Cost: 1, N: 1, Params: []int64{int64(lim.Algorithm), lim.Limit, lim.Period.Microseconds(), lim.Capacity()},
			}).Err()
		})
	})
	b.Run("allow/coordd", func(b *testing.B) {
		l := &coordv1.Limit{Algorithm: coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: lim.Limit, Period: durationpb.New(lim.Period)}
		run(b, false, func() error {
			_, err := limits.Allow(ctx, &coordv1.AllowRequest{Key: key(), Limit: l})
			return err
		})
	})

	// Lock and Release on random names.
	b.Run("lock_release/direct", func(b *testing.B) {
		run(b, true, func() error {
			name := store.Scope("default", "l"+strconv.FormatInt(seq.Add(1), 10))
			tok := token.New()
			if err := st.evalHold(ctx, holdAcquire, store.HoldLock, name, holdAcquireArgs{
				holdArgs: st.holdArgs(store.HoldLock, name), Token: tok, TTL: int64(60e6), TimeSeen: st.timeSeen.Load(),
			}).Err(); err != nil {
				return err
			}
			return st.evalHold(ctx, holdRelease, store.HoldLock, name, holdReleaseArgs{holdArgs: st.holdArgs(store.HoldLock, name), Token: tok}).Err()
		})
	})
	b.Run("lock_release/coordd", func(b *testing.B) {
		ttl := durationpb.New(time.Minute)
		run(b, false, func() error {
			name := "l" + strconv.FormatInt(seq.Add(1), 10)
			g, err := locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: ttl})
			if err != nil {
				return err
			}
			_, err = locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: g.GetToken()})
			return err
		})
	})
}
