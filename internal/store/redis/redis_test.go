package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, addrs []string) goredis.UniversalClient {
	t.Helper()
	var c goredis.UniversalClient
	if len(addrs) > 1 {
		c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	} else {
		c = goredis.NewClient(&goredis.Options{Addr: addrs[0]})
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// conformance runs the suite on Redis, with the batching coordd uses
// (maxBatch 64) or without it (0).
func conformance(t *testing.T, addrs []string, maxBatch int) {
	c := client(t, addrs)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clk := clock.NewFake(time.Unix(1_800_000_000, 0))
		s, err := redis.New(context.Background(), redis.Options{Client: c, Clock: clk, Timeout: 5 * time.Second, MaxBatch: maxBatch})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return storetest.Harness{Store: s, Clock: clk}
	})
}

func TestConformanceStandalone(t *testing.T) { conformance(t, []string{redistest.Standalone(t)}, 64) }

func TestConformanceCluster(t *testing.T) { conformance(t, redistest.Cluster(t), 64) }

func TestConformanceClusterUnbatched(t *testing.T) { conformance(t, redistest.Cluster(t), 0) }
