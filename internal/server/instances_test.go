package server_test

// Waiting order, shared locks, semaphores, elections and lock-delay across
// two coordd instances: two servers on one backend (the same memory store;
// two Redis stores, each with its own connections and pub/sub, on the same
// Redis under one key prefix), each with its own hold.Waiters and so its
// own instance ID.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
)

// newPair returns two servers on one backend; opts apply to both (a wrap
// too: each server gets its own wrapper around the shared store).
func newPair(t *testing.T, opts ...func(*config)) (a, b *harness) {
	t.Helper()
	a = newHarness(t, opts...)
	b = newHarness(t, append(opts, func(c *config) { c.shared = a })...)
	return a, b
}

// waitFor polls cond every 2 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lockWaiters is GetLock's waiters of name.
func lockWaiters(t *testing.T, h *harness, name string) uint32 {
	t.Helper()
	return h.held(t, name).GetWaiters()
}

// TestLockFIFOAcrossInstances queues 100 waiters on one lock, alternately
// on A and B, each only once the one before is in the queue (GetLock counts
// it), so that their arrival order is known: every one of them must be
// granted in that order.
func TestLockFIFOAcrossInstances(t *testing.T) {
	const n = 100
	a, b := newPair(t)
	name := "fifo"
	first, err := a.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Owner: "first"})
	if err != nil || !first.GetAcquired() {
		t.Fatalf("Lock = %v, %v", first, err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		on := []*harness{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := on.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Wait: dur(time.Minute), Owner: fmt.Sprint(i)})
			if err != nil || !g.GetAcquired() {
				errs <- fmt.Errorf("waiter %d: Lock = %v, %v", i, g, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if _, err := on.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: name, Token: g.GetToken()}); err != nil {
				errs <- fmt.Errorf("waiter %d: Release: %v", i, err)
			}
		}()
		waitFor(t, 10*time.Second, fmt.Sprintf("waiter %d is not in the queue", i), func() bool {
			return lockWaiters(t, a, name) == uint32(i+1)
		})
	}
	if _, err := a.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: name, Token: first.GetToken()}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	inOrder := 0
	for i, w := range order {
		if w == i {
			inOrder++
		}
	}
	if inOrder != n {
		t.Fatalf("%d of %d waiters granted in arrival order; order %v", inOrder, n, order)
	}
}

// TestLockWriterPreference: a waiting exclusive request blocks shared
// requests that come after it, waiting or not, though the lock is only
// shared; it is granted when the shared holder leaves, and the shared
// waiter after it.
func TestLockWriterPreference(t *testing.T) {
	a, b := newPair(t)
	name := "rw"
	lock := func(h *harness, owner string, shared bool, wait time.Duration) (*coordv1.LockResponse, error) {
		return h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Wait: dur(wait), Owner: owner, Shared: shared})
	}
	r1, err := lock(a, "reader1", true, 0)
	if err != nil || !r1.GetAcquired() {
		t.Fatalf("shared Lock = %v, %v", r1, err)
	}
	writer := make(chan *coordv1.LockResponse, 1)
	go func() {
		g, err := lock(b, "writer", false, time.Minute)
		if err != nil {
			t.Error(err)
		}
		writer <- g
	}()
	waitFor(t, 10*time.Second, "the writer is not in the queue", func() bool { return lockWaiters(t, a, name) == 1 })
	if g, err := lock(a, "reader2", true, 0); err != nil || g.GetAcquired() {
		t.Fatalf("shared Lock behind a waiting writer = %v, %v; want not acquired", g, err)
	}
	reader2 := make(chan *coordv1.LockResponse, 1)
	go func() {
		g, err := lock(a, "reader2", true, time.Minute)
		if err != nil {
			t.Error(err)
		}
		reader2 <- g
	}()
	waitFor(t, 10*time.Second, "reader2 is not in the queue", func() bool { return lockWaiters(t, a, name) == 2 })
	if _, err := a.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: name, Token: r1.GetToken()}); err != nil {
		t.Fatal(err)
	}
	w := <-writer
	if !w.GetAcquired() {
		t.Fatalf("writer = %v; want acquired", w)
	}
	select {
	case g := <-reader2:
		t.Fatalf("reader2 granted beside the writer: %v", g)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := b.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: name, Token: w.GetToken()}); err != nil {
		t.Fatal(err)
	}
	if g := <-reader2; !g.GetAcquired() || g.GetFence() <= w.GetFence() {
		t.Fatalf("reader2 = %v; want acquired with a fence above the writer's %d", g, w.GetFence())
	}
}

