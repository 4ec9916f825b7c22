package hold_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/waiter"
)

// qharness is a Queues on a Faulty memory store driven by a fake clock
// (nothing expires unless a test advances it).
type qharness struct {
	q      *hold.Waiters
	mem    *memory.Store
	faulty *storetest.Faulty
	clock  *clock.Fake
	drain  chan struct{}
}

func newQHarness(t *testing.T) *qharness {
	t.Helper()
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c})
	f := storetest.NewFaulty(mem)
	drain := make(chan struct{})
	q := hold.NewWaiters(f, f, drain)
	t.Cleanup(func() { q.Close(); _ = f.Close() })
	return &qharness{q: q, mem: mem, faulty: f, clock: c, drain: drain}
}

// acquire is a TryFunc that asks the store for an exclusive lock with tok,
// recording the grant in *g. A grant is Full: nobody else fits beside it.
func (h *qharness) acquire(name, tok string, g *store.Grant) hold.TryFunc {
	return h.acquireHold(store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, TTL: time.Hour}, g)
}

// acquireHold is a TryFunc that makes req with the waiter's ticket,
// recording the grant in *g; a grant is Full when it leaves no room (an
// exclusive lock; a semaphore's last permit).
func (h *qharness) acquireHold(req store.HoldRequest, g *store.Grant) hold.TryFunc {
	return func(ctx context.Context, t *store.WaitTicket) (hold.Result, error) {
		req.Wait = t
		var err error
		*g, err = h.faulty.AcquireHold(ctx, req)
		if err != nil {
			return hold.Result{}, err
		}
		var at time.Time
		if !g.RetryAt.IsZero() {
			at = time.Now().Add(g.RetryAt.Sub(h.clock.Now()))
		}
		full := g.Acquired && (req.Kind == store.HoldLock && !req.Shared || req.Kind == store.HoldSemaphore && g.Holders >= g.Limit)
		return hold.Result{Done: g.Acquired, Full: full, RetryAt: at}, nil
	}
}

// notFull is try, except that it never tells that a grant left no room.
func notFull(try hold.TryFunc) hold.TryFunc {
	return func(ctx context.Context, t *store.WaitTicket) (hold.Result, error) {
		r, err := try(ctx, t)
		r.Full = false
		return r, err
	}
}

func (h *qharness) hold(t *testing.T, name string) string {
	t.Helper()
	tok := token.New()
	g, err := h.mem.AcquireHold(t.Context(), store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, TTL: time.Hour})
	if err != nil || !g.Acquired {
		t.Fatalf("AcquireHold: %+v, %v", g, err)
	}
	return tok
}

func (h *qharness) waiters(t *testing.T, name string) int {
	t.Helper()
	info, err := h.mem.GetHolds(t.Context(), store.HoldLock, name)
	if err != nil {
		t.Fatal(err)
	}
	return info.Waiters
}

// eventually polls cond for up to prompt.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(prompt)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, prompt)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQueuesFIFOWithoutHerd: 64 waiters on one name are granted in their
// arrival order, and the store calls per grant do not grow with their
// number: each release lets one in with one wake-up and costs a grant and
// at most one try that is not granted (the next waiter's). With tries that
// tell a grant of the exclusive lock is Full, not even that one: a waiter
// costs its first try (queued) and its grant, plus a small constant in all.
func TestQueuesFIFOWithoutHerd(t *testing.T) {
	for _, n := range []int{4, 64} {
		for _, full := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d/full=%v", n, full), func(t *testing.T) {
				testFIFOWithoutHerd(t, n, full)
			})
		}
	}
}

