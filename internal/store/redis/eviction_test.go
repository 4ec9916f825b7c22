package redis_test

// The eviction guard, on private Redis servers (these tests CONFIG SET and
// kill them; never the shared ones).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/token"
)

// setPolicy sets addr's maxmemory-policy (and maxmemory, if > 0) with a
// client of its own.
func setPolicy(t *testing.T, addr, policy string, maxmemory int64) {
	t.Helper()
	c := goredis.NewClient(redistest.Options(addr))
	defer c.Close()
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory-policy %s on %s: %v", policy, addr, err)
	}
	if maxmemory > 0 {
		if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(maxmemory, 10)).Err(); err != nil {
			t.Fatalf("CONFIG SET maxmemory on %s: %v", addr, err)
		}
	}
}

// policies records what the guard tells EvictionOptions.OnPolicy.
type policies struct {
	mu   sync.Mutex
	seen []redis.NodePolicy
}

func (p *policies) on(node, policy string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, redis.NodePolicy{Node: node, Policy: policy})
}

func (p *policies) list() []redis.NodePolicy {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]redis.NodePolicy(nil), p.seen...)
}

func acquire(ctx context.Context, s *redis.Store, name string) (store.Grant, error) {
	return s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: store.Scope("t", name), Token: token.New(), TTL: time.Minute, Owner: "o"})
}

// wantEvictionError checks that err is store.ErrUnavailable and an
// EvictionError naming node and policy, whose message says both.
func wantEvictionError(t *testing.T, err error, node, policy string) {
	t.Helper()
	var ee *redis.EvictionError
	if !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &ee) {
		t.Fatalf("got %v; want an EvictionError, which is ErrUnavailable", err)
	}
	if ee.Node != node || ee.Policy != policy {
		t.Fatalf("EvictionError names %s with %s; want %s with %s", ee.Node, ee.Policy, node, policy)
	}
	if msg := err.Error(); !strings.Contains(msg, node) || !strings.Contains(msg, policy) || !strings.Contains(msg, "noeviction") {
		t.Fatalf("the error %q does not say the node, its policy and what to set", msg)
	}
}

