package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

func (h *harness) acquire(t testing.TB, c context.Context, req *coordv1.AcquireRequest) *coordv1.AcquireResponse {
	t.Helper()
	resp, err := h.semaphores.Acquire(c, req)
	if err != nil {
		t.Fatalf("Acquire(%v): %v", req, err)
	}
	return resp
}

func (h *harness) getSemaphore(t testing.TB, c context.Context, name string) *coordv1.GetSemaphoreResponse {
	t.Helper()
	resp, err := h.semaphores.GetSemaphore(c, &coordv1.GetSemaphoreRequest{Name: name})
	if err != nil {
		t.Fatalf("GetSemaphore(%s): %v", name, err)
	}
	return resp
}

// awaitWaiters waits until waiters(), read through the API, is n: a waiting
// call has joined the queue.
func awaitWaiters(t testing.TB, what string, n uint32, waiters func() uint32) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); waiters() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d waiters after 10s, want %d", what, waiters(), n)
		}
	}
}

// TestSemaphoreLimit: at most limit holders at once, each with its own
// token and a greater fence; the next one is told who holds and for how
// long; a release lets it in; GetSemaphore lists the holders.
func TestSemaphoreLimit(t *testing.T) {
	h := newHarness(t, withFakeClock)
	c := ctx(t)
	a := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 2, Ttl: dur(30 * time.Second), Owner: "a"})
	h.clock.Advance(time.Second)
	b := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 2, Ttl: dur(30 * time.Second), Owner: "b"})
	if !a.GetAcquired() || !b.GetAcquired() || a.GetHolders() != 1 || b.GetHolders() != 2 || a.GetLimit() != 2 || b.GetLimit() != 2 {
		t.Fatalf("Acquire a = %v, b = %v; want both acquired, holders 1 then 2, limit 2", a, b)
	}
	if len(a.GetToken()) != 32 || a.GetToken() == b.GetToken() || b.GetFence() <= a.GetFence() {
		t.Fatalf("a = %v, b = %v: want distinct tokens and a greater fence for b", a, b)
	}
	h.clock.Advance(time.Second)
	full := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 2, Ttl: dur(30 * time.Second), Owner: "c"})
	if full.GetAcquired() || full.GetToken() != "" || full.GetFence() != 0 || full.GetHolders() != 2 || full.GetLimit() != 2 {
		t.Fatalf("third Acquire = %v, want not acquired, 2 holders of 2", full)
	}
	// The holder whose lease ends first is a's, with 28s left.
	if full.GetHolder() != "a" || full.GetTtl().AsDuration() != 28*time.Second || !full.GetExpireTime().AsTime().Equal(a.GetExpireTime().AsTime()) {
		t.Fatalf("third Acquire = %v, want holder a with 28s left, until %v", full, a.GetExpireTime().AsTime())
	}
	g := h.getSemaphore(t, c, "pool")
	if g.GetLimit() != 2 || g.GetWaiters() != 0 || len(g.GetHolders()) != 2 {
		t.Fatalf("GetSemaphore = %v, want limit 2, two holders, no waiter", g)
	}
	for i, want := range []*coordv1.AcquireResponse{a, b} {
		p := g.GetHolders()[i]
		if p.GetFence() != want.GetFence() || p.GetShared() || p.GetSessionBound() || !p.GetExpireTime().AsTime().Equal(want.GetExpireTime().AsTime()) {
			t.Errorf("GetSemaphore holder %d = %v, want fence %d, a plain lease until %v", i, p, want.GetFence(), want.GetExpireTime().AsTime())
		}
	}
	if g.GetHolders()[0].GetOwner() != "a" || g.GetHolders()[1].GetOwner() != "b" {
		t.Errorf("GetSemaphore holders = %v, want a then b (by fence)", g.GetHolders())
	}

	rel, err := h.semaphores.Release(c, &coordv1.SemaphoreServiceReleaseRequest{Name: "pool", Token: a.GetToken()})
	if err != nil || !rel.GetReleased() {
		t.Fatalf("Release(a) = %v, %v", rel, err)
	}
	if rel, err := h.semaphores.Release(c, &coordv1.SemaphoreServiceReleaseRequest{Name: "pool", Token: a.GetToken()}); err != nil || rel.GetReleased() {
		t.Fatalf("Release(a) again = %v, %v; want released=false, no error", rel, err)
	}
	d := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 2, Ttl: dur(30 * time.Second), Owner: "d"})
	if !d.GetAcquired() || d.GetFence() <= b.GetFence() || d.GetHolders() != 2 {
		t.Fatalf("Acquire after a release = %v, want acquired with a fence above %d, 2 holders", d, b.GetFence())
	}
	// A semaphore's name is apart from a lock's.
	if l := h.lock(t, &coordv1.LockRequest{Name: "pool", Ttl: dur(time.Minute)}); !l.GetAcquired() {
		t.Fatalf("Lock(pool) = %v, want acquired: the semaphore of that name is another thing", l)
	}
}

