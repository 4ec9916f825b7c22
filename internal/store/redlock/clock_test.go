package redlock_test

// Clock jumps on one master while it runs (not a restart: that is the
// delayed restart's case). Master 0 runs under the clock shim
// (redistest.Clock); the others on the real clock. Redis expires keys and
// answers TIME by its wall clock, so a jump forward past a lease makes
// that master forget the lease early, and a step back makes it keep the
// lease longer and answer a lower TIME, the fence floor's input. All but
// TestClockChaos, which times holds against leases, run in parallel: they
// mostly wait (on leases, and on dials to masters out of reach).

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
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

// clockMasters starts n masters, the first on a clock of its own set to
// start (its epoch record's since is then by that clock: a later step
// back that stays above it leaves the master counting).
func clockMasters(t *testing.T, n int, start time.Duration) ([]*redistest.Server, *redistest.Clock) {
	t.Helper()
	clk := redistest.NewClock(t, redistest.ClockShim(t))
	clk.Set(start)
	ms := []*redistest.Server{redistest.StartStandaloneEnv(t, clk.Env()...)}
	return append(ms, masters(t, n-1)...), clk
}

// partition returns the masters' addresses as a coordd cut off from all
// but reach sees them: the others are addresses where nothing listens
// (each master's own, whatever the cut).
func partition(t *testing.T, ms []*redistest.Server) func(reach ...int) []string {
	dead := make([]string, len(ms))
	for i := range dead {
		dead[i] = redistest.DeadAddr(t)
	}
	return func(reach ...int) []string {
		out := addrsOf(ms)
		for i := range out {
			if !slices.Contains(reach, i) {
				out[i] = dead[i]
			}
		}
		return out
	}
}

// quiet drops the log: a master out of reach at start is warned about.
func quiet(c *redlock.Config) { c.Log = slog.New(slog.DiscardHandler) }

// leaseKeys counts the keys on m that expire within 10 minutes: the
// records of the tests' leases of seconds (a fence counter lives for
// FenceTTL, an hour; the epoch record never expires), found without the
// key layout.
func leaseKeys(t testing.TB, m *redistest.Server) int {
	t.Helper()
	c := redis.NewClient(redistest.Options(m.Addr()))
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Errorf("KEYS on %s: %v", m.Addr(), err)
		return -1
	}
	n := 0
	for _, k := range keys {
		if ttl, err := c.PTTL(ctx, k).Result(); err == nil && ttl > 0 && ttl <= 10*time.Minute {
			n++
		}
	}
	return n
}

func lockAs(st *redlock.Store, name, owner string, ttl time.Duration) (store.Grant, error) {
	return st.AcquireHold(context.Background(), store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), Owner: owner, TTL: ttl})
}

