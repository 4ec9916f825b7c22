package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redlock"
	"github.com/coordd/coordd/internal/token"
)

// TestFenceProposalFarAheadRefused: a coordd whose wall clock runs an hour
// ahead proposes fences an hour ahead; the masters refuse a proposal more
// than 2 × proposalLead above their clocks, so its grant goes to the second
// round, whose fence is by the counters and the masters' clocks: it never
// carries fences where no clock follows (once the counters expire, a later
// grant by the clocks would have been below them).
func TestFenceProposalFarAheadRefused(t *testing.T) {
	ms := masters(t, 3)
	st := open(t, addrsOf(ms), nil)
	if n := redlock.ProposeAhead(st, "x", token.New(), 500*time.Millisecond, time.Hour); n != 0 {
		t.Fatalf("%d of 3 masters took a proposal an hour ahead of their clocks", n)
	}
	if n := redlock.ProposeAhead(st, "y", token.New(), 500*time.Millisecond, 0); n != 3 {
		t.Fatalf("%d of 3 masters took a proposal by a clock in step with theirs; want 3 (the test tests nothing)", n)
	}
}

// TestFenceOnEveryMasterThatGranted: a grant whose proposal only a bare
// majority took (a faster instance's failed try raised the others'
// counters) writes the fence to the masters that granted without taking it
// too: with one master then down, Renew, GetHolds, CheckFence and a
// contender still find the lease on a majority (before, their records
// without a fence made them answer UNAVAILABLE).
func TestFenceOnEveryMasterThatGranted(t *testing.T) {
	ms := masters(t, 5)
	st := open(t, addrsOf(ms), nil)
	ctx := context.Background()
	ahead := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	for _, m := range ms[:2] { // a faster instance's failed try raised these
		c := redis.NewClient(redistest.Options(m.Addr()))
		if err := c.Set(ctx, "rl:{rl:x}:f", ahead, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	g, err := lock(t, st, "x", 10*time.Second)
	if err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	ms[4].Kill()
	_, rerr := st.RenewHold(ctx, store.HoldLock, "x", g.Token, 10*time.Second)
	info, gerr := st.GetHolds(ctx, store.HoldLock, "x")
	ok, cerr := st.CheckFence(ctx, store.HoldLock, "x", g.Fence)
	other, oerr := lock(t, st, "x", time.Second)
	t.Logf("granted on 5 (fence %d), master 4 down: Renew %v; GetHolds %+v %v; CheckFence %v %v; contender %+v %v", g.Fence, rerr, info, gerr, ok, cerr, other.Acquired, oerr)
	if errors.Is(rerr, store.ErrUnavailable) || errors.Is(gerr, store.ErrUnavailable) || errors.Is(oerr, store.ErrUnavailable) {
		t.Errorf("one master of five down makes a held lease UNAVAILABLE")
	}
}

// TestClockJumpUnderConcurrentGrants: grants running at once when master
// 0's clock jumps: every one of them finds master 0 not counting, not only
// the one whose reading saw the jump first (B is never granted beside A,
// who holds on masters 0-2).
func TestClockJumpUnderConcurrentGrants(t *testing.T) {
	for round := 0; round < 3; round++ {
		ms, clk := clockMasters(t, 5, 0)
		const lease = 10 * time.Second
		a := open(t, partition(t, ms)(0, 1, 2), quiet)
		b := open(t, addrsOf(ms), quiet)
		ga, err := lockAs(a, "x", "A", lease)
		if err != nil || !ga.Acquired {
			t.Fatal(ga, err)
		}
		// warm B's pools
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() { g, _ := lockAs(b, "w"+strconv.Itoa(i), "W", time.Second); _ = g })
		}
		wg.Wait()
		time.Sleep(150 * time.Millisecond)
		clk.Set(time.Minute)
		if n := leaseKeys(t, ms[0]); n != 0 {
			t.Fatalf("round %d: master 0 keeps %d lease records after its clock jumped a minute: the test tests nothing", round, n)
		}
		var gb store.Grant
		var berr error
		for i := range 24 {
			wg.Go(func() {
				if i == 12 {
					gb, berr = lockAs(b, "x", "B", lease)
					return
				}
				_, _ = lockAs(b, "y"+strconv.Itoa(i), "Y", time.Second)
			})
		}
		wg.Wait()
		t.Logf("round %d: B on x: %+v %v; recovering %v", round, gb.Acquired, berr, b.Recovering())
		if gb.Acquired {
			t.Errorf("round %d: B granted x (fence %d) beside A (fence %d) after master 0 jumped", round, gb.Fence, ga.Fence)
		}
	}
}

