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
		const idle = 10 * time.Minute
		s, err := redis.Open(context.Background(), redis.Config{Mode: mode, Addrs: addrs, Clock: clk, Timeout: 5 * time.Second,
			MaxBatch: maxBatch, Hooks: []goredis.Hook{ran}, IdleNameTTL: idle})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		k := nameKeys{addrs: addrs}
		return storetest.Harness{Store: s, Clock: clk, IdleNameTTL: idle, Residue: k.residue, Forget: k.forget}
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

// nameKeys finds the keys of the conformance suite's names (under the
// default prefix "coord") on every master, by SCAN: for a harness's
// Residue and Forget.
type nameKeys struct{ addrs []string }

// each calls f with every key of names and its PTTL (-1: none).
func (k nameKeys) each(names []string, f func(c goredis.Cmdable, key string, pttl time.Duration) error) error {
	ctx := context.Background()
	visit := func(c *goredis.Client) error {
		for _, n := range names {
			iter := c.Scan(ctx, 0, "coord:{*:"+n+"}*", 1000).Iterator()
			for iter.Next(ctx) {
				d, err := c.PTTL(ctx, iter.Val()).Result()
				if err != nil {
					return err
				}
				if d == -2*time.Nanosecond { // gone between SCAN and PTTL
					continue
				}
				if err := f(c, iter.Val(), d); err != nil {
					return err
				}
			}
			if err := iter.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if len(k.addrs) == 1 {
		c := goredis.NewClient(redistest.Options(k.addrs[0]))
		defer c.Close()
		return visit(c)
	}
	c := goredis.NewClusterClient(redistest.ClusterOptions(k.addrs))
	defer c.Close()
	return c.ForEachMaster(ctx, func(_ context.Context, c *goredis.Client) error { return visit(c) })
}

// residue lists the keys of names that live longer than horizon beyond
// the simulated clock's slack (a second allowed for the test's own time).
func (k nameKeys) residue(horizon time.Duration, names ...string) ([]string, error) {
	var mu sync.Mutex
	var out []string
	err := k.each(names, func(_ goredis.Cmdable, key string, pttl time.Duration) error {
		if pttl < 0 || pttl > redis.ClockSlack+horizon+time.Second {
			mu.Lock()
			out = append(out, fmt.Sprintf("%s (pttl %v)", key, pttl))
			mu.Unlock()
		}
		return nil
	})
	return out, err
}

// forget deletes the keys of names, as their expiry would.
func (k nameKeys) forget(names ...string) error {
	return k.each(names, func(c goredis.Cmdable, key string, _ time.Duration) error {
		return c.Del(context.Background(), key).Err()
	})
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
