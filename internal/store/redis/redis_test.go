package redis_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// conformance runs the suite on Redis, with the batching coordd uses
// (maxBatch 64) or without it (0), through stores Open builds.
func conformance(t *testing.T, addrs []string, maxBatch int) {
	mode := "standalone"
	if len(addrs) > 1 {
		mode = "cluster"
	}
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clk := clock.NewFake(time.Unix(1_800_000_000, 0))
		s, err := redis.Open(context.Background(), redis.Config{Mode: mode, Addrs: addrs, Clock: clk, Timeout: 5 * time.Second, MaxBatch: maxBatch})
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