func testFIFOWithoutHerd(t *testing.T, n int, full bool) {
	h := newQHarness(t)
	const name = "ns:a"
	holder := h.hold(t, name)
	order := make(chan int, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := h.faulty.CallCounts()
	for i := range n {
		before := h.faulty.Calls("AcquireHold")
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := token.New()
			var g store.Grant
			try := h.acquire(name, tok, &g)
			if !full {
				try = notFull(try)
			}
			if err := waitErr(t.Context(), h.q, store.HoldLock, name, long, try); err != nil || !g.Acquired {
				errs <- fmt.Errorf("waiter %d: %+v, %v", i, g, err)
				return
			}
			order <- i
			if rel, err := h.faulty.ReleaseHold(context.Background(), store.HoldLock, name, tok, ""); err != nil || !rel.Released {
				errs <- fmt.Errorf("waiter %d's release: %+v, %v", i, rel, err)
			}
		}()
		// The next waiter arrives after this one's ticket is queued.
		eventually(t, "the waiter's first try", func() bool { return h.faulty.Calls("AcquireHold") > before })
	}
	if w := h.waiters(t, name); w != n {
		t.Fatalf("%d tickets queued, want %d", w, n)
	}
	before := h.faulty.CallCounts()
	if rel, err := h.faulty.ReleaseHold(t.Context(), store.HoldLock, name, holder, ""); err != nil || !rel.Released {
		t.Fatalf("holder's release: %+v, %v", rel, err)
	}
	wg.Wait()
	close(order)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := 0
	for i := range order {
		if i != want {
			t.Errorf("grant %d went to waiter %d: not arrival order", want, i)
		}
		want = i + 1
	}
	after := h.faulty.CallCounts()
	acq := after["AcquireHold"] - before["AcquireHold"]
	rel := after["ReleaseHold"] - before["ReleaseHold"]
	t.Logf("%d grants: %v", n, h.faulty.CallsSince(before))
	// Every round is one wake-up (one per release: n+1) and ends at
	// its first try that is not granted, so n grants take at most
	// n + (n+1) tries, however many wait: constant per grant.
	if acq > 2*n+1 {
		t.Errorf("%d AcquireHold calls for %d grants, want at most %d (a herd?)", acq, n, 2*n+1)
	}
	// A round stops after a Full grant: the n rounds make n tries,
	// all granted, and each waiter costs 2 tries in all (its first,
	// queued, and its grant); the slack is for a fallback round if
	// the test is slowed down by a second.
	if all := after["AcquireHold"] - start["AcquireHold"]; full && all > 2*n+fifoSlack {
		t.Errorf("%d AcquireHold calls in all for %d grants, want at most %d (2 per grant + %d): a try after a Full grant?", all, n, 2*n+fifoSlack, fifoSlack)
	}
	if rel != n+1 {
		t.Errorf("%d ReleaseHold calls, want %d", rel, n+1)
	}
	if m := after["LeaveQueue"] - before["LeaveQueue"]; m != 0 {
		t.Errorf("%d LeaveQueue calls, want 0: nobody gave up", m)
	}
	if w := h.waiters(t, name); w != 0 {
		t.Errorf("%d tickets left in the queue", w)
	}
}

// fifoSlack is the tries TestQueuesFIFOWithoutHerd allows beyond 2 per
// grant.
const fifoSlack = 2