// TestSemaphoreLimitMismatch: a limit other than the one of the live
// holders is FAILED_PRECONDITION LIMIT_MISMATCH and changes nothing; once
// the semaphore is empty, another limit is taken.
func TestSemaphoreLimitMismatch(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	a := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 2, Ttl: dur(time.Minute)})
	if !a.GetAcquired() {
		t.Fatalf("Acquire = %v", a)
	}
	for _, limit := range []int32{1, 3} {
		_, err := h.semaphores.Acquire(c, &coordv1.AcquireRequest{Name: "pool", Limit: limit, Ttl: dur(time.Minute), Wait: dur(time.Second)})
		wantStatus(t, err, codes.FailedPrecondition, "LIMIT_MISMATCH")
	}
	if g := h.getSemaphore(t, c, "pool"); g.GetLimit() != 2 || len(g.GetHolders()) != 1 || g.GetWaiters() != 0 {
		t.Fatalf("GetSemaphore after the mismatches = %v, want limit 2, one holder, nobody waiting", g)
	}
	if rel, err := h.semaphores.Release(c, &coordv1.SemaphoreServiceReleaseRequest{Name: "pool", Token: a.GetToken()}); err != nil || !rel.GetReleased() {
		t.Fatalf("Release = %v, %v", rel, err)
	}
	if g := h.getSemaphore(t, c, "pool"); g.GetLimit() != 0 || len(g.GetHolders()) != 0 {
		t.Fatalf("GetSemaphore of an empty semaphore = %v, want limit 0, no holder", g)
	}
	if b := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 3, Ttl: dur(time.Minute)}); !b.GetAcquired() || b.GetLimit() != 3 {
		t.Fatalf("Acquire with limit 3 of the empty semaphore = %v, want acquired with limit 3", b)
	}
}

// TestSemaphoreWaitersInArrivalOrder: waiters are granted in the order they
// came, each as a permit frees up, and GetSemaphore counts them.
func TestSemaphoreWaitersInArrivalOrder(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	held := h.acquire(t, c, &coordv1.AcquireRequest{Name: "one", Limit: 1, Ttl: dur(time.Minute), Owner: "holder"})
	if !held.GetAcquired() {
		t.Fatalf("Acquire = %v", held)
	}
	type result struct {
		resp *coordv1.AcquireResponse
		err  error
	}
	results := make([]chan result, 3)
	for i := range results {
		results[i] = make(chan result, 1)
		go func() {
			r, err := h.semaphores.Acquire(c, &coordv1.AcquireRequest{Name: "one", Limit: 1, Ttl: dur(time.Minute), Wait: dur(30 * time.Second), Owner: string(rune('a' + i))})
			results[i] <- result{r, err}
		}()
		awaitWaiters(t, "GetSemaphore", uint32(i+1), func() uint32 { return h.getSemaphore(t, c, "one").GetWaiters() })
	}
	token := held.GetToken()
	for i, ch := range results {
		if rel, err := h.semaphores.Release(c, &coordv1.SemaphoreServiceReleaseRequest{Name: "one", Token: token}); err != nil || !rel.GetReleased() {
			t.Fatalf("Release %d = %v, %v", i, rel, err)
		}
		r := <-ch
		if r.err != nil || !r.resp.GetAcquired() {
			t.Fatalf("waiter %d = %v, %v; want acquired", i, r.resp, r.err)
		}
		for _, later := range results[i+1:] {
			select {
			case r := <-later:
				t.Fatalf("a later waiter answered before its turn: %v, %v", r.resp, r.err)
			default:
			}
		}
		if g := h.getSemaphore(t, c, "one"); len(g.GetHolders()) != 1 || g.GetHolders()[0].GetOwner() != string(rune('a'+i)) {
			t.Fatalf("after release %d: GetSemaphore = %v, want the waiter %c holding", i, g, 'a'+i)
		}
		token = r.resp.GetToken()
	}
}