// TestClockJumpForward: A holds x, granted on all five masters; master
// 0's clock jumps forward past A's lease and A's record there expires (the
// test checks that it is gone). B asks for x again and again while A's
// lease runs, through A's coordd and through one started after the jump:
// B can take master 0 only, the other four are A's, so B is never
// granted, and is told that A holds x. After A's release B is granted,
// with a fence above A's.
func TestClockJumpForward(t *testing.T) {
	t.Parallel()
	ms, clk := clockMasters(t, 5, 0)
	const lease = 4 * time.Second
	a := open(t, addrsOf(ms), nil)
	ga, err := lockAs(a, "x", "A", lease)
	if err != nil || !ga.Acquired {
		t.Fatalf("A's grant: %+v, %v", ga, err)
	}
	for i, m := range ms {
		if n := leaseKeys(t, m); n != 1 {
			t.Fatalf("master %d holds %d lease records after A's grant, want 1 (A's, on all five)", i, n)
		}
	}
	clk.Set(time.Minute)
	if n := leaseKeys(t, ms[0]); n != 0 {
		t.Fatalf("master 0 still holds A's lease after its clock jumped 1m forward: the jump did not expire it, the test tests nothing")
	}
	for i, m := range ms[1:] {
		if n := leaseKeys(t, m); n != 1 {
			t.Fatalf("master %d lost A's lease (%d records) without a clock jump", i+1, n)
		}
	}
	b := open(t, addrsOf(ms), nil) // started after the jump
	tries := 0
	for time.Until(ga.ExpireTime) > 300*time.Millisecond {
		for _, st := range []*redlock.Store{a, b} {
			gb, err := lockAs(st, "x", "B", lease)
			tries++
			switch {
			case err != nil:
				t.Fatalf("B's try %d while A holds x: %v, want not acquired", tries, err)
			case gb.Acquired:
				t.Fatalf("B granted x (fence %d) while A holds it (fence %d, %v left): two holders after one master's clock jumped",
					gb.Fence, ga.Fence, time.Until(ga.ExpireTime))
			case gb.Holder != "A":
				t.Fatalf("B's try %d: not acquired, holder %q, want A", tries, gb.Holder)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r, err := a.ReleaseHold(context.Background(), store.HoldLock, "x", ga.Token, ""); err != nil || !r.Released {
		t.Fatalf("A's release: %+v, %v", r, err)
	}
	gb, err := lockAs(b, "x", "B", lease)
	if err != nil || !gb.Acquired || gb.Fence <= ga.Fence {
		t.Fatalf("B after A's release: %+v, %v; want granted with a fence above A's %d", gb, err, ga.Fence)
	}
	t.Logf("master 0's clock 1m ahead: A's record gone there, B refused %d times while A held x; after A's release B granted, fence %d > A's %d",
		tries, gb.Fence, ga.Fence)
}

// TestClockJumpOnBareMajority: A's coordd reaches masters 0-2 only (a
// partition), so A holds x on a bare majority; master 0's clock jumps
// forward past A's lease, and master 0 forgets it. Redlock's known limit:
// B, reaching all five, could take masters 0, 3 and 4 and hold x beside
// A. coordd sees the jump (master 0's TIME against its own monotonic
// clock, on every grant's answer and every epoch check) and treats it as
// a restart: master 0 counts for nothing until lock.max_ttl has passed,
// for every instance, one started after the jump included (the epoch
// record says so). So B is not granted x while A's lease runs: through a
// coordd that was running at the jump, and through one started after it.
// Without the delayed exclusion (NoRestartDelay), B is granted beside A,
// and the fence orders the two: a fenced resource refuses A after B.
func TestClockJumpOnBareMajority(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "detected", false: "without the delayed exclusion"}[guard]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ms, clk := clockMasters(t, 5, 0)
			const lease = 10 * time.Second
			tune := func(c *redlock.Config) { quiet(c); c.NoRestartDelay = !guard }
			a := open(t, partition(t, ms)(0, 1, 2), tune)
			running := open(t, addrsOf(ms), tune) // running at the jump
			ga, err := lockAs(a, "x", "A", lease)
			if err != nil || !ga.Acquired {
				t.Fatalf("A's grant on masters 0-2: %+v, %v", ga, err)
			}
			clk.Set(time.Minute)
			if n := leaseKeys(t, ms[0]); n != 0 {
				t.Fatalf("master 0 still holds A's lease after its clock jumped 1m forward: the test tests nothing")
			}
			time.Sleep(300 * time.Millisecond) // a few epoch checks (every 100 ms here)
			late := open(t, addrsOf(ms), tune) // started after the jump
			for _, b := range []struct {
				what string
				st   *redlock.Store
			}{{"a coordd running at the jump", running}, {"a coordd started after it", late}} {
				gb, err := lockAs(b.st, "x", "B", lease)
				if left := time.Until(ga.ExpireTime); left <= 0 {
					t.Fatalf("A's lease had ended (%v): the test tests nothing", left)
				}
				if !guard {
					if err != nil || !gb.Acquired {
						t.Fatalf("B through %s without the delayed exclusion: %+v, %v; want granted (the hazard)", b.what, gb, err)
					}
					var d downstream
					if !d.enter(gb.Fence) {
						t.Fatalf("the resource refused B's fence %d", gb.Fence)
					}
					d.exit()
					if d.enter(ga.Fence) {
						t.Fatalf("the resource took A's fence %d after B's %d", ga.Fence, gb.Fence)
					}
					t.Logf("two holders: A (fence %d) and B through %s (fence %d); the resource refused A's write after B's", ga.Fence, b.what, gb.Fence)
					return
				}
				if err == nil && gb.Acquired {
					t.Fatalf("B granted x through %s (fence %d) while A holds it on masters 0-2 (fence %d, %v left) and master 0's clock jumped",
						b.what, gb.Fence, ga.Fence, time.Until(ga.ExpireTime))
				}
				if !slices.Contains(b.st.Recovering(), ms[0].Addr()) {
					t.Fatalf("%s does not list master 0 as recovering after its clock jumped: %v", b.what, b.st.Recovering())
				}
				t.Logf("B through %s while A holds x: %+v, %v", b.what, gb, err)
			}
		})
	}
}

