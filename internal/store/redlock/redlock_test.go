package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redlock"
	"github.com/coordd/coordd/internal/token"
)

// masters starts n private standalone redis-servers.
func masters(t testing.TB, n int) []*redistest.Server {
	t.Helper()
	out := make([]*redistest.Server, n)
	for i := range out {
		out[i] = redistest.StartStandalone(t)
	}
	return out
}

func addrsOf(ms []*redistest.Server) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Addr()
	}
	return out
}

func open(t testing.TB, addrs []string, tune func(*redlock.Config)) *redlock.Store {
	t.Helper()
	cfg := redlock.Config{Addrs: addrs, Timeout: time.Second, DialTimeout: time.Second, Prefix: "rl", Drift: 2 * time.Millisecond,
		RestartDelay: 3 * time.Second, CheckInterval: 100 * time.Millisecond, FenceTTL: time.Hour}
	if tune != nil {
		tune(&cfg)
	}
	st, err := redlock.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func lock(t *testing.T, st *redlock.Store, name string, ttl time.Duration) (store.Grant, error) {
	t.Helper()
	return st.AcquireHold(context.Background(), store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), Owner: "o", TTL: ttl})
}

// TestGrantFenceRelease: a grant over 5 masters answers a validity below
// its ttl and a fence above the last; the lock is held for another, then
// free after Release; fences grow across names' grants; the other
// services' calls are REDLOCK_MODE.
func TestGrantFenceRelease(t *testing.T) {
	st := open(t, addrsOf(masters(t, 5)), nil)
	ctx := context.Background()
	var last uint64
	for i := range 5 {
		g, err := lock(t, st, "x", 10*time.Second)
		if err != nil || !g.Acquired {
			t.Fatalf("grant %d: %+v, %v", i, g, err)
		}
		if g.TTL <= 0 || g.TTL > 10*time.Second-100*time.Millisecond || g.Fence <= last {
			t.Fatalf("grant %d: ttl %v (want below 10s - drift), fence %d after %d", i, g.TTL, g.Fence, last)
		}
		last = g.Fence
		other, err := lock(t, st, "x", time.Second)
		if err != nil || other.Acquired || other.Holder != "o" || other.RetryAt.IsZero() {
			t.Fatalf("a second grant while held: %+v, %v", other, err)
		}
		info, err := st.GetHolds(ctx, store.HoldLock, "x")
		if err != nil || !info.Held || info.Fence != g.Fence {
			t.Fatalf("GetHolds: %+v, %v; want held with fence %d", info, err, g.Fence)
		}
		if ok, err := st.CheckFence(ctx, store.HoldLock, "x", g.Fence); !ok || err != nil {
			t.Fatalf("CheckFence of the holder's fence: %v, %v", ok, err)
		}
		if _, err := st.RenewHold(ctx, store.HoldLock, "x", g.Token, 5*time.Second); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		r, err := st.ReleaseHold(ctx, store.HoldLock, "x", g.Token, "")
		if err != nil || !r.Released {
			t.Fatalf("Release: %+v, %v", r, err)
		}
		if _, err := st.RenewHold(ctx, store.HoldLock, "x", g.Token, 5*time.Second); !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("Renew after Release: %v, want not held (never brought back)", err)
		}
	}
	if _, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "s", Token: token.New(), TTL: time.Second, Shared: true}); !errors.Is(err, store.ErrRedlockMode) {
		t.Fatalf("a shared lock: %v, want ErrRedlockMode", err)
	}
	if _, err := st.Allow(ctx, "k", store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Second}, 1, false); !errors.Is(err, store.ErrRedlockMode) {
		t.Fatalf("Allow: %v, want ErrRedlockMode", err)
	}
}

// TestRefusesBadMasters: fewer than 3, an even number, an address twice,
// one server under two addresses: refused, saying which.
func TestRefusesBadMasters(t *testing.T) {
	ms := masters(t, 3)
	a := addrsOf(ms)
	same := strings.Replace(a[0], "127.0.0.1", "localhost", 1)
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{a[:2], "at least 3"},
		{append(a[:3:3], a[0]), "odd number"},
		{[]string{a[0], a[1], a[1]}, "listed twice"},
		{[]string{a[0], a[1], same}, "the same server"},
	} {
		_, err := redlock.Open(context.Background(), redlock.Config{Addrs: tc.addrs, Timeout: time.Second, DialTimeout: time.Second, Prefix: "rl", RestartDelay: time.Second})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%v): %v, want an error saying %q", tc.addrs, err, tc.want)
		}
	}
}