// TestSemaphoreRenewAndExpiry: Renew extends a permit with the same fence;
// after expiry it is LOCK_NOT_HELD, and its place is free.
func TestSemaphoreRenewAndExpiry(t *testing.T) {
	h := newHarness(t, withFakeClock)
	c := ctx(t)
	p := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 1, Ttl: dur(5 * time.Second), MaxHold: dur(8 * time.Second)})
	h.clock.Advance(4 * time.Second)
	r, err := h.semaphores.Renew(c, &coordv1.SemaphoreServiceRenewRequest{Name: "pool", Token: p.GetToken(), Ttl: dur(5 * time.Second)})
	if err != nil || r.GetFence() != p.GetFence() || r.GetTtl().AsDuration() != 4*time.Second {
		t.Fatalf("Renew = %v, %v; want the same fence, 4s left (max_hold 8s)", r, err)
	}
	h.clock.Advance(4 * time.Second)
	_, err = h.semaphores.Renew(c, &coordv1.SemaphoreServiceRenewRequest{Name: "pool", Token: p.GetToken(), Ttl: dur(5 * time.Second)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_NOT_HELD")
	if q := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 1, Ttl: dur(5 * time.Second)}); !q.GetAcquired() || q.GetFence() <= p.GetFence() {
		t.Fatalf("Acquire after expiry = %v, want acquired with a greater fence", q)
	}
}