// TestSharedLocksCoexist: five shared holders on two instances hold at
// once, GetLock lists them; an exclusive request is refused until the last
// leaves.
func TestSharedLocksCoexist(t *testing.T) {
	a, b := newPair(t)
	name := "readers"
	var tokens []string
	var fence uint64
	for i := range 5 {
		h := []*harness{a, b}[i%2]
		g, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Owner: fmt.Sprint("r", i), Shared: true})
		if err != nil || !g.GetAcquired() || g.GetFence() <= fence {
			t.Fatalf("shared Lock %d = %v, %v; want acquired, fence above %d", i, g, err, fence)
		}
		fence = g.GetFence()
		tokens = append(tokens, g.GetToken())
	}
	info := b.held(t, name)
	if len(info.GetHolders()) != 5 {
		t.Fatalf("GetLock = %v; want 5 holders", info)
	}
	for _, hd := range info.GetHolders() {
		if !hd.GetShared() || hd.GetFence() == 0 {
			t.Fatalf("holder %v: want shared with a fence", hd)
		}
	}
	for i, tok := range tokens {
		if g, err := a.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Owner: "w"}); err != nil || g.GetAcquired() {
			t.Fatalf("exclusive Lock with %d shared holders = %v, %v; want not acquired", 5-i, g, err)
		}
		if r, err := b.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: name, Token: tok}); err != nil || !r.GetReleased() {
			t.Fatalf("Release %d = %v, %v", i, r, err)
		}
	}
	if g, err := a.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Owner: "w"}); err != nil || !g.GetAcquired() {
		t.Fatalf("exclusive Lock after the readers = %v, %v; want acquired", g, err)
	}
}

// fencedResource admits the holders of a semaphore's permits: a write
// enters with its fence and leaves; it counts the writers inside at once
// and refuses a fence it saw before.
type fencedResource struct {
	mu      sync.Mutex
	inside  map[uint64]bool
	seen    map[uint64]bool
	most    int
	refused int
}

func (r *fencedResource) enter(fence uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[fence] {
		r.refused++
		return false
	}
	r.seen[fence] = true
	r.inside[fence] = true
	r.most = max(r.most, len(r.inside))
	return true
}

func (r *fencedResource) leave(fence uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inside, fence)
}