// TestThreeDownUnavailable: with 3 of 5 masters down, a grant is
// UNAVAILABLE, never "not acquired".
func TestThreeDownUnavailable(t *testing.T) {
	ms := masters(t, 5)
	st := open(t, addrsOf(ms), nil)
	for _, m := range ms[:3] {
		m.Kill()
	}
	g, err := lock(t, st, "y", time.Second)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("grant with 3 of 5 down: %+v, %v; want ErrUnavailable", g, err)
	}
}

// TestClassicHazard: A holds "x" on masters 1-3 while 4-5 are down; 4-5
// come back empty, then 3 restarts empty. Without the delayed restart B is
// granted "x" while A's lease runs (three empty masters are a majority);
// with it, the restarted masters count for nothing until lock.max_ttl has
// passed, and B is not granted.
func TestClassicHazard(t *testing.T) {
	for _, delayed := range []bool{true, false} {
		name := "delayed restart"
		if !delayed {
			name = "without the delayed restart"
		}
		t.Run(name, func(t *testing.T) {
			ms := masters(t, 5)
			tune := func(c *redlock.Config) { c.RestartDelay, c.NoRestartDelay = time.Minute, !delayed }
			a := open(t, addrsOf(ms), tune)
			ms[3].Stop()
			ms[4].Stop()
			ga, err := lock(t, a, "x", 30*time.Second)
			if err != nil || !ga.Acquired {
				t.Fatalf("A's grant on masters 1-3: %+v, %v", ga, err)
			}
			ms[3].Start()
			ms[4].Start()
			ms[2].Stop() // SHUTDOWN NOSAVE: it forgets A's lock
			ms[2].Start()
			// B asks through A's own coordd (which saw every master before)
			// and through another started now (which did not).
			gb, err := lock(t, a, "x", 30*time.Second)
			if delayed && err == nil && gb.Acquired {
				t.Fatalf("B granted x through A's coordd (fence %d) while A holds it (fence %d): two holders", gb.Fence, ga.Fence)
			}
			b := open(t, addrsOf(ms), tune)
			if !delayed && err == nil && gb.Acquired {
				b = a // granted already: the hazard shows
			} else {
				gb, err = lock(t, b, "x", 30*time.Second)
			}
			granted := err == nil && gb.Acquired
			switch {
			case delayed && granted:
				t.Fatalf("B granted x (fence %d) while A holds it (fence %d, %v left): two holders", gb.Fence, ga.Fence, time.Until(ga.ExpireTime))
			case !delayed && !granted:
				t.Fatalf("without the delayed restart B was not granted (%+v, %v): the hazard did not show", gb, err)
			case delayed:
				t.Logf("B not granted: %v (%+v); recovering: %v", err, gb, b.Recovering())
			default:
				t.Logf("without the delayed restart B was granted x (fence %d > A's %d) while A held it: the hazard", gb.Fence, ga.Fence)
			}
		})
	}
}

// downstream is a fencing resource: it takes a holder's writes only with
// a fence at least the highest it saw, and notes two holders inside at
// once.
type downstream struct {
	mu       sync.Mutex
	inside   int
	highest  uint64
	doubles  int
	stale    int
	accepted int
}

func (d *downstream) enter(fence uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if fence < d.highest {
		d.stale++
		return false
	}
	if fence == d.highest && d.accepted > 0 {
		d.stale++ // fences are never handed out twice
		return false
	}
	d.highest = fence
	d.inside++
	if d.inside > 1 {
		d.doubles++
	}
	d.accepted++
	return true
}

func (d *downstream) exit() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inside--
}