// TestSemaphoreSessionBound: a permit bound to a session is renewed by it
// (Renew is LOCK_SESSION_BOUND), is given back at once when the session's
// stream half-closes, and a session asking again gets its permit back.
func TestSemaphoreSessionBound(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	k, first := h.openSession(t, "", 30*time.Second)
	id := first.GetSessionId()
	p := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 1, SessionId: id, Owner: "s"})
	if !p.GetAcquired() || p.GetAlreadyHeld() {
		t.Fatalf("Acquire = %v", p)
	}
	again := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 1, SessionId: id, Wait: dur(time.Second)})
	if !again.GetAcquired() || !again.GetAlreadyHeld() || again.GetToken() != p.GetToken() || again.GetFence() != p.GetFence() {
		t.Fatalf("Acquire by the same session = %v, want its permit back (already_held)", again)
	}
	if g := h.getSemaphore(t, c, "pool"); len(g.GetHolders()) != 1 || !g.GetHolders()[0].GetSessionBound() {
		t.Fatalf("GetSemaphore = %v, want one session-bound holder", g)
	}
	_, err := h.semaphores.Renew(c, &coordv1.SemaphoreServiceRenewRequest{Name: "pool", Token: p.GetToken(), Ttl: dur(time.Minute)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_SESSION_BOUND")

	waiter := make(chan *coordv1.AcquireResponse, 1)
	go func() {
		r, err := h.semaphores.Acquire(c, &coordv1.AcquireRequest{Name: "pool", Limit: 1, Ttl: dur(time.Minute), Wait: dur(20 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		waiter <- r
	}()
	awaitWaiters(t, "GetSemaphore", 1, func() uint32 { return h.getSemaphore(t, c, "pool").GetWaiters() })
	k.close()
	if r := <-waiter; !r.GetAcquired() || r.GetFence() <= p.GetFence() {
		t.Fatalf("waiter after the session ended = %v, want acquired with a greater fence", r)
	}

	_, err = h.semaphores.Acquire(c, &coordv1.AcquireRequest{Name: "other", Limit: 1, SessionId: id})
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
}

// TestSemaphoreMetrics: grants count by kind and mode, waits by kind, and
// the holders at grant.
func TestSemaphoreMetrics(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withMetrics(&reg))
	c := ctx(t)
	a := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 1, Ttl: dur(time.Minute)})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if r, err := h.semaphores.Acquire(c, &coordv1.AcquireRequest{Name: "pool", Limit: 1, Ttl: dur(time.Minute), Wait: dur(20 * time.Second)}); err != nil || !r.GetAcquired() {
			t.Errorf("waiting Acquire = %v, %v", r, err)
		}
	}()
	awaitWaiters(t, "GetSemaphore", 1, func() uint32 { return h.getSemaphore(t, c, "pool").GetWaiters() })
	if _, err := h.semaphores.Release(c, &coordv1.SemaphoreServiceReleaseRequest{Name: "pool", Token: a.GetToken()}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := counterValue(t, reg, "coordd_holds_granted_total", "kind", "semaphore", "mode", "shared"); got != 2 {
		t.Errorf("coordd_holds_granted_total{semaphore,shared} = %v, want 2", got)
	}
	if got := counterValue(t, reg, "coordd_holds_contended_total", "kind", "semaphore"); got != 1 {
		t.Errorf("coordd_holds_contended_total{semaphore} = %v, want 1", got)
	}
	if got := metricValue(t, reg, "coordd_hold_wait_seconds", "kind", "semaphore"); got != 1 {
		t.Errorf("coordd_hold_wait_seconds{semaphore} count = %v, want 1", got)
	}
	if got := counterValue(t, reg, "coordd_holds_granted_total", "kind", "lock", "mode", "exclusive"); got != 0 {
		t.Errorf("coordd_holds_granted_total{lock,exclusive} = %v, want 0", got)
	}
}

// TestAuthIsolatesSemaphores: a key of namespace A cannot see, renew or
// release namespace B's permits, even with B's name and token, and A's
// semaphore of the same name is another one (with its own limit).
func TestAuthIsolatesSemaphores(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)))
	a, b := as(t, keyA), as(t, keyB)
	pb := h.acquire(t, b, &coordv1.AcquireRequest{Name: "pool", Limit: 1, Ttl: dur(time.Minute), Owner: "owner-b"})
	if !pb.GetAcquired() {
		t.Fatalf("B: Acquire = %v", pb)
	}
	if g := h.getSemaphore(t, a, "pool"); len(g.GetHolders()) != 0 || g.GetLimit() != 0 {
		t.Errorf("A: GetSemaphore(pool) = %v, want empty", g)
	}
	if rel, err := h.semaphores.Release(a, &coordv1.SemaphoreServiceReleaseRequest{Name: "pool", Token: pb.GetToken()}); err != nil || rel.GetReleased() {
		t.Errorf("A: Release(B's token) = %v, %v; want released=false", rel, err)
	}
	_, err := h.semaphores.Renew(a, &coordv1.SemaphoreServiceRenewRequest{Name: "pool", Token: pb.GetToken(), Ttl: dur(time.Hour)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_NOT_HELD")
	// Another limit in A is no mismatch: A's semaphore is its own.
	if pa := h.acquire(t, a, &coordv1.AcquireRequest{Name: "pool", Limit: 5, Ttl: dur(time.Minute)}); !pa.GetAcquired() || pa.GetHolders() != 1 {
		t.Errorf("A: Acquire(pool, limit 5) = %v, want acquired, alone", pa)
	}
	if g := h.getSemaphore(t, b, "pool"); len(g.GetHolders()) != 1 || g.GetHolders()[0].GetOwner() != "owner-b" || g.GetLimit() != 1 {
		t.Errorf("B: GetSemaphore(pool) = %v, want owner-b's permit, limit 1", g)
	}
}