// TestSemaphoreLimitUnderContention: 64 callers on two instances take
// permits of a semaphore of limit 4, 5 times each: never more than 4 are
// inside the fenced resource at once, every permit has its own fence, and
// every caller gets its turns.
func TestSemaphoreLimitUnderContention(t *testing.T) {
	const (
		callers = 64
		rounds  = 5
		limit   = 4
	)
	a, b := newPair(t)
	sems := []coordv1.SemaphoreServiceClient{coordv1.NewSemaphoreServiceClient(a.conn), coordv1.NewSemaphoreServiceClient(b.conn)}
	res := &fencedResource{inside: map[uint64]bool{}, seen: map[uint64]bool{}}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		sem := sems[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				g, err := sem.Acquire(ctx(t), &coordv1.AcquireRequest{Name: "pool", Limit: limit, Ttl: dur(time.Minute), Wait: dur(time.Minute), Owner: fmt.Sprint(i)})
				if err != nil || !g.GetAcquired() {
					t.Errorf("caller %d: Acquire = %v, %v", i, g, err)
					return
				}
				if g.GetHolders() > limit || g.GetLimit() != limit {
					t.Errorf("caller %d: Acquire = %v; want at most %d holders, limit %d", i, g, limit, limit)
				}
				if res.enter(g.GetFence()) {
					granted.Add(1)
					time.Sleep(200 * time.Microsecond)
					res.leave(g.GetFence())
				}
				if r, err := sem.Release(ctx(t), &coordv1.SemaphoreServiceReleaseRequest{Name: "pool", Token: g.GetToken()}); err != nil || !r.GetReleased() {
					t.Errorf("caller %d: Release = %v, %v", i, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if res.most > limit || res.refused > 0 || granted.Load() != callers*rounds {
		t.Fatalf("%d permits granted, at most %d inside at once, %d fences reused; want %d, at most %d, 0",
			granted.Load(), res.most, res.refused, callers*rounds, limit)
	}
	t.Logf("%d permits, at most %d holders inside at once", granted.Load(), res.most)
}

// TestObserveAcrossInstances: an observer on B sees, in order and with
// consecutive revisions, every change that sessions on A and B make: a
// leader, a new value, a resignation, a leader on B, and that leader's
// session half-closing.
func TestObserveAcrossInstances(t *testing.T) {
	a, b := newPair(t)
	ea, eb := coordv1.NewElectionServiceClient(a.conn), coordv1.NewElectionServiceClient(b.conn)
	name := "leader"
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	obs, err := eb.Observe(c, &coordv1.ObserveRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *coordv1.ObserveResponse, 100)
	go func() {
		for {
			r, err := obs.Recv()
			if err != nil {
				close(got)
				return
			}
			got <- r
		}
	}()
	next := func(what string) *coordv1.ObserveResponse {
		t.Helper()
		select {
		case r, ok := <-got:
			if !ok {
				t.Fatalf("%s: the Observe stream ended", what)
			}
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing observed in 10s", what)
		}
		return nil
	}
	if r := next("the current leader"); r.GetHasLeader() {
		t.Fatalf("first response %v; want no leader yet", r)
	}
	sa, sA := a.openSession(t, "", time.Minute)
	g, err := ea.Campaign(ctx(t), &coordv1.CampaignRequest{Name: name, Value: []byte("a1"), SessionId: sA.GetSessionId()})
	if err != nil || !g.GetElected() {
		t.Fatalf("Campaign on A = %v, %v", g, err)
	}
	r1 := next("A's leadership")
	if !r1.GetHasLeader() || string(r1.GetLeader().GetValue()) != "a1" || r1.GetLeader().GetFence() != g.GetFence() {
		t.Fatalf("observed %v; want leader a1 with fence %d", r1, g.GetFence())
	}
	if _, err := ea.Proclaim(ctx(t), &coordv1.ProclaimRequest{Name: name, Token: g.GetToken(), Value: []byte("a2")}); err != nil {
		t.Fatal(err)
	}
	r2 := next("A's new value")
	if string(r2.GetLeader().GetValue()) != "a2" || r2.GetRev() != r1.GetRev()+1 {
		t.Fatalf("observed %v after %v; want value a2 at the next revision", r2, r1)
	}
	if r, err := ea.Resign(ctx(t), &coordv1.ResignRequest{Name: name, Token: g.GetToken()}); err != nil || !r.GetResigned() {
		t.Fatalf("Resign = %v, %v", r, err)
	}
	r3 := next("A's resignation")
	if r3.GetHasLeader() || r3.GetRev() != r2.GetRev()+1 {
		t.Fatalf("observed %v after %v; want no leader at the next revision", r3, r2)
	}
	_, sB := b.openSession(t, "", time.Minute)
	gb, err := eb.Campaign(ctx(t), &coordv1.CampaignRequest{Name: name, Value: []byte("b1"), SessionId: sB.GetSessionId()})
	if err != nil || !gb.GetElected() || gb.GetFence() <= g.GetFence() {
		t.Fatalf("Campaign on B = %v, %v; want elected with a fence above %d", gb, err, g.GetFence())
	}
	r4 := next("B's leadership")
	if string(r4.GetLeader().GetValue()) != "b1" || r4.GetRev() != r3.GetRev()+1 {
		t.Fatalf("observed %v after %v; want leader b1 at the next revision", r4, r3)
	}
	for _, r := range []*coordv1.ObserveResponse{r1, r2, r3, r4} {
		if r.GetMissed() != 0 {
			t.Fatalf("observed %v: missed changes", r)
		}
	}
	_ = sa
}

// TestLockDelayAfterExpiry: 100 sessions with a lock-delay of 300ms each
// hold a lock and then expire (their stream is cut, not half-closed), with
// a waiter on each lock: no waiter is granted before the session's expiry
// + the delay − 10 ms, by the store's clock.
func TestLockDelayAfterExpiry(t *testing.T) {
	const (
		n     = 100
		ttl   = 500 * time.Millisecond
		delay = 300 * time.Millisecond
	)
	a, b := newPair(t)
	var wg sync.WaitGroup
	var early atomic.Int64
	sem := make(chan struct{}, 20)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprint("delayed-", i)
			k, resp := a.openSessionWith(t, &coordv1.KeepAliveRequest{Ttl: dur(ttl), LockDelay: dur(delay)})
			g, err := a.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, SessionId: resp.GetSessionId()})
			if err != nil || !g.GetAcquired() {
				t.Errorf("%s: Lock = %v, %v", name, g, err)
				return
			}
			k.cancel() // cut, not a half-close: the session expires, unrenewed
			expiry := resp.GetExpireTime().AsTime()
			w, err := b.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Wait: dur(10 * time.Second)})
			if err != nil || !w.GetAcquired() {
				t.Errorf("%s: waiting Lock = %v, %v", name, w, err)
				return
			}
			granted := b.held(t, name).GetAcquireTime().AsTime()
			if granted.Before(expiry.Add(delay - 10*time.Millisecond)) {
				early.Add(1)
				t.Errorf("%s: granted %v after the session's expiry; want at least the lock-delay %v (−10ms)", name, granted.Sub(expiry), delay)
			}
		}()
	}
	wg.Wait()
	if early.Load() > 0 {
		t.Fatalf("%d of %d locks granted before their lock-delay", early.Load(), n)
	}
}