// TestChaos: 1,000 grants and attempts by 8 workers on one name (each
// holding for up to a quarter of its lease, one grant in ten left to run
// out), on 5
// masters of which 2 are killed and restarted (empty) at random, never 3
// at once: a fenced downstream sees no two holders inside at once and
// fences strictly increasing; every answer is a grant, "not acquired" or
// UNAVAILABLE.
func TestChaos(t *testing.T) {
	ms := masters(t, 5)
	// A restarted master counts for nothing for max_ttl: the workers' ttl.
	const ttl = 500 * time.Millisecond
	st := open(t, addrsOf(ms), func(c *redlock.Config) { c.RestartDelay = ttl })
	var d downstream
	var ops, granted, unavailable, kills atomic.Int64
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Go(func() {
		down := map[int]bool{}
		rng := rand.New(rand.NewPCG(7, 7))
		for {
			select {
			case <-stop:
				for i := range down {
					ms[i].Start()
				}
				return
			case <-time.After(time.Duration(300+rng.IntN(600)) * time.Millisecond):
			}
			i := rng.IntN(len(ms))
			switch {
			case down[i]:
				ms[i].Start()
				delete(down, i)
			case len(down) < 2:
				ms[i].Kill()
				down[i] = true
				kills.Add(1)
			}
		}
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ops.Add(1) <= 1000 {
				g, err := lock(t, st, "chaos", ttl)
				switch {
				case errors.Is(err, store.ErrUnavailable):
					unavailable.Add(1)
					time.Sleep(50 * time.Millisecond)
					continue
				case err != nil:
					t.Errorf("grant: %v", err)
					return
				case !g.Acquired:
					time.Sleep(min(time.Until(g.RetryAt), 100*time.Millisecond)) // as a waiting Lock would
					continue
				}
				n := granted.Add(1)
				if d.enter(g.Fence) {
					// Inside for up to a quarter of the lease's validity.
					time.Sleep(time.Duration(rand.Int64N(int64(g.TTL) / 4)))
					d.exit()
				}
				if n%10 != 0 { // one in ten runs out instead
					_, _ = st.ReleaseHold(context.Background(), store.HoldLock, "chaos", g.Token, "")
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	chaos.Wait()
	t.Logf("1,000 attempts, %d masters killed and restarted empty: %d granted, %d UNAVAILABLE; downstream: %d writes accepted, %d refused as stale, %d double holders",
		kills.Load(), granted.Load(), unavailable.Load(), d.accepted, d.stale, d.doubles)
	if kills.Load() < 3 {
		t.Fatalf("only %d masters killed: the chaos did not happen", kills.Load())
	}
	if d.doubles > 0 || d.stale > 0 {
		t.Fatalf("%d double holders and %d stale fences seen downstream", d.doubles, d.stale)
	}
	if granted.Load() < 50 {
		t.Fatalf("only %d grants in 1,000 attempts: the chaos left too little to test", granted.Load())
	}
}

// TestMinorityDownIsNotFree: A holds x on masters 1-3 (4-5 down); 1 goes
// down too: GetLock and CheckFence are UNAVAILABLE, never "free", and A's
// Release is UNAVAILABLE, never "not held".
func TestMinorityDownIsNotFree(t *testing.T) {
	ms := masters(t, 5)
	st := open(t, addrsOf(ms), nil)
	ms[3].Kill()
	ms[4].Kill()
	g, err := lock(t, st, "x", 30*time.Second)
	if err != nil || !g.Acquired {
		t.Fatalf("grant on 3 of 5: %+v, %v", g, err)
	}
	ms[3].Start()
	ms[4].Start() // back empty, and recovering: they count for nothing
	ms[0].Kill()
	ctx := context.Background()
	if info, err := st.GetHolds(ctx, store.HoldLock, "x"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GetHolds with the holder's majority out of reach: %+v, %v; want ErrUnavailable", info, err)
	}
	if ok, err := st.CheckFence(ctx, store.HoldLock, "x", g.Fence); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("CheckFence: %v, %v; want ErrUnavailable", ok, err)
	}
	if r, err := st.ReleaseHold(ctx, store.HoldLock, "x", g.Token, ""); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Release: %+v, %v; want ErrUnavailable", r, err)
	}
}

// TestRetryTakesOverItsOwnRecord: a record of the same token left by an
// earlier try (its undo lost) with an earlier expiry is taken over afresh:
// the grant's lease holds on every master it counts, and B is not granted
// while it runs; max_hold caps the first lease.
func TestRetryTakesOverItsOwnRecord(t *testing.T) {
	ms := masters(t, 5)
	st := open(t, addrsOf(ms), nil)
	ctx := context.Background()
	tok := token.New()
	raw := redis.NewClient(redistest.Options(ms[0].Addr()))
	defer raw.Close()
	key := "rl:{rl:x}"
	if err := raw.HSet(ctx, key, "t", tok, "n", "old", "o", "a", "f", "0", "m", "0").Err(); err != nil {
		t.Fatal(err)
	}
	raw.PExpire(ctx, key, 300*time.Millisecond)
	g, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "x", Token: tok, Owner: "a", TTL: 10 * time.Second})
	if err != nil || !g.Acquired {
		t.Fatalf("grant: %+v, %v", g, err)
	}
	for _, m := range ms[3:] { // as if 4 and 5 had missed the grant
		c := redis.NewClient(redistest.Options(m.Addr()))
		c.Del(ctx, key)
		_ = c.Close()
	}
	time.Sleep(400 * time.Millisecond)
	if gb, err := lock(t, st, "x", time.Second); err == nil && gb.Acquired {
		t.Fatalf("B granted x while A's lease (%v left) runs: the old record's expiry was kept", time.Until(g.ExpireTime))
	}
	mh, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "y", Token: token.New(), TTL: 10 * time.Second, MaxHold: time.Second})
	if err != nil || !mh.Acquired || mh.TTL > time.Second {
		t.Fatalf("a grant of ttl 10s with max_hold 1s: %+v, %v; want a lease of at most 1s", mh, err)
	}
}
