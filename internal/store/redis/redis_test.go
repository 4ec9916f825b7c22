package redis_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
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

// conformance runs the suite on Redis, with the batching coordd uses
// (maxBatch 64) or without it (0), through stores Open builds, and checks
// that the suite ran every registered script: a script without conformance
// cases fails here.
func conformance(t *testing.T, addrs []string, maxBatch int) {
	mode := "standalone"
	if len(addrs) > 1 {
		mode = "cluster"
	}
	ran := &scriptsRun{seen: map[string]bool{}}
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clk := clock.NewFake(time.Unix(1_800_000_000, 0))
		s, err := redis.Open(context.Background(), redis.Config{Mode: mode, Addrs: addrs, Clock: clk, Timeout: 5 * time.Second,
			MaxBatch: maxBatch, Hooks: []goredis.Hook{ran}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return storetest.Harness{Store: s, Clock: clk}
	})
	if t.Failed() || testing.Short() || t.Skipped() {
		return
	}
	for sha, name := range redis.ScriptNames() {
		if !ran.has(sha) {
			t.Errorf("the conformance suite never ran script %s: give its operation conformance cases", name)
		}
	}
}

// scriptsRun is a go-redis hook that records the SHA of every script run.
type scriptsRun struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (r *scriptsRun) record(cmds ...goredis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		if a := c.Args(); len(a) > 1 && strings.EqualFold(fmt.Sprint(a[0]), "evalsha") {
			r.seen[fmt.Sprint(a[1])] = true
		}
	}
}

func (r *scriptsRun) has(sha string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[sha]
}

func (r *scriptsRun) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *scriptsRun) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *scriptsRun) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		r.record(cmds...)
		return next(ctx, cmds)
	}
}

func TestConformanceStandalone(t *testing.T) { conformance(t, []string{redistest.Standalone(t)}, 64) }

func TestConformanceCluster(t *testing.T) { conformance(t, redistest.Cluster(t), 64) }

func TestConformanceClusterUnbatched(t *testing.T) { conformance(t, redistest.Cluster(t), 0) }