// TestQueuesSemaphoreGrantsPerRound: a round goes on after a grant that
// left room (a semaphore with permits left) and stops after the one that
// took the last permit: four permits freed at once are four grants in one
// round (one wake-up), in arrival order, and no try that cannot succeed.
func TestQueuesSemaphoreGrantsPerRound(t *testing.T) {
	h := newQHarness(t)
	var hub store.Hub // the test's wake-ups only: the store's go elsewhere
	q := hold.NewWaiters(h.faulty, &hubSub{hub: &hub}, nil)
	defer q.Close()
	const name, limit, n = "ns:s", 4, 8
	req := func() store.HoldRequest {
		return store.HoldRequest{Kind: store.HoldSemaphore, Name: name, Token: token.New(), TTL: time.Hour, Limit: limit}
	}
	var holders []string
	for range limit {
		r := req()
		if g, err := h.mem.AcquireHold(t.Context(), r); err != nil || !g.Acquired {
			t.Fatalf("AcquireHold: %+v, %v", g, err)
		}
		holders = append(holders, r.Token)
	}
	start := time.Now()          // the agent's start: its first fallback round is due FallbackRound later
	granted := make(chan int, n) // in the order of the grants: the tries never overlap
	for i := range n {
		before := h.faulty.Calls("AcquireHold")
		go func() {
			var g store.Grant
			try := h.acquireHold(req(), &g)
			_ = waitErr(t.Context(), q, store.HoldSemaphore, name, long, func(ctx context.Context, tk *store.WaitTicket) (hold.Result, error) {
				r, err := try(ctx, tk)
				if r.Done {
					granted <- i
				}
				return r, err
			})
		}()
		eventually(t, "the waiter's first try", func() bool { return h.faulty.Calls("AcquireHold") > before })
	}
	before := h.faulty.Calls("AcquireHold")
	for _, tok := range holders {
		if rel, err := h.mem.ReleaseHold(t.Context(), store.HoldSemaphore, name, tok, ""); err != nil || !rel.Released {
			t.Fatal(rel, err)
		}
	}
	hub.Notify(store.WaitTopic(store.HoldSemaphore, name, q.Instance()))
	for want := range limit {
		select {
		case i := <-granted:
			if i != want {
				t.Errorf("permit %d went to waiter %d: not arrival order", want, i)
			}
		case <-time.After(prompt):
			t.Fatalf("%d permits granted within %v, want %d", want, prompt, limit)
		}
	}
	if took := time.Since(start); took >= hold.FallbackRound {
		// Then a fallback round may have made some of the grants.
		t.Fatalf("the grants took %v: not the one round of the wake-up?", took)
	}
	// A newcomer's first try comes after the agent's round has ended.
	in := make(chan struct{})
	go func() {
		_ = waitErr(t.Context(), q, store.HoldSemaphore, name, long, func(context.Context, *store.WaitTicket) (hold.Result, error) {
			select {
			case in <- struct{}{}:
			default:
			}
			return hold.Result{}, nil
		})
	}()
	<-in
	if tries := h.faulty.Calls("AcquireHold") - before; tries != limit {
		t.Errorf("%d tries for %d permits freed at once, want %d: one round, stopping at the last permit", tries, limit, limit)
	}
	select {
	case i := <-granted:
		t.Errorf("waiter %d granted beyond the limit", i)
	default:
	}
}

// TestQueuesLostWakeUp: a waiter whose wake-up is lost (its subscription
// works but never delivers) and that has no retry time is still granted,
// by the fallback round about FallbackRound after the release, not at the
// end of its wait; and while it waits, the fallback costs at most a try a
// FallbackRound.
func TestQueuesLostWakeUp(t *testing.T) {
	h := newQHarness(t)
	var hub store.Hub // nobody notifies it: every wake-up is lost
	q := hold.NewWaiters(h.faulty, &hubSub{hub: &hub}, nil)
	defer q.Close()
	const name = "ns:a"
	holder := h.hold(t, name) // its lease (an hour) gives no retry time to speak of
	var g store.Grant
	done := make(chan error, 1)
	begin := time.Now()
	go func() { done <- waitErr(t.Context(), q, store.HoldLock, name, long, h.acquire(name, token.New(), &g)) }()
	eventually(t, "queued", func() bool { return h.waiters(t, name) == 1 })
	time.Sleep(hold.FallbackRound / 2)
	if rel, err := h.mem.ReleaseHold(t.Context(), store.HoldLock, name, holder, ""); err != nil || !rel.Released {
		t.Fatal(rel, err)
	}
	released := time.Now()
	select {
	case err := <-done:
		if err != nil || !g.Acquired {
			t.Fatalf("Wait = %v, %+v; want granted", err, g)
		}
	case <-time.After(prompt):
		t.Fatalf("not granted within %v of the release: stranded by the lost wake-up", prompt)
	}
	if took := time.Since(released); took > 2*hold.FallbackRound {
		t.Errorf("granted %v after the release, want within about FallbackRound (%v)", took, hold.FallbackRound)
	}
	// The first try, then a fallback round a FallbackRound at most.
	if tries, most := h.faulty.Calls("AcquireHold"), 2+int(time.Since(begin)/hold.FallbackRound); tries > most {
		t.Errorf("%d tries in %v, want at most %d: fallback rounds more often than every %v", tries, time.Since(begin), most, hold.FallbackRound)
	}
}