// TestLockDelayNotOnCleanEnd: a session that half-closes, or releases its
// lock, leaves no delay: the waiter is granted at once.
func TestLockDelayNotOnCleanEnd(t *testing.T) {
	h := newHarness(t)
	for _, how := range []string{"release", "half-close"} {
		name := "clean-" + how
		k, resp := h.openSessionWith(t, &coordv1.KeepAliveRequest{Ttl: dur(time.Minute), LockDelay: dur(time.Minute)})
		g, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, SessionId: resp.GetSessionId()})
		if err != nil || !g.GetAcquired() {
			t.Fatalf("Lock = %v, %v", g, err)
		}
		if how == "release" {
			if _, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: name, Token: g.GetToken()}); err != nil {
				t.Fatal(err)
			}
		} else if err := k.stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		w, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Wait: dur(10 * time.Second)})
		if err != nil || !w.GetAcquired() {
			t.Fatalf("%s: Lock = %v, %v", how, w, err)
		}
		if d := time.Since(h.held(t, name).GetAcquireTime().AsTime()); d > 30*time.Second {
			t.Fatalf("%s: granted late", how)
		}
	}
}

// openSessionWith opens a KeepAlive stream with a first request of the
// caller's.
func (h *harness) openSessionWith(t testing.TB, first *coordv1.KeepAliveRequest) (*keepAlive, *coordv1.KeepAliveResponse) {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	stream, err := h.sessions.KeepAlive(c)
	if err != nil {
		t.Fatal(err)
	}
	k := &keepAlive{t: t, stream: stream, cancel: cancel}
	t.Cleanup(cancel)
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("KeepAlive Recv: %v", err)
	}
	return k, resp
}

// TestDeadInstanceWaitersStopBlocking: B's waiter is ahead of A's in the
// queue when B loses the store for good (every call it makes fails, as
// for a coordd that died: it can neither refresh its ticket nor take it
// out); once the holder releases, A's waiter is granted within 2 s of B's
// death.
func TestDeadInstanceWaitersStopBlocking(t *testing.T) {
	var faulty *storetest.Faulty
	a := newHarness(t)
	b := newHarness(t, func(c *config) {
		c.shared = a
		c.wrap = func(st store.Store) store.Store { faulty = storetest.NewFaulty(st); return faulty }
	})
	name := "dies"
	held, err := a.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Owner: "holder"})
	if err != nil || !held.GetAcquired() {
		t.Fatalf("Lock = %v, %v", held, err)
	}
	bc, bcancel := context.WithCancel(ctx(t))
	defer bcancel()
	bdone := make(chan error, 1)
	go func() {
		_, err := b.locks.Lock(bc, &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Wait: dur(time.Minute), Owner: "b"})
		bdone <- err
	}()
	waitFor(t, 10*time.Second, "B's waiter is not in the queue", func() bool { return lockWaiters(t, a, name) == 1 })
	adone := make(chan *coordv1.LockResponse, 1)
	go func() {
		g, err := a.locks.Lock(ctx(t), &coordv1.LockRequest{Name: name, Ttl: dur(time.Minute), Wait: dur(time.Minute), Owner: "a"})
		if err != nil {
			t.Error(err)
		}
		adone <- g
	}()
	waitFor(t, 10*time.Second, "A's waiter is not in the queue", func() bool { return lockWaiters(t, a, name) == 2 })
	faulty.Fail("AcquireHold", "RefreshTickets", "LeaveQueue", "AbandonHold", "ReleaseHold", "GetHolds")
	died := time.Now()
	bcancel()
	if err := <-bdone; err == nil {
		t.Fatal("B's waiter returned no error")
	}
	if _, err := a.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: name, Token: held.GetToken()}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-adone:
		if !g.GetAcquired() {
			t.Fatalf("A's waiter = %v; want acquired", g)
		}
		if d := time.Since(died); d > 2*time.Second {
			t.Fatalf("A's waiter granted %v after B died; want within 2s", d)
		}
		t.Logf("A's waiter granted %v after B died", time.Since(died))
	case <-time.After(5 * time.Second):
		t.Fatal("A's waiter still blocked 5s after B died")
	}
}

// TestLocalQuotaAcrossInstances: a policy with a local quota, hammered on
// two instances at once, admits at most its limit across them (and loses
// at most a chunk per instance).
func TestLocalQuotaAcrossInstances(t *testing.T) {
	hot := withPolicies(map[string]limiter.Policy{
		"hot": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 200, Period: time.Hour}, LocalQuota: 10},
	})
	a, b := newPair(t, withFakeClock, hot) // one instant: one window
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		on := []*harness{a, b}[i%2]
		wg.Go(func() {
			for range 60 {
				r, err := on.limits.Allow(ctx(t), &coordv1.AllowRequest{Key: "k", Policy: "hot"})
				if err != nil {
					t.Error(err)
					return
				}
				if r.GetAllowed() {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n > 200 || n < 180 {
		t.Fatalf("admitted %d across the instances, want at most the limit 200, and at least 200 less a chunk per instance", n)
	}
}