// TestClockStepBackFences: master 0's clock sets the fence floor (it runs
// 10m ahead) while A's coordd, reaching masters 0-2 only, is granted x;
// then it steps 20m back, below every fence handed out: fences are above
// every earlier one through A's coordd (its counters and its own floor),
// through a new coordd that reaches masters 2-4 (only master 2 has the
// counter; the clocks are all below the fences), and through one that
// reaches all five; one that reaches masters 3 and 4 only, which have no
// counter, is not granted (a grant there could only go by the clocks).
// Master 0 starts 10m behind, so that the step back stays above its first
// reading (see the last note).
func TestClockStepBackFences(t *testing.T) {
	t.Parallel()
	ms, clk := clockMasters(t, 5, -10*time.Minute)
	const lease = 2 * time.Second
	var last uint64
	grant := func(what string, st *redlock.Store) store.Grant {
		t.Helper()
		g, err := lockAs(st, "x", what, lease)
		if err != nil || !g.Acquired {
			t.Fatalf("%s: %+v, %v", what, g, err)
		}
		if g.Fence <= last {
			t.Fatalf("%s: fence %d, not above the last %d", what, g.Fence, last)
		}
		last = g.Fence
		if r, err := st.ReleaseHold(context.Background(), store.HoldLock, "x", g.Token, ""); err != nil || !r.Released {
			t.Fatalf("%s: release: %+v, %v", what, r, err)
		}
		return g
	}
	reach := partition(t, ms)
	// The fences alone are under test: master 0's jump forward (10m behind
	// to 10m ahead) would otherwise make it count for nothing for
	// lock.max_ttl (TestClockJumpOnBareMajority), and A, reaching masters
	// 0-2, would get no majority.
	fencesOnly := func(c *redlock.Config) { quiet(c); c.NoRestartDelay = true }
	a := open(t, reach(0, 1, 2), fencesOnly)
	f0 := grant("A before the jump", a).Fence
	clk.Set(10 * time.Minute)
	f1 := grant("A, master 0 10m ahead", a).Fence
	if f1 < uint64(time.Now().Add(9*time.Minute).UnixMicro()) {
		t.Fatalf("A's fence %d with master 0 10m ahead is not by its clock (now %d µs): the test tests nothing", f1, time.Now().UnixMicro())
	}
	clk.Set(-10 * time.Minute)
	f2 := grant("A, master 0 stepped back 20m", a).Fence
	// Masters 3 and 4 have no counter yet: a grant there could only go
	// by the clocks, which are 10m below the fences.
	minority := open(t, reach(3, 4), fencesOnly)
	if g, err := lockAs(minority, "x", "minority", lease); err == nil && g.Acquired {
		t.Fatalf("a coordd reaching masters 3 and 4 only was granted x, fence %d (the last %d)", g.Fence, last)
	} else if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a coordd reaching masters 3 and 4 only: %+v, %v; want UNAVAILABLE", g, err)
	}
	f3 := grant("a new coordd reaching masters 2-4", open(t, reach(2, 3, 4), fencesOnly)).Fence
	if now := uint64(time.Now().UnixMicro()); now >= f3 {
		t.Fatalf("the clocks (%d µs) are above the fences (%d): the floor alone gave them, the test tests nothing", now, f3)
	}
	f4 := grant("a new coordd reaching all five", open(t, addrsOf(ms), fencesOnly)).Fence
	t.Logf("fences %d (before), %d (master 0 10m ahead), %d (stepped back 20m), %d (new coordd, masters 2-4), %d (new coordd, all five); the masters' clocks %d µs",
		f0, f1, f2, f3, f4, time.Now().UnixMicro())

	// A step back below the master's first reading by this coordd: it
	// counts for nothing until its clock is back there (the epoch's since
	// + delay is by its clock). Noted, not required.
	clk.Set(-30 * time.Minute)
	time.Sleep(300 * time.Millisecond)
	t.Logf("master 0 20m below its first reading: recovering %v", a.Recovering())
}