// TestQueuesWaitZeroTriesOnceWithoutTicket: wait 0 is one try, no ticket,
// no agent.
func TestQueuesWaitZeroTriesOnceWithoutTicket(t *testing.T) {
	h := newQHarness(t)
	h.faulty.Fail("Subscribe") // shows that no subscription is made
	var n atomic.Int32
	err := waitErr(t.Context(), h.q, store.HoldLock, "ns:a", 0, func(_ context.Context, tk *store.WaitTicket) (hold.Result, error) {
		n.Add(1)
		if tk != nil {
			t.Errorf("ticket %+v with wait 0, want none", tk)
		}
		return hold.Result{}, nil
	})
	if err != nil || n.Load() != 1 {
		t.Fatalf("Wait = %v after %d tries, want nil after 1", err, n.Load())
	}
	if c := h.faulty.Calls("Subscribe"); c != 0 {
		t.Errorf("Subscribe called %d times, want 0", c)
	}
}

// TestQueuesTicket: a waiting try has a fresh ticket with this instance's
// ID and the store's lease, and the same ticket for every retry of it.
func TestQueuesTicket(t *testing.T) {
	h := newQHarness(t)
	if id := h.q.Instance(); len(id) != 16 {
		t.Errorf("Instance() = %q, want 16 hex digits", id)
	}
	if other := hold.NewWaiters(h.faulty, h.faulty, nil); other.Instance() == h.q.Instance() {
		t.Errorf("two Queues have the same instance ID %q", other.Instance())
	}
	var tickets []store.WaitTicket
	var mu sync.Mutex
	err := waitErr(t.Context(), h.q, store.HoldLock, "ns:a", long, func(_ context.Context, tk *store.WaitTicket) (hold.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		tickets = append(tickets, *tk)
		return hold.Result{Done: len(tickets) == 3, RetryAt: time.Now().Add(time.Millisecond)}, nil
	})
	if err != nil || len(tickets) != 3 {
		t.Fatalf("Wait = %v after %d tries, want nil after 3", err, len(tickets))
	}
	tk := tickets[0]
	if !token.Valid(tk.Ticket) || tk.Instance != h.q.Instance() || tk.Lease != store.WaitLease {
		t.Errorf("ticket %+v, want a fresh token, instance %q, lease %v", tk, h.q.Instance(), store.WaitLease)
	}
	for _, o := range tickets[1:] {
		if o != tk {
			t.Errorf("retry with ticket %+v, want the first one %+v", o, tk)
		}
	}
}

// TestQueuesRetryAt: a retry time is a round without a wake-up.
func TestQueuesRetryAt(t *testing.T) {
	h := newQHarness(t)
	var n atomic.Int32
	start := time.Now()
	err := waitErr(t.Context(), h.q, store.HoldLock, "ns:a", long, func(context.Context, *store.WaitTicket) (hold.Result, error) {
		if n.Add(1) == 1 {
			return hold.Result{RetryAt: time.Now().Add(30 * time.Millisecond)}, nil
		}
		return hold.Result{Done: true}, nil
	})
	if err != nil || n.Load() != 2 {
		t.Fatalf("Wait = %v after %d tries, want nil after 2", err, n.Load())
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("retried after %v, before the retry time", took)
	}
}