// TestClockStepBackUnderLoadIsNoJump: master 0's clock steps back five
// times under 16 concurrent workers: readings taken out of order are
// compared only with readings answered before they were asked, so no step
// back looks like a jump forward, and master 0 keeps counting.
func TestClockStepBackUnderLoadIsNoJump(t *testing.T) {
	ms, clk := clockMasters(t, 5, 0)
	st := open(t, addrsOf(ms), quiet)
	stop := busy(st, 16, "s")
	time.Sleep(1500 * time.Millisecond)
	if r := st.Recovering(); len(r) != 0 {
		t.Fatalf("recovering before the step: %v", r)
	}
	for k := 1; k <= 5; k++ {
		clk.Set(-time.Duration(k) * 200 * time.Millisecond)
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	if r := st.Recovering(); len(r) != 0 {
		t.Errorf("master 0's clock stepped back 1s, and it is excluded: recovering %v", r)
	}
}

// TestClockJumpRaceUnderLoad: A holds x on masters 0-2; while 24 workers
// keep B's coordd busy, master 0 jumps 700 ms (under proposalLead, so B's
// grant could be one round) as B asks for x: B is never granted beside A
// (before, it was in 5 of 10 rounds: a reading that raced the jump's
// first one counted).
func TestClockJumpRaceUnderLoad(t *testing.T) {
	hits, jumped := 0, 0
	for round := 0; round < 4; round++ {
		ms, clk := clockMasters(t, 5, 0)
		const lease = 1500 * time.Millisecond
		a := open(t, partition(t, ms)(0, 1, 2), quiet)
		b := open(t, addrsOf(ms), quiet)
		stop := busy(b, 24, "y")
		time.Sleep(300 * time.Millisecond)
		ga, err := lockAs(a, "x", "A", lease)
		if err != nil || !ga.Acquired {
			t.Fatal(ga, err)
		}
		time.Sleep(lease - 600*time.Millisecond)
		type result struct {
			g   store.Grant
			err error
		}
		bs := make(chan result, 1)
		go func() {
			g, err := b.AcquireHold(context.Background(), store.HoldRequest{Kind: store.HoldLock, Name: "x", Token: token.New(), Owner: "B", TTL: lease})
			bs <- result{g, err}
		}()
		time.Sleep(time.Duration(round*150) * time.Microsecond)
		clk.Set(700 * time.Millisecond)
		r := <-bs
		granted := r.err == nil && r.g.Acquired && time.Now().Before(ga.ExpireTime)
		// The jump took A's record on master 0 while A's lease runs on
		// masters 1 and 2: the round could have gone wrong.
		if time.Now().Before(ga.ExpireTime) && !holdsRecord(t, ms[0], "x") && holdsRecord(t, ms[1], "x") {
			jumped++
		}
		stop()
		t.Logf("round %d: B's grant of x while A holds it: %+v, %v", round, r.g.Acquired, r.err)
		if granted {
			hits++
			t.Logf("B granted x fence %d, A fence %d, A's lease left %v", r.g.Fence, ga.Fence, time.Until(ga.ExpireTime))
		}
	}
	t.Logf("%d of 4 rounds: master 0's jump took A's record while A's lease ran", jumped)
	if jumped == 0 {
		t.Fatalf("in no round did master 0's jump take A's record while A's lease ran: the test tests nothing")
	}
	if hits > 0 {
		t.Errorf("B granted x beside A in %d of 4 rounds", hits)
	}
}

// busy keeps st busy with workers taking and releasing names of their own
// (prefix and a number) until the returned stop is called, which waits
// for them.
func busy(st *redlock.Store, workers int, prefix string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				name := prefix + strconv.Itoa(i*100000+n)
				if g, err := lockAs(st, name, "busy", time.Second); err == nil && g.Acquired {
					_, _ = st.ReleaseHold(context.Background(), store.HoldLock, name, g.Token, "")
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// holdsRecord reports whether master m has the lease record of name (the
// tests' key prefix "rl").
func holdsRecord(t *testing.T, m *redistest.Server, name string) bool {
	t.Helper()
	c := redis.NewClient(redistest.Options(m.Addr()))
	defer c.Close()
	n, err := c.Exists(context.Background(), "rl:{rl:"+name+"}").Result()
	if err != nil {
		t.Fatalf("EXISTS on %s: %v", m.Addr(), err)
	}
	return n == 1
}