// TestEvictionPolicyRefused: a Redis with maxmemory-policy volatile-lru is
// reported by CheckEviction and refused, every command, with an error that
// names the node and the policy; nothing is written. Set to noeviction at
// runtime, it is used after the next re-check; set to allkeys-lru at
// runtime, it is refused again after the next re-check.
func TestEvictionPolicyRefused(t *testing.T) {
	srv := redistest.StartStandalone(t)
	setPolicy(t, srv.Addr(), "volatile-lru", 0)
	ctx := context.Background()
	var seen policies
	const recheck = 200 * time.Millisecond
	// New, not Open: Open refuses an evicting Redis, and this is the store's
	// own guard (with a Recheck and an OnPolicy Config does not have).
	s, err := redis.New(ctx, redis.Options{Client: outageClient(t, []string{srv.Addr()}),
		Eviction: redis.EvictionOptions{Recheck: recheck, OnPolicy: seen.on}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	got, err := s.CheckEviction(ctx)
	if err != nil || len(got) != 1 || got[0] != (redis.NodePolicy{Node: srv.Addr(), Policy: "volatile-lru"}) {
		t.Fatalf("CheckEviction = %v, %v; want %s with volatile-lru", got, err, srv.Addr())
	}
	if n := s.EvictingNodes(); n != 1 {
		t.Errorf("EvictingNodes = %d, want 1", n)
	}
	_, err = acquire(ctx, s, "x")
	wantEvictionError(t, err, srv.Addr(), "volatile-lru")
	_, err = s.GetHolds(ctx, store.HoldLock, store.Scope("t", "x"))
	wantEvictionError(t, err, srv.Addr(), "volatile-lru")
	raw := goredis.NewClient(redistest.Options(srv.Addr()))
	defer raw.Close()
	if n, err := raw.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after the refused calls = %d, %v; want 0: nothing may be written", n, err)
	}

	setPolicy(t, srv.Addr(), "noeviction", 0)
	eventually(t, 5*time.Second, func() error {
		g, err := acquire(ctx, s, "x")
		if err == nil && !g.Acquired {
			return errors.New("not acquired")
		}
		return err
	})
	if n := s.EvictingNodes(); n != 0 {
		t.Errorf("EvictingNodes after noeviction = %d, want 0", n)
	}

	setPolicy(t, srv.Addr(), "allkeys-lru", 0)
	eventually(t, 5*time.Second, func() error {
		_, err := s.GetHolds(ctx, store.HoldLock, store.Scope("t", "x"))
		if err == nil {
			return errors.New("still served")
		}
		return nil
	})
	_, err = s.GetHolds(ctx, store.HoldLock, store.Scope("t", "x"))
	wantEvictionError(t, err, srv.Addr(), "allkeys-lru")

	want := []redis.NodePolicy{{srv.Addr(), "volatile-lru"}, {srv.Addr(), "noeviction"}, {srv.Addr(), "allkeys-lru"}}
	if got := seen.list(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("OnPolicy saw %v, want %v (each change once)", got, want)
	}
}

// TestEvictionAllowed: with Allow, a volatile-lru Redis is used, and
// counted in EvictingNodes.
func TestEvictionAllowed(t *testing.T) {
	srv := redistest.StartStandalone(t)
	setPolicy(t, srv.Addr(), "volatile-lru", 0)
	ctx := context.Background()
	cfg := outageConfig([]string{srv.Addr()})
	cfg.Timeout, cfg.BreakerFailures, cfg.AllowEviction = 0, 0, true // the store's default timeout, no breakers
	s, err := redis.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if g, err := acquire(ctx, s, "x"); err != nil || !g.Acquired {
		t.Fatalf("AcquireLock with Allow = %+v, %v", g, err)
	}
	if n := s.EvictingNodes(); n != 1 {
		t.Errorf("EvictingNodes = %d, want 1", n)
	}
}

// TestEvictionCheckedAfterReconnect: a Redis that comes back after an
// outage is read again before its next command, without waiting for the
// periodic re-check: one restarted with an evicting policy is refused.
func TestEvictionCheckedAfterReconnect(t *testing.T) {
	srv := redistest.StartStandalone(t)
	ctx := context.Background()
	// New, not Open: a Recheck of an hour (Config has none) shows that the
	// re-read is the reconnection's, not the periodic one's.
	s, err := redis.New(ctx, redis.Options{Client: outageClient(t, []string{srv.Addr()}), Timeout: outageStoreTimeout,
		Eviction: redis.EvictionOptions{Recheck: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if g, err := acquire(ctx, s, "x"); err != nil || !g.Acquired {
		t.Fatalf("AcquireLock = %+v, %v", g, err)
	}
	srv.Kill()
	if _, err := acquire(ctx, s, "y"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AcquireLock with Redis down = %v, want ErrUnavailable", err)
	}
	srv.Start()
	setPolicy(t, srv.Addr(), "volatile-ttl", 0)
	_, err = acquire(ctx, s, "y")
	wantEvictionError(t, err, srv.Addr(), "volatile-ttl")
}

// TestEvictionClusterNamesTheMaster: on a Cluster, CheckEviction reads
// every master, and only the master with an evicting policy is refused:
// calls for keys of its slots fail naming it, calls for the others' slots
// succeed.
func TestEvictionClusterNamesTheMaster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	bad := cl.Masters()[1].Addr()
	setPolicy(t, bad, "volatile-ttl", 0)
	ctx := context.Background()
	// New, not Open: Open refuses a Cluster with an evicting master; this is
	// the store's own guard, per master.
	s, err := redis.New(ctx, redis.Options{Client: outageClient(t, cl.Addrs())})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.CheckEviction(ctx)
	if err != nil || len(got) != 3 {
		t.Fatalf("CheckEviction = %v, %v; want 3 masters", got, err)
	}
	for _, p := range got {
		if want := map[bool]string{true: "volatile-ttl", false: "noeviction"}[p.Node == bad]; p.Policy != want {
			t.Errorf("CheckEviction: %s has %s, want %s", p.Node, p.Policy, want)
		}
	}
	refused, served := 0, 0
	for i := range 30 {
		_, err := acquire(ctx, s, fmt.Sprint("lock-", i))
		if err != nil {
			wantEvictionError(t, err, bad, "volatile-ttl")
			refused++
		} else {
			served++
		}
	}
	if refused == 0 || served == 0 {
		t.Fatalf("%d calls refused, %d served; want both (one master of three evicts)", refused, served)
	}
}

// TestEvictionGrantsALiveLockTwice is why the guard exists: under
// volatile-lru with memory full, Redis evicts a lock's keys while it has
// most of its lease left, and the lock is granted to a second holder while
// the first still holds it (the fence counter, without a TTL, survives:
// under allkeys-* it would not). Run with Allow, which is what
// allow_eviction risks.
//
// A lock is several keys with a TTL (holders hash, holders by deadline,
// ...), each evicted on its own, and a grant's eligibility reads the
// holders by deadline only: the second holder is let in once that key is
// gone, whether or not the holders hash (which GetLock reads) still is.
// So the test asks what it shows, a second AcquireLock, rather than
// GetLock.
func TestEvictionGrantsALiveLockTwice(t *testing.T) {
	srv := redistest.StartStandalone(t)
	ctx := context.Background()
	raw := goredis.NewClient(redistest.Options(srv.Addr()))
	defer raw.Close()
	setPolicy(t, srv.Addr(), "volatile-lru", 0)
	cfg := outageConfig([]string{srv.Addr()})
	cfg.Timeout, cfg.BreakerFailures, cfg.AllowEviction = 5*time.Second, 0, true
	s, err := redis.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, err := acquire(ctx, s, "precious")
	if err != nil || !first.Acquired {
		t.Fatalf("first AcquireLock = %+v, %v", first, err)
	}
	// The memory cap leaves room for fillers above what is used now,
	// after Open and the first call: the store's scripts (Open loads them;
	// every hold script carries the hold prelude, some 310 KiB in all) count
	// in used_memory and are never evicted, and the first call adds some
	// 290 KiB more. Measured before Open, the cap was below all that: the
	// first SET was refused (OOM), with nothing left to evict.
	info, err := raw.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	used := int64(0)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if used == 0 {
		t.Fatalf("no used_memory in INFO memory: %s", info)
	}
	setPolicy(t, srv.Addr(), "volatile-lru", used+512<<10)
	// Other keys with a TTL fill the memory; Redis evicts among them and
	// the lock's keys. Every 50 writes another owner tries the lock (a
	// refusal writes nothing).
	value := strings.Repeat("v", 1024)
	var second store.Grant
	for i := 0; i < 20000 && !second.Acquired; i++ {
		if err := raw.Set(ctx, fmt.Sprint("filler:", i), value, time.Hour).Err(); err != nil {
			t.Fatalf("SET filler: %v", err)
		}
		if i%50 == 49 {
			if second, err = acquire(ctx, s, "precious"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !second.Acquired {
		t.Skip("Redis did not evict the lock in 20000 writes; nothing shown")
	}
	if left := time.Until(first.ExpireTime); left < 30*time.Second {
		t.Fatalf("the first lease has only %v left; the demonstration needs a lock evicted with time left", left)
	}
	t.Logf("granted twice: the first holder's lease had %v left; fences %d then %d",
		time.Until(first.ExpireTime).Round(time.Second), first.Fence, second.Fence)
	if second.Fence <= first.Fence {
		t.Errorf("the second grant's fence %d is not above the first's %d", second.Fence, first.Fence)
	}
}

// eventually retries f until it returns nil, for at most d.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