// TestQueuesWakeUp: a wake-up of this instance's topic for the name is a
// round; another instance's or another name's is not.
func TestQueuesWakeUp(t *testing.T) {
	h := newQHarness(t)
	var hub store.Hub
	q := hold.NewWaiters(h.faulty, &hubSub{hub: &hub}, nil)
	defer q.Close()
	tries := make(chan int, 10)
	var n atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- waitErr(t.Context(), q, store.HoldLock, "ns:a", long, func(context.Context, *store.WaitTicket) (hold.Result, error) {
			i := int(n.Add(1))
			tries <- i
			return hold.Result{Done: i == 2}, nil
		})
	}()
	<-tries
	hub.Notify(store.WaitTopic(store.HoldLock, "ns:a", "0123456789abcdef"))
	hub.Notify(store.WaitTopic(store.HoldLock, "ns:b", q.Instance()))
	hub.Notify(store.WaitTopic(store.HoldSemaphore, "ns:a", q.Instance()))
	select {
	case i := <-tries:
		t.Fatalf("try %d after a wake-up of another topic", i)
	case <-time.After(50 * time.Millisecond):
	}
	hub.Notify(store.WaitTopic(store.HoldLock, "ns:a", q.Instance()))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	q.Close()
	if n := hub.Topics(); n != 0 {
		t.Errorf("%d topics still subscribed after the wait ended", n)
	}
}

// TestQueuesGiveUpLeavesTheQueue: at the end of the wait, on cancellation
// and on a drain, the waiter's ticket leaves the store's queue at once.
func TestQueuesGiveUpLeavesTheQueue(t *testing.T) {
	for _, how := range []string{"wait passed", "canceled", "drain", "close"} {
		t.Run(how, func(t *testing.T) {
			h := newQHarness(t)
			const name = "ns:a"
			h.hold(t, name)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			wait := long
			if how == "wait passed" {
				wait = 50 * time.Millisecond
			}
			var g store.Grant
			done := make(chan error, 1)
			go func() { done <- waitErr(ctx, h.q, store.HoldLock, name, wait, h.acquire(name, token.New(), &g)) }()
			eventually(t, "queued", func() bool { return h.waiters(t, name) == 1 })
			switch how {
			case "canceled":
				cancel()
			case "drain":
				close(h.drain)
			case "close":
				h.q.Close()
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(prompt):
				t.Fatal("Wait did not return")
			}
			if want := error(nil); how == "canceled" {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
			} else if err != want {
				t.Errorf("err = %v, want nil", err)
			}
			if g.Acquired || !g.Queued {
				t.Errorf("last grant %+v, want queued, not acquired", g)
			}
			if n := h.faulty.Calls("LeaveQueue"); n != 1 {
				t.Errorf("LeaveQueue called %d times, want 1", n)
			}
			if w := h.waiters(t, name); w != 0 {
				t.Errorf("%d tickets queued after the give-up, want 0", w)
			}
		})
	}
}

// TestQueuesGrantDuringGiveUp: a give-up while the waiter's try is in
// flight waits for it, and a grant it makes is the caller's, or, with the
// caller's context done, is answered with the context's error so that the
// caller's clean-up ends it.
func TestQueuesGrantDuringGiveUp(t *testing.T) {
	for _, how := range []string{"wait passed", "canceled", "drain"} {
		t.Run(how, func(t *testing.T) {
			h := newQHarness(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			in := make(chan struct{})
			release := make(chan struct{})
			var n atomic.Int32
			wait := long
			if how == "wait passed" {
				wait = 100 * time.Millisecond
			}
			done := make(chan error, 1)
			go func() {
				done <- waitErr(ctx, h.q, store.HoldLock, "ns:a", wait, func(context.Context, *store.WaitTicket) (hold.Result, error) {
					if n.Add(1) == 1 {
						return hold.Result{RetryAt: time.Now().Add(10 * time.Millisecond)}, nil
					}
					close(in)
					<-release // the grant is made, its answer still on the way
					return hold.Result{Done: true}, nil
				})
			}()
			<-in
			switch how {
			case "canceled":
				cancel()
			case "drain":
				close(h.drain)
			case "wait passed":
				time.Sleep(150 * time.Millisecond)
			}
			select {
			case err := <-done:
				t.Fatalf("Wait returned %v with its try in flight", err)
			case <-time.After(20 * time.Millisecond):
			}
			close(release)
			err := <-done
			if how == "canceled" {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled (the caller cleans the grant up)", err)
				}
			} else if err != nil {
				t.Errorf("err = %v, want nil: the grant is the caller's", err)
			}
			if n := h.faulty.Calls("LeaveQueue"); n != 0 {
				t.Errorf("LeaveQueue called %d times after a grant, want 0", n)
			}
		})
	}
}