// TestClockChaos: 8 workers on one name with a fenced downstream (as
// TestChaos) until 60 grants, while master 0's clock jumps back and forth
// by up to 3 leases every 50-150 ms, each holder inside for up to a third
// of its lease: never two holders inside at once, and fences strictly
// increase at the downstream. (Before coordd saw jumps, a grant that
// contenders' tries left on a bare majority with master 0 among them was
// lost when master 0's clock jumped forward past it, and the next grant
// went to another majority: 6 double holders in about 780 grants.) Each
// holder looks,
// before it leaves, whether master 0 has forgotten its lease while master
// 1 keeps it: some must have (else the jumps did not reach a holder).
func TestClockChaos(t *testing.T) {
	const ttl, grants = 300 * time.Millisecond, 60
	// Started 4 leases behind: the jumps stay above its first reading, so
	// it keeps counting (TestClockStepBackFences's last note).
	ms, clk := clockMasters(t, 5, -4*ttl)
	st := open(t, addrsOf(ms), func(c *redlock.Config) { c.RestartDelay = ttl })
	var d downstream
	var attempts, granted, unavailable, jumps, forgot atomic.Int64
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Go(func() {
		rng := rand.New(rand.NewPCG(7, 7))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(50+rng.IntN(100)) * time.Millisecond):
			}
			clk.Set(time.Duration(rng.IntN(7)-3) * ttl)
			jumps.Add(1)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for granted.Load() < grants && time.Now().Before(deadline) {
				attempts.Add(1)
				g, err := lock(t, st, "chaos", ttl)
				switch {
				case errors.Is(err, store.ErrUnavailable):
					unavailable.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				case err != nil:
					t.Errorf("grant: %v", err)
					return
				case !g.Acquired:
					time.Sleep(min(time.Until(g.RetryAt), 100*time.Millisecond))
					continue
				}
				n := granted.Add(1)
				if d.enter(g.Fence) {
					time.Sleep(time.Duration(rand.Int64N(int64(g.TTL) / 3)))
					// Another's try may leave a record on master 0 for a
					// moment: this undercounts, never overcounts.
					if leaseKeys(t, ms[0]) == 0 && leaseKeys(t, ms[1]) == 1 {
						forgot.Add(1)
					}
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
	t.Logf("%d attempts, master 0's clock jumped %d times (within ±3 leases): %d granted (%d seen forgotten by master 0 while held), %d UNAVAILABLE; downstream: %d accepted, %d stale, %d double holders",
		attempts.Load(), jumps.Load(), granted.Load(), forgot.Load(), unavailable.Load(), d.accepted, d.stale, d.doubles)
	if d.stale > 0 || d.doubles > 0 {
		t.Fatalf("%d stale fences and %d double holders seen downstream", d.stale, d.doubles)
	}
	if granted.Load() < grants || forgot.Load() < 3 {
		t.Fatalf("%d grants in 20s, %d of them forgotten by master 0 while held: the chaos left too little to test", granted.Load(), forgot.Load())
	}
}