// TestQueuesTriesNeverOverlap: the tries of one name never run at once,
// whatever the number of waiters; another name's run beside them.
func TestQueuesTriesNeverOverlap(t *testing.T) {
	h := newQHarness(t)
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int
			err := waitErr(t.Context(), h.q, store.HoldLock, "ns:a", long, func(context.Context, *store.WaitTicket) (hold.Result, error) {
				r := running.Add(1)
				defer running.Add(-1)
				for {
					m := most.Load()
					if r <= m || most.CompareAndSwap(m, r) {
						break
					}
				}
				time.Sleep(time.Millisecond)
				n++
				return hold.Result{Done: n == 3, RetryAt: time.Now().Add(time.Millisecond)}, nil
			})
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d tries of one name ran at once, want 1", m)
	}
}

// TestQueuesTryError: a try's error ends its wait with that error; the
// others go on.
func TestQueuesTryError(t *testing.T) {
	h := newQHarness(t)
	errTry := errors.New("try failed")
	err := waitErr(t.Context(), h.q, store.HoldLock, "ns:a", long, func(context.Context, *store.WaitTicket) (hold.Result, error) {
		return hold.Result{}, errTry
	})
	if !errors.Is(err, errTry) {
		t.Errorf("err = %v, want %v", err, errTry)
	}
}

// TestQueuesSubscribeFails: without wake-ups the agent re-checks every
// PollWithoutWakeups instead.
func TestQueuesSubscribeFails(t *testing.T) {
	h := newQHarness(t)
	h.faulty.Fail("Subscribe")
	h.hold(t, "ns:a")
	var n atomic.Int32
	var g store.Grant
	acquire := h.acquire("ns:a", token.New(), &g) // queued: refreshes keep the ticket
	start := time.Now()
	err := waitErr(t.Context(), h.q, store.HoldLock, "ns:a", long, func(ctx context.Context, tk *store.WaitTicket) (hold.Result, error) {
		if n.Add(1) == 2 {
			return hold.Result{Done: true}, nil
		}
		return acquire(ctx, tk)
	})
	took := time.Since(start)
	if err != nil || n.Load() != 2 {
		t.Fatalf("Wait = %v after %d tries, want nil after 2", err, n.Load())
	}
	if took < waiter.PollWithoutWakeups/2 || took > 5*waiter.PollWithoutWakeups {
		t.Errorf("second try after %v, want about PollWithoutWakeups (%v)", took, waiter.PollWithoutWakeups)
	}
}

// TestQueuesRefreshKeepsTickets: while a waiter waits, its ticket is
// refreshed (it does not lapse however long it waits), with one
// RefreshTickets call for every waiter of the name.
func TestQueuesRefreshKeepsTickets(t *testing.T) {
	h := newQHarness(t)
	const name = "ns:a"
	holder := h.hold(t, name)
	const n = 5
	var wg sync.WaitGroup
	grants := make([]store.Grant, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = waitErr(t.Context(), h.q, store.HoldLock, name, long, h.acquire(name, token.New(), &grants[i]))
		}()
	}
	eventually(t, "queued", func() bool { return h.waiters(t, name) == n })
	for range 4 {
		before := h.faulty.Calls("RefreshTickets")
		eventually(t, "a refresh", func() bool { return h.faulty.Calls("RefreshTickets") > before })
		// Store time passes: without the refresh the tickets would lapse.
		h.clock.Advance(store.WaitLease / 2)
	}
	if w := h.waiters(t, name); w != n {
		t.Fatalf("%d tickets queued after 2 leases, want %d (refreshed)", w, n)
	}
	if rel, err := h.mem.ReleaseHold(t.Context(), store.HoldLock, name, holder, ""); err != nil || !rel.Released {
		t.Fatal(rel, err)
	}
	// The first waiter is granted; the others go on waiting until Close.
	eventually(t, "a grant", func() bool { return h.waiters(t, name) == n-1 })
	h.q.Close()
	wg.Wait()
	granted := 0
	for _, g := range grants {
		if g.Acquired {
			granted++
		}
	}
	if granted != 1 {
		t.Errorf("%d waiters granted, want 1", granted)
	}
}

// TestQueuesLapsedTicketRequeues: a waiter whose ticket the refresh finds
// gone (it lapsed) is tried again at once with a fresh ticket, at the back.
func TestQueuesLapsedTicketRequeues(t *testing.T) {
	h := newQHarness(t)
	const name = "ns:a"
	h.hold(t, name)
	var mu sync.Mutex
	var tickets []string
	done := make(chan error, 1)
	go func() {
		var g store.Grant
		acquire := h.acquire(name, token.New(), &g)
		done <- waitErr(t.Context(), h.q, store.HoldLock, name, long, func(ctx context.Context, tk *store.WaitTicket) (hold.Result, error) {
			mu.Lock()
			tickets = append(tickets, tk.Ticket)
			mu.Unlock()
			return acquire(ctx, tk)
		})
	}()
	eventually(t, "queued", func() bool { return h.waiters(t, name) == 1 })
	h.faulty.Fail("RefreshTickets") // the coordd "stalls": its ticket lapses
	h.clock.Advance(2 * store.WaitLease)
	before := h.faulty.Calls("RefreshTickets")
	eventually(t, "a failed refresh", func() bool { return h.faulty.Calls("RefreshTickets") > before })
	h.faulty.Clear("RefreshTickets")
	eventually(t, "a fresh ticket", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tickets) >= 2
	})
	mu.Lock()
	if tickets[1] == tickets[0] {
		t.Errorf("the retry after the lapse has the old ticket")
	}
	mu.Unlock()
	eventually(t, "queued again", func() bool { return h.waiters(t, name) == 1 })
	h.q.Close()
	if err := <-done; err != nil {
		t.Errorf("Wait after Close = %v, want nil", err)
	}
}

// TestQueuesCloseEndsEverything: Close ends every wait and agent, and a
// Wait after Close tries once.
func TestQueuesCloseEndsEverything(t *testing.T) {
	h := newQHarness(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = waitErr(t.Context(), h.q, store.HoldLock, fmt.Sprintf("ns:%d", i%3), long, func(context.Context, *store.WaitTicket) (hold.Result, error) {
				return hold.Result{}, nil
			})
		}()
	}
	time.Sleep(20 * time.Millisecond)
	h.q.Close()
	wg.Wait()
	var n int
	err := waitErr(t.Context(), h.q, store.HoldLock, "ns:a", long, func(_ context.Context, tk *store.WaitTicket) (hold.Result, error) {
		n++
		if tk != nil {
			t.Errorf("ticket after Close")
		}
		return hold.Result{}, nil
	})
	if err != nil || n != 1 {
		t.Errorf("Wait after Close = %v after %d tries, want nil after 1", err, n)
	}
}

// TestQueuesTryPanics: a try that panics panics in its caller's goroutine
// (where the server's recovery is), not in the agent's; the others go on.
func TestQueuesTryPanics(t *testing.T) {
	h := newQHarness(t)
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		_ = waitErr(t.Context(), h.q, store.HoldLock, "ns:a", long, func(context.Context, *store.WaitTicket) (hold.Result, error) {
			panic("store exploded")
		})
	}()
	if p := <-got; p != "store exploded" {
		t.Fatalf("recovered %v, want the try's panic", p)
	}
	if err := waitErr(t.Context(), h.q, store.HoldLock, "ns:a", long, func(context.Context, *store.WaitTicket) (hold.Result, error) {
		return hold.Result{Done: true}, nil
	}); err != nil {
		t.Fatalf("Wait after a panic: %v", err)
	}
}

// waitErr is Wait for a request that is never handed off (token ""): its
// error.
func waitErr(ctx context.Context, q *hold.Waiters, kind store.HoldKind, name string, wait time.Duration, try hold.TryFunc) error {
	_, err := q.Wait(ctx, kind, name, "", wait, try)
	return err
}
