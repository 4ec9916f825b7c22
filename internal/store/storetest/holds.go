package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// The cases of store.Holds: shared locks, semaphore permits, the queue of
// tickets (FIFO, writer preference, lapse), targeted wake-ups, lock-delay,
// CheckFence and GetHolds. A request "comes back" by calling AcquireHold
// again with the same store.HoldRequest (its token and ticket), as a waiter
// does after a wake-up or at RetryAt.
func holdTests() []test {
	return append([]test{
		{"SharedCoexist", holdsSharedCoexist},
		{"SharedMaxHolders", holdsSharedMaxHolders},
		{"SharedBlockedByExclusive", holdsSharedBlockedByExclusive},
		{"WriterPreference", holdsWriterPreference},
		{"SharedTicketsDoNotBlockShared", holdsSharedTicketsDoNotBlockShared},
		{"ExclusiveWaitsForTicketsAhead", holdsExclusiveWaitsForTicketsAhead},
		{"FIFO", holdsFIFO},
		{"FIFOSemaphore", holdsFIFOSemaphore},
		{"WithoutWaitNothingQueued", holdsWithoutWaitNothingQueued},
		{"TicketLapses", holdsTicketLapses},
		{"TicketLeaseBoundary", holdsTicketLeaseBoundary},
		{"RefreshTickets", holdsRefreshTickets},
		{"LeaveQueue", holdsLeaveQueue},
		{"AbandonLeavesTheQueue", holdsAbandonLeavesTheQueue},
		{"TooManyWaiters", holdsTooManyWaiters},
		{"Semaphore", holdsSemaphore},
		{"SemaphoreLimitMismatch", holdsSemaphoreLimitMismatch},
		{"SemaphoreFences", holdsSemaphoreFences},
		{"KindsApart", holdsKindsApart},
		{"RenewHold", holdsRenewHold},
		{"ReleaseHold", holdsReleaseHold},
		{"GetHolds", holdsGetHolds},
		{"WakeTargeted", holdsWakeTargeted},
		{"WakeSharedRun", holdsWakeSharedRun},
		{"WakeSharedRunCapped", holdsWakeSharedRunCapped},
		{"WakeSemaphore", holdsWakeSemaphore},
		{"WakeOnEnd", holdsWakeOnEnd},
		{"WakeOnLeaveQueue", holdsWakeOnLeaveQueue},
		{"LockDelay", holdsLockDelay},
		{"LockDelayRetryAtLater", holdsLockDelayRetryAtLater},
		{"LockDelayThenFIFO", holdsLockDelayThenFIFO},
		{"ReleasedAfterRecordedDeadline", holdsReleasedAfterRecordedDeadline},
		{"BoundBeyondCleanBatch", holdsBoundBeyondCleanBatch},
		{"PlainAndSharedTakeTurns", holdsPlainAndSharedTakeTurns},
		{"NoLockDelay", holdsNoLockDelay},
		{"CheckFence", holdsCheckFence},
		{"SessionPermits", holdsSessionPermits},
		{"SessionPermitMaxHold", holdsSessionPermitMaxHold},
		{"SessionAlreadyHolds", holdsSessionAlreadyHolds},
		{"AlreadyHeldLeavesTheQueue", holdsAlreadyHeldLeavesTheQueue},
		{"SessionCapCountsEveryKind", holdsSessionCapCountsEveryKind},
		{"SessionClose", holdsSessionClose},
		{"SessionAbandon", holdsSessionAbandon},
		{"ConcurrentSemaphore", holdsConcurrentSemaphore},
		{"ConcurrentSharedExclusive", holdsConcurrentSharedExclusive},
	}, handoffTests()...)
}

// newInstance returns a fresh coordd instance ID (16 hex digits, no ':').
func newInstance() string { return token.New()[:16] }

func exclusiveReq(name, owner string, ttl time.Duration) store.HoldRequest {
	return store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), Owner: owner, TTL: ttl}
}

func sharedReq(name, owner string, ttl time.Duration) store.HoldRequest {
	r := exclusiveReq(name, owner, ttl)
	r.Shared = true
	return r
}

func permitReq(name, owner string, limit int, ttl time.Duration) store.HoldRequest {
	return store.HoldRequest{Kind: store.HoldSemaphore, Name: name, Token: token.New(), Owner: owner, TTL: ttl, Limit: limit}
}

// waiting gives r a fresh ticket of instance with the lease coordd uses.
func waiting(r store.HoldRequest, instance string) store.HoldRequest {
	return waitingFor(r, instance, store.WaitLease)
}

func waitingFor(r store.HoldRequest, instance string, lease time.Duration) store.HoldRequest {
	r.Wait = &store.WaitTicket{Ticket: token.New(), Instance: instance, Lease: lease}
	return r
}

func inSession(r store.HoldRequest, id string) store.HoldRequest {
	r.SessionID = id
	return r
}

func (e *env) try(r store.HoldRequest) store.Grant {
	e.Helper()
	g, err := e.s.AcquireHold(e.ctx, r)
	noErr(e, fmt.Sprintf("AcquireHold %s by %s", r.Kind, r.Owner), err)
	return g
}

// grant makes r, which must be granted.
func (e *env) grant(r store.HoldRequest) store.Grant {
	e.Helper()
	g := e.try(r)
	if !g.Acquired || g.AlreadyHeld || g.Fence == 0 || g.Queued || !g.RetryAt.IsZero() {
		e.Fatalf("AcquireHold %s by %s = %+v; want a new grant", r.Kind, r.Owner, g)
	}
	return g
}

// refusal is what a not-granted answer must say: the blocking holder (""
// for none), its deadline, RetryAt, and whether the ticket waits.
type refusal struct {
	holder  string
	expire  time.Time
	retryAt time.Time
	queued  bool
}

// refused makes r, which must not be granted, and checks the answer.
func (e *env) refused(what string, r store.HoldRequest, want refusal) store.Grant {
	e.Helper()
	g := e.try(r)
	var ttl time.Duration
	if want.holder != "" {
		ttl = want.expire.Sub(e.now())
	}
	if g.Acquired || g.AlreadyHeld || g.Fence != 0 || g.Token != "" || g.Holder != want.holder || g.TTL != ttl ||
		!g.ExpireTime.Equal(want.expire) || !g.RetryAt.Equal(want.retryAt) || g.Queued != want.queued {
		e.Errorf("%s: grant =\n\t%+v\nwant not acquired, holder %q, ttl %v, expire %v, retry at %v, queued %v",
			what, g, want.holder, ttl, want.expire, want.retryAt, want.queued)
	}
	return g
}

func (e *env) releaseHold(kind store.HoldKind, name, tok string) bool {
	e.Helper()
	rel, err := e.s.ReleaseHold(e.ctx, kind, name, tok, "")
	noErr(e, "ReleaseHold", err)
	if !rel.Released && rel.Held != 0 {
		e.Errorf("ReleaseHold %s: not released, yet held %v", kind, rel.Held)
	}
	if len(rel.Handoffs) > 0 {
		e.Errorf("ReleaseHold %s without an instance: hand-offs %+v", kind, rel.Handoffs)
	}
	return rel.Released
}

// free releases r's grant, which must be live.
func (e *env) free(r store.HoldRequest) {
	e.Helper()
	if !e.releaseHold(r.Kind, r.Name, r.Token) {
		e.Fatalf("ReleaseHold %s by %s: false, want true", r.Kind, r.Owner)
	}
}

func (e *env) holds(kind store.HoldKind, name string) store.HoldInfo {
	e.Helper()
	info, err := e.s.GetHolds(e.ctx, kind, name)
	noErr(e, "GetHolds", err)
	return info
}

// holder is the HolderInfo of a grant, for wantHolds (its TTL is computed
// there from the clock).
func holder(owner string, g store.Grant, shared, bound bool, acquired time.Time) store.HolderInfo {
	return store.HolderInfo{Owner: owner, Fence: g.Fence, Shared: shared, SessionBound: bound, ExpireTime: g.ExpireTime, AcquireTime: acquired}
}

// wantHolds checks every field of GetHolds(kind, name): the holders in
// fence order, the live tickets, the limit, and the single-holder fields
// from the holder with the lowest fence.
func (e *env) wantHolds(what string, kind store.HoldKind, name string, waiters, limit int, holders ...store.HolderInfo) {
	e.Helper()
	got := e.holds(kind, name)
	want := store.HoldInfo{Waiters: waiters, Limit: limit}
	for _, h := range holders {
		h.TTL = h.ExpireTime.Sub(e.now())
		want.Holders = append(want.Holders, h)
	}
	if len(want.Holders) > 0 {
		h := want.Holders[0]
		want.Held, want.Owner, want.Fence, want.SessionBound, want.TTL, want.ExpireTime, want.AcquireTime =
			true, h.Owner, h.Fence, h.SessionBound, h.TTL, h.ExpireTime, h.AcquireTime
	}
	same := len(got.Holders) == len(want.Holders) && got.Waiters == want.Waiters && got.Limit == want.Limit &&
		got.Held == want.Held && got.Owner == want.Owner && got.Fence == want.Fence && got.SessionBound == want.SessionBound &&
		got.TTL == want.TTL && got.ExpireTime.Equal(want.ExpireTime) && got.AcquireTime.Equal(want.AcquireTime)
	for i := 0; same && i < len(got.Holders); i++ {
		g, w := got.Holders[i], want.Holders[i]
		same = g.Owner == w.Owner && g.Fence == w.Fence && g.Shared == w.Shared && g.SessionBound == w.SessionBound &&
			g.TTL == w.TTL && g.ExpireTime.Equal(w.ExpireTime) && g.AcquireTime.Equal(w.AcquireTime)
	}
	if !same {
		e.Errorf("%s: GetHolds(%s) =\n\t%+v\nwant\n\t%+v", what, kind, got, want)
	}
}

func (e *env) waiters(kind store.HoldKind, name string) int {
	e.Helper()
	return e.holds(kind, name).Waiters
}

func (e *env) refresh(kind store.HoldKind, name string, lease time.Duration, tickets ...string) []string {
	e.Helper()
	gone, err := e.s.RefreshTickets(e.ctx, kind, name, tickets, lease)
	noErr(e, "RefreshTickets", err)
	return gone
}

func (e *env) leave(r store.HoldRequest) {
	e.Helper()
	hs, err := e.s.LeaveQueue(e.ctx, r.Kind, r.Name, r.Wait.Ticket, "", "")
	noErr(e, "LeaveQueue", err)
	if len(hs) > 0 {
		e.Errorf("LeaveQueue without an instance: hand-offs %+v", hs)
	}
}

func (e *env) checkFence(kind store.HoldKind, name string, fence uint64) bool {
	e.Helper()
	ok, err := e.s.CheckFence(e.ctx, kind, name, fence)
	noErr(e, "CheckFence", err)
	return ok
}

// sessionWithDelay creates a session of ttl with lock-delay d.
func (e *env) sessionWithDelay(ttl, d time.Duration) string {
	e.Helper()
	id := token.New()
	_, err := e.s.CreateSession(e.ctx, id, ttl, 0, d)
	noErr(e, "CreateSession", err)
	return id
}

// waitSub subscribes to the wake-ups of instance's tickets of (kind, name).
func (e *env) waitSub(kind store.HoldKind, name, instance string) *store.Subscription {
	e.Helper()
	return e.subscribe(store.WaitTopic(kind, name, instance))
}

// holdsSharedCoexist: shared holders hold together; an exclusive request
// waits for all of them and is told of the one whose lease ends first.
func holdsSharedCoexist(e *env) {
	n := e.name("rw")
	t0 := e.now()
	r1, r2 := sharedReq(n, "r1", 20*time.Second), sharedReq(n, "r2", 10*time.Second)
	g1 := e.grant(r1)
	eq(e, "first shared grant's Holders", g1.Holders, 1)
	g2 := e.grant(r2)
	eq(e, "second shared grant's Holders", g2.Holders, 2)
	if g2.Fence <= g1.Fence {
		e.Errorf("second shared fence %d, want > %d", g2.Fence, g1.Fence)
	}
	e.wantHolds("two shared holders", store.HoldLock, n, 0, 0,
		holder("r1", g1, true, false, t0), holder("r2", g2, true, false, t0))
	e.advance(time.Second)
	x := exclusiveReq(n, "x", time.Minute)
	e.refused("exclusive beside shared holders", x, refusal{holder: "r2", expire: t0.Add(10 * time.Second), retryAt: t0.Add(10 * time.Second)})
	e.free(r2)
	e.refused("exclusive beside one shared holder", x, refusal{holder: "r1", expire: t0.Add(20 * time.Second), retryAt: t0.Add(20 * time.Second)})
	g3 := e.grant(sharedReq(n, "r3", time.Second))
	eq(e, "third shared grant's Holders", g3.Holders, 2)
	e.advance(time.Second) // r3 expires
	e.free(r1)
	gx := e.grant(x)
	eq(e, "exclusive grant's Holders", gx.Holders, 1)
	info, err := e.s.GetHolds(e.ctx, store.HoldLock, n)
	noErr(e, "GetHolds", err)
	if len(info.Holders) != 1 || info.Holders[0].Shared || info.Owner != "x" || info.Fence != gx.Fence {
		e.Errorf("GetLock of the exclusive holder = %+v; want x alone, not shared", info)
	}
}

// holdsSharedMaxHolders: MaxHolders caps the shared holders at once.
func holdsSharedMaxHolders(e *env) {
	n := e.name("rw")
	t0 := e.now()
	capped := func(owner string, ttl time.Duration) store.HoldRequest {
		r := sharedReq(n, owner, ttl)
		r.MaxHolders = 2
		return r
	}
	a := capped("a", 30*time.Second)
	e.grant(a)
	e.grant(capped("b", 10*time.Second))
	c := capped("c", time.Minute)
	e.refused("a third shared holder with MaxHolders 2", c, refusal{holder: "b", expire: t0.Add(10 * time.Second), retryAt: t0.Add(10 * time.Second)})
	e.free(a)
	g := e.grant(c)
	eq(e, "Holders after the cap freed a place", g.Holders, 2)
}

// holdsSharedBlockedByExclusive: an exclusive holder keeps shared requests
// out; a shared holder keeps exclusive ones out.
func holdsSharedBlockedByExclusive(e *env) {
	n := e.name("rw")
	t0 := e.now()
	x := exclusiveReq(n, "x", 10*time.Second)
	e.grant(x)
	s := sharedReq(n, "s", time.Minute)
	e.refused("shared beside an exclusive holder", s, refusal{holder: "x", expire: t0.Add(10 * time.Second), retryAt: t0.Add(10 * time.Second)})
	e.refused("exclusive beside an exclusive holder", exclusiveReq(n, "y", time.Minute), refusal{holder: "x", expire: t0.Add(10 * time.Second), retryAt: t0.Add(10 * time.Second)})
	e.advance(10 * time.Second)
	t1 := e.now()
	e.grant(s)
	e.refused("exclusive beside a shared holder", exclusiveReq(n, "y", time.Minute), refusal{holder: "s", expire: t1.Add(time.Minute), retryAt: t1.Add(time.Minute)})
}

// holdsWriterPreference: an exclusive ticket blocks every later shared
// request, with a ticket or without, although the shared holders would let
// them in; the exclusive request waits for the shared holders and is
// granted before the later shared ones.
func holdsWriterPreference(e *env) {
	n := e.name("rw")
	t0 := e.now()
	a, b := newInstance(), newInstance()
	r1 := sharedReq(n, "r1", 10*time.Second)
	e.grant(r1)
	x := waiting(exclusiveReq(n, "x", time.Minute), a)
	e.refused("exclusive beside a shared holder", x, refusal{holder: "r1", expire: t0.Add(10 * time.Second), retryAt: t0.Add(10 * time.Second), queued: true})
	// Blocked only by the ticket ahead: no holder to name, no time to retry
	// at, a wake-up will come.
	late := sharedReq(n, "late", time.Minute)
	e.refused("shared without a ticket behind an exclusive ticket", late, refusal{})
	lateq := waiting(sharedReq(n, "lateq", time.Minute), b)
	e.refused("shared with a ticket behind an exclusive ticket", lateq, refusal{queued: true})
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 2)
	e.refused("exclusive coming back beside the shared holder", x, refusal{holder: "r1", expire: t0.Add(10 * time.Second), retryAt: t0.Add(10 * time.Second), queued: true})
	e.refused("the queued shared request coming back", lateq, refusal{queued: true})
	e.free(r1)
	e.refused("the queued shared request before the exclusive one came back", lateq, refusal{queued: true})
	gx := e.grant(x)
	eq(e, "Waiters after the exclusive grant", e.waiters(store.HoldLock, n), 1)
	e.refused("shared beside the exclusive holder", lateq, refusal{holder: "x", expire: gx.ExpireTime, retryAt: gx.ExpireTime, queued: true})
	e.refused("shared without a ticket beside the exclusive holder", late, refusal{holder: "x", expire: gx.ExpireTime, retryAt: gx.ExpireTime})
	e.free(x)
	e.grant(lateq)
	e.grant(late)
	eq(e, "Waiters at the end", e.waiters(store.HoldLock, n), 0)
}

// holdsSharedTicketsDoNotBlockShared: a shared request waits only for the
// exclusive tickets ahead of it, not for the shared ones.
func holdsSharedTicketsDoNotBlockShared(e *env) {
	n := e.name("rw")
	a := newInstance()
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	s1 := waiting(sharedReq(n, "s1", 2*time.Minute), a)
	s2 := waiting(sharedReq(n, "s2", time.Minute), a)
	x := waiting(exclusiveReq(n, "x", time.Minute), a)
	s3 := waiting(sharedReq(n, "s3", time.Minute), a)
	for _, r := range []store.HoldRequest{s1, s2, x, s3} {
		e.try(r)
	}
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 4)
	e.free(h)
	e.refused("shared behind an exclusive ticket", s3, refusal{queued: true})
	e.refused("exclusive behind shared tickets", x, refusal{queued: true})
	g2 := e.grant(s2) // s1, shared, is ahead: it does not block s2
	e.grant(s1)
	e.refused("exclusive beside the shared holders", x, refusal{holder: "s2", expire: g2.ExpireTime, retryAt: g2.ExpireTime, queued: true})
	e.refused("shared behind the exclusive ticket, beside shared holders", s3, refusal{queued: true})
	e.free(s1)
	e.free(s2)
	gx := e.grant(x)
	e.refused("shared beside the exclusive holder", s3, refusal{holder: "x", expire: gx.ExpireTime, retryAt: gx.ExpireTime, queued: true})
}

// holdsExclusiveWaitsForTicketsAhead: a free lock is not granted to a
// request while a live ticket is ahead of it; a request without a ticket
// is behind the whole queue.
func holdsExclusiveWaitsForTicketsAhead(e *env) {
	n := e.name("lock")
	a := newInstance()
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	w := waiting(exclusiveReq(n, "w", time.Minute), a)
	e.try(w)
	e.free(h)
	e.refused("no ticket, a ticket ahead", exclusiveReq(n, "jumper", time.Minute), refusal{})
	g, err := e.s.AcquireHold(e.ctx, exclusiveReq(n, "jumper", time.Minute))
	noErr(e, "AcquireHold", err)
	if g.Acquired {
		e.Errorf("AcquireHold without a ticket jumped the queue: %+v", g)
	}
	e.wantHolds("the free lock with a ticket", store.HoldLock, n, 1, 0)
	gw := e.grant(w)
	e.wantHolds("after the ticket's grant", store.HoldLock, n, 0, 0, holder("w", gw, false, false, e.now()))
}

// fifoWaiters queues n requests, one at a time (each queued before the next
// arrives), alternating between two instances.
func (e *env) fifoWaiters(count int, mk func(i int) store.HoldRequest) []store.HoldRequest {
	e.Helper()
	insts := []string{newInstance(), newInstance()}
	ws := make([]store.HoldRequest, count)
	for i := range ws {
		ws[i] = waiting(mk(i), insts[i%2])
		if g := e.try(ws[i]); g.Acquired || !g.Queued {
			e.Fatalf("waiter %d = %+v; want queued", i, g)
		}
	}
	return ws
}

// comeBack makes every waiter from i on come back, the last first, and
// checks that exactly waiter i is granted.
func (e *env) comeBack(ws []store.HoldRequest, i int) {
	e.Helper()
	for j := len(ws) - 1; j >= i; j-- {
		g := e.try(ws[j])
		switch {
		case j == i && !g.Acquired:
			e.Fatalf("waiter %d, at the head, after a release: %+v; want granted", i, g)
		case j != i && g.Acquired:
			e.Fatalf("waiter %d granted while waiter %d is ahead of it", j, i)
		case j != i && !g.Queued:
			e.Fatalf("waiter %d coming back: %+v; want queued", j, g)
		}
	}
}

// holdsFIFO: 100 waiters of two instances, each queued before the next
// arrives, are granted in arrival order, however they come back.
func holdsFIFO(e *env) {
	n := e.name("fifo")
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	ws := e.fifoWaiters(100, func(i int) store.HoldRequest { return exclusiveReq(n, fmt.Sprint("w", i), time.Minute) })
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 100)
	cur := h
	for i := range ws {
		e.free(cur)
		e.comeBack(ws, i)
		if got := e.waiters(store.HoldLock, n); got != len(ws)-i-1 {
			e.Fatalf("Waiters after waiter %d's grant = %d, want %d", i, got, len(ws)-i-1)
		}
		cur = ws[i]
	}
}

// holdsFIFOSemaphore: the same with a semaphore of 3 permits.
func holdsFIFOSemaphore(e *env) {
	n := e.name("sem")
	var held []store.HoldRequest
	for i := range 3 {
		r := permitReq(n, fmt.Sprint("h", i), 3, time.Minute)
		e.grant(r)
		held = append(held, r)
	}
	ws := e.fifoWaiters(40, func(i int) store.HoldRequest { return permitReq(n, fmt.Sprint("w", i), 3, time.Minute) })
	for i := range ws {
		e.free(held[0])
		held = append(held[1:], ws[i])
		e.comeBack(ws, i)
	}
	eq(e, "Waiters at the end", e.waiters(store.HoldSemaphore, n), 0)
}

// holdsWithoutWaitNothingQueued: a request without Wait is answered and
// forgotten.
func holdsWithoutWaitNothingQueued(e *env) {
	n := e.name("lock")
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	e.try(exclusiveReq(n, "a", time.Minute))
	e.try(sharedReq(n, "b", time.Minute))
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 0)
	e.free(h)
	e.grant(exclusiveReq(n, "c", time.Minute))
}

// holdsTicketLapses: a ticket whose lease passes without its request coming
// back blocks no one: the next is granted, RefreshTickets reports it gone
// and wakes whom its lapse lets in, and its request coming back later
// queues again, at the back.
func holdsTicketLapses(e *env) {
	n := e.name("lock")
	a, b := newInstance(), newInstance()
	subA, subB := e.waitSub(store.HoldLock, n, a), e.waitSub(store.HoldLock, n, b)
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	w1 := waitingFor(exclusiveReq(n, "w1", time.Minute), a, time.Second) // its coordd dies
	w2 := waitingFor(exclusiveReq(n, "w2", time.Minute), b, 10*time.Second)
	e.try(w1)
	e.try(w2)
	drain(subA)
	drain(subB)
	e.free(h)
	e.wantWake(subA, "the head's instance after the release")
	e.wantNoWake(subB, "the second ticket's instance after the release")
	e.advance(time.Second - us)
	e.refused("behind a ticket 1µs before its lease ends", w2, refusal{queued: true})
	e.advance(us)
	eqStrings(e, "RefreshTickets of the live ticket: gone", e.refresh(store.HoldLock, n, 10*time.Second, w2.Wait.Ticket), nil)
	e.wantWake(subB, "the next ticket's instance after RefreshTickets dropped the lapsed one")
	eqStrings(e, "RefreshTickets of both: gone", e.refresh(store.HoldLock, n, 10*time.Second, w1.Wait.Ticket, w2.Wait.Ticket), []string{w1.Wait.Ticket})
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 1)
	g2 := e.grant(w2)
	e.refused("the lapsed ticket's request coming back", w1, refusal{holder: "w2", expire: g2.ExpireTime, retryAt: g2.ExpireTime, queued: true})
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 1)

	// Without RefreshTickets: the next acquisition drops the lapsed ticket.
	m := e.name("other")
	h = exclusiveReq(m, "h", time.Minute)
	e.grant(h)
	w := waiting(exclusiveReq(m, "w", time.Minute), a)
	e.try(w)
	e.free(h)
	e.advance(store.WaitLease)
	e.grant(exclusiveReq(m, "late", time.Minute))
	eq(e, "Waiters after the lapse", e.waiters(store.HoldLock, m), 0)
}

// holdsTicketLeaseBoundary: a ticket is live while now < its lease's end,
// and its request coming back renews the lease to now + Lease.
func holdsTicketLeaseBoundary(e *env) {
	n := e.name("lock")
	a := newInstance()
	h := exclusiveReq(n, "h", time.Hour)
	e.grant(h)
	w := waitingFor(exclusiveReq(n, "w", time.Minute), a, 2*time.Second)
	e.try(w)
	e.advance(time.Second)
	e.try(waitingFor(exclusiveReq(n, "x", time.Minute), a, 2*time.Second))
	e.try(w) // renews w's lease to now + 2s
	e.advance(2*time.Second - us)
	eq(e, "Waiters 1µs before the leases end", e.waiters(store.HoldLock, n), 2)
	e.free(h)
	e.refused("no ticket, 1µs before the leases end", exclusiveReq(n, "y", time.Minute), refusal{})
	e.advance(us)
	eq(e, "Waiters when the leases end", e.waiters(store.HoldLock, n), 0)
	e.grant(exclusiveReq(n, "y", time.Minute))
}

// holdsRefreshTickets: RefreshTickets renews the tickets still queued and
// reports the rest gone: granted, left, or never queued.
func holdsRefreshTickets(e *env) {
	n := e.name("lock")
	a := newInstance()
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	w1 := waitingFor(exclusiveReq(n, "w1", time.Minute), a, time.Second)
	w2 := waitingFor(exclusiveReq(n, "w2", time.Minute), a, time.Second)
	w3 := waitingFor(exclusiveReq(n, "w3", time.Minute), a, time.Second)
	for _, r := range []store.HoldRequest{w1, w2, w3} {
		e.try(r)
	}
	gone := e.refresh(store.HoldLock, n, time.Second)
	if len(gone) != 0 {
		e.Errorf("RefreshTickets of none = %q, want none", gone)
	}
	for range 5 {
		e.advance(time.Second - us)
		eqStrings(e, "RefreshTickets of the queued tickets", e.refresh(store.HoldLock, n, time.Second, w1.Wait.Ticket, w2.Wait.Ticket, w3.Wait.Ticket), nil)
	}
	eq(e, "Waiters kept by refreshing", e.waiters(store.HoldLock, n), 3)
	e.free(h)
	e.grant(w1)
	e.leave(w2)
	never := token.New()
	eqStrings(e, "RefreshTickets after a grant, a LeaveQueue and with a ticket never queued",
		e.refresh(store.HoldLock, n, time.Second, w1.Wait.Ticket, w2.Wait.Ticket, w3.Wait.Ticket, never),
		[]string{w1.Wait.Ticket, w2.Wait.Ticket, never})
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 1)
	// A longer lease: w3 outlives its first lease.
	eqStrings(e, "RefreshTickets with a longer lease", e.refresh(store.HoldLock, n, 5*time.Second, w3.Wait.Ticket), nil)
	e.advance(5*time.Second - us)
	eq(e, "Waiters 1µs before the longer lease ends", e.waiters(store.HoldLock, n), 1)
	e.advance(us)
	eqStrings(e, "RefreshTickets after the lease ended", e.refresh(store.HoldLock, n, time.Second, w3.Wait.Ticket), []string{w3.Wait.Ticket})
	eqStrings(e, "RefreshTickets of a name never used", e.refresh(store.HoldSemaphore, e.name("never"), time.Second, w3.Wait.Ticket), []string{w3.Wait.Ticket})
}

// heldWithTwoWaiters makes a lock n held by h, with w1 then w2 queued
// behind it, waiting on instance a.
func (e *env) heldWithTwoWaiters() (n, a string, h, w1, w2 store.HoldRequest) {
	e.Helper()
	n, a = e.name("lock"), newInstance()
	h = exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	w1 = waiting(exclusiveReq(n, "w1", time.Minute), a)
	w2 = waiting(exclusiveReq(n, "w2", time.Minute), a)
	e.try(w1)
	e.try(w2)
	return n, a, h, w1, w2
}

// holdsLeaveQueue: a ticket that leaves blocks no one; an unknown ticket is
// not an error.
func holdsLeaveQueue(e *env) {
	n, a, h, w1, w2 := e.heldWithTwoWaiters()
	e.leave(w1)
	e.leave(w1)
	_, err := e.s.LeaveQueue(e.ctx, store.HoldLock, n, token.New(), token.New(), a)
	noErr(e, "LeaveQueue of an unknown ticket", err)
	_, err = e.s.LeaveQueue(e.ctx, store.HoldSemaphore, e.name("never"), token.New(), "", a)
	noErr(e, "LeaveQueue of a name never used", err)
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 1)
	e.free(h)
	e.grant(w2)
	// The request that left, coming back, is queued anew, at the back.
	w3 := waiting(exclusiveReq(n, "w3", time.Minute), a)
	e.try(w3)
	e.try(w1)
	e.free(w2)
	e.refused("the request that left, behind a later one", w1, refusal{queued: true})
	e.grant(w3)
}

// holdsAbandonLeavesTheQueue: AbandonHold with the request's ticket takes
// the ticket out of the queue, so that no release hands that token the hold
// afterwards: the release lets in the next ticket. (A failed waiting
// Lock's clean-up: its ticket, left queued, would be handed a lock nobody
// ends before its TTL.)
func holdsAbandonLeavesTheQueue(e *env) {
	n, a, h, w1, w2 := e.heldWithTwoWaiters()
	noErr(e, "AbandonHold with the head's ticket", e.s.AbandonHold(e.ctx, store.HoldLock, n, w1.Token, w1.Wait.Ticket))
	eq(e, "Waiters after the abandon", e.waiters(store.HoldLock, n), 1)
	noErr(e, "AbandonHold of a ticket no longer queued", e.s.AbandonHold(e.ctx, store.HoldLock, n, w1.Token, w1.Wait.Ticket))
	rel, err := e.s.ReleaseHold(e.ctx, store.HoldLock, n, h.Token, a)
	noErr(e, "ReleaseHold", err)
	if len(rel.Handoffs) != 1 || rel.Handoffs[0].Ticket != w2.Wait.Ticket || rel.Handoffs[0].Token != w2.Token {
		e.Fatalf("hand-offs of the release = %+v; want one, to w2's ticket", rel.Handoffs)
	}
	if info := e.holds(store.HoldLock, n); !info.Held || info.Owner != "w2" {
		e.Fatalf("after the release: %+v; want held by w2", info)
	}
	e.refused("the abandoned request's token", w1, refusal{holder: "w2", expire: e.now().Add(time.Minute), retryAt: e.now().Add(time.Minute), queued: true})

	// The head's ticket leaving a free lock wakes the next ticket's
	// instance, as LeaveQueue does.
	m := e.name("lock-free")
	a, b := newInstance(), newInstance()
	subB := e.waitSub(store.HoldLock, m, b)
	h = exclusiveReq(m, "h", time.Minute)
	e.grant(h)
	wa, wb := waiting(exclusiveReq(m, "a", time.Minute), a), waiting(exclusiveReq(m, "b", time.Minute), b)
	e.try(wa)
	e.try(wb)
	e.free(h) // no hand-off (no instance): a's instance is woken, and b's is not
	drain(subB)
	noErr(e, "AbandonHold with the head's ticket, the lock free", e.s.AbandonHold(e.ctx, store.HoldLock, m, wa.Token, wa.Wait.Ticket))
	e.wantWake(subB, "the next ticket's instance after the head's abandon")
	e.grant(wb)
}

// holdsTooManyWaiters: a name's queue has at most store.MaxWaiters live
// tickets; lapsed ones do not count.
func holdsTooManyWaiters(e *env) {
	n := e.name("lock")
	a := newInstance()
	e.grant(exclusiveReq(n, "h", time.Hour))
	const workers = 16
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < store.MaxWaiters; i += workers {
				g, err := e.s.AcquireHold(e.ctx, waitingFor(exclusiveReq(n, "w", time.Minute), a, 10*time.Second))
				if err == nil && !g.Queued {
					err = fmt.Errorf("waiter %d not queued: %+v", i, g)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	noErr(e, "queueing MaxWaiters tickets", errors.Join(errs...))
	eq(e, "Waiters", e.waiters(store.HoldLock, n), store.MaxWaiters)
	over := waiting(exclusiveReq(n, "over", time.Minute), a)
	_, err := e.s.AcquireHold(e.ctx, over)
	isErr(e, "one ticket more than MaxWaiters", err, store.ErrTooManyWaiters)
	// Without a ticket, a request is answered as ever.
	e.refused("no ticket, a full queue", exclusiveReq(n, "x", time.Minute), refusal{holder: "h", expire: base.Add(time.Hour), retryAt: base.Add(time.Hour)})
	e.advance(10 * time.Second) // every ticket lapses
	e.refused("a ticket after the others lapsed", over, refusal{holder: "h", expire: base.Add(time.Hour), retryAt: base.Add(time.Hour), queued: true})
	eq(e, "Waiters after the lapse", e.waiters(store.HoldLock, n), 1)
}

// holdsSemaphore: at most Limit permits at once; a refusal names the holder
// whose lease ends first; a released or expired permit frees its place.
func holdsSemaphore(e *env) {
	n := e.name("sem")
	t0 := e.now()
	p1, p2, p3 := permitReq(n, "p1", 3, 30*time.Second), permitReq(n, "p2", 3, 10*time.Second), permitReq(n, "p3", 3, 20*time.Second)
	var gs []store.Grant
	for i, r := range []store.HoldRequest{p1, p2, p3} {
		g := e.grant(r)
		eq(e, fmt.Sprint("permit ", i+1, "'s Holders"), g.Holders, i+1)
		eq(e, fmt.Sprint("permit ", i+1, "'s Limit"), g.Limit, 3)
		gs = append(gs, g)
	}
	e.wantHolds("three permits", store.HoldSemaphore, n, 0, 3,
		holder("p1", gs[0], false, false, t0), holder("p2", gs[1], false, false, t0), holder("p3", gs[2], false, false, t0))
	p4 := permitReq(n, "p4", 3, time.Minute)
	g := e.refused("a fourth permit", p4, refusal{holder: "p2", expire: t0.Add(10 * time.Second), retryAt: t0.Add(10 * time.Second)})
	eq(e, "refusal's Holders", g.Holders, 3)
	eq(e, "refusal's Limit", g.Limit, 3)
	e.free(p1)
	g4 := e.grant(p4)
	eq(e, "Holders after a release", g4.Holders, 3)
	e.advance(10 * time.Second) // p2 expires
	p5 := permitReq(n, "p5", 3, time.Minute)
	g5 := e.grant(p5)
	eq(e, "Holders after an expiry", g5.Holders, 3)
	e.refused("one more", permitReq(n, "p6", 3, time.Minute), refusal{holder: "p3", expire: t0.Add(20 * time.Second), retryAt: t0.Add(20 * time.Second)})
	e.advance(10 * time.Second)
	e.free(p4)
	e.free(p5)
	e.wantHolds("every permit ended", store.HoldSemaphore, n, 0, 0)
}

// holdsSemaphoreLimitMismatch: the limit is the one of the semaphore's live
// holders and tickets; another one is ErrLimitMismatch and changes nothing;
// once they are all gone, any limit goes.
func holdsSemaphoreLimitMismatch(e *env) {
	n := e.name("sem")
	a := newInstance()
	h := permitReq(n, "h", 1, 10*time.Second)
	e.grant(h)
	mismatch := func(what string, limit int) {
		e.Helper()
		r := waiting(permitReq(n, "m", limit, time.Minute), a)
		_, err := e.s.AcquireHold(e.ctx, r)
		isErr(e, what, err, store.ErrLimitMismatch)
	}
	mismatch("limit 2 beside a holder of limit 1", 2)
	eq(e, "Waiters after a mismatch", e.waiters(store.HoldSemaphore, n), 0)
	w := waiting(permitReq(n, "w", 1, time.Minute), a)
	e.try(w)
	e.free(h)
	mismatch("limit 2 beside a ticket of limit 1", 2)
	e.wantHolds("a ticket alone", store.HoldSemaphore, n, 1, 1)
	e.leave(w)
	e.wantHolds("nothing left", store.HoldSemaphore, n, 0, 0)
	g := e.grant(permitReq(n, "two", 2, 10*time.Second))
	eq(e, "the new limit", g.Limit, 2)
	mismatch("limit 1 beside a holder of limit 2", 1)
	e.advance(10 * time.Second)
	g = e.grant(permitReq(n, "one", 1, 10*time.Second))
	eq(e, "the limit after the holder expired", g.Limit, 1)
	// A lapsed ticket does not keep its limit.
	w = waitingFor(permitReq(n, "w", 1, time.Minute), a, time.Second)
	e.try(w)
	e.advance(10 * time.Second)
	g = e.grant(permitReq(n, "three", 3, time.Minute))
	eq(e, "the limit after the ticket lapsed", g.Limit, 3)
}

// holdsSemaphoreFences: every permit gets its own fence, each greater than
// the one before, as a lock's.
func holdsSemaphoreFences(e *env) {
	n := e.name("sem")
	var last uint64
	var held []store.HoldRequest
	for i := range 50 {
		r := permitReq(n, "p", 4, time.Minute)
		g := e.grant(r)
		if g.Fence <= last || g.Fence < floor(e.now()) {
			e.Fatalf("permit %d: fence %d, want > %d and >= floor %d", i, g.Fence, last, floor(e.now()))
		}
		last = g.Fence
		held = append(held, r)
		if len(held) == 4 {
			e.free(held[0])
			held = held[1:]
		}
		e.advance(time.Duration(i%3) * us)
	}
}

// holdsKindsApart: a name of one kind is apart from the same name of
// another kind.
func holdsKindsApart(e *env) {
	n := e.name("both")
	l := exclusiveReq(n, "l", time.Minute)
	gl := e.grant(l)
	e.advance(us) // fences of different kinds may be equal: make them differ
	t1 := e.now()
	p := permitReq(n, "p", 1, time.Minute)
	gp := e.grant(p)
	e.wantHolds("the lock", store.HoldLock, n, 0, 0, holder("l", gl, false, false, base))
	e.wantHolds("the semaphore", store.HoldSemaphore, n, 0, 1, holder("p", gp, false, false, t1))
	if e.releaseHold(store.HoldSemaphore, n, l.Token) {
		e.Error("ReleaseHold of the semaphore with the lock's token: true")
	}
	if e.checkFence(store.HoldSemaphore, n, gl.Fence) {
		e.Error("CheckFence of the semaphore with the lock's fence: true")
	}
	_, err := e.s.RenewHold(e.ctx, store.HoldLock, n, p.Token, time.Minute)
	isErr(e, "RenewHold of the lock with the permit's token", err, store.ErrNotHeld)
	e.free(l)
	e.wantHolds("the semaphore after the lock's release", store.HoldSemaphore, n, 0, 1, holder("p", gp, false, false, t1))
}

// holdsRenewHold: RenewHold of a permit or a shared holder, as a lock's.
func holdsRenewHold(e *env) {
	t0 := e.now()
	n := e.name("sem")
	p := permitReq(n, "p", 2, 10*time.Second)
	p.MaxHold = 25 * time.Second
	g := e.grant(p)
	e.advance(8 * time.Second)
	l, err := e.s.RenewHold(e.ctx, store.HoldSemaphore, n, p.Token, 10*time.Second)
	noErr(e, "RenewHold", err)
	e.wantLease("renew", l, store.Lease{TTL: 10 * time.Second, ExpireTime: t0.Add(18 * time.Second), Fence: g.Fence})
	e.advance(8 * time.Second)
	l, err = e.s.RenewHold(e.ctx, store.HoldSemaphore, n, p.Token, 10*time.Second)
	noErr(e, "RenewHold up to the max hold", err)
	e.wantLease("renew up to the max hold", l, store.Lease{TTL: 9 * time.Second, ExpireTime: t0.Add(25 * time.Second), Fence: g.Fence})
	g.ExpireTime = t0.Add(25 * time.Second)
	e.wantHolds("after renewals", store.HoldSemaphore, n, 0, 2, holder("p", g, false, false, t0))
	e.advance(9 * time.Second)
	_, err = e.s.RenewHold(e.ctx, store.HoldSemaphore, n, p.Token, 10*time.Second)
	isErr(e, "RenewHold at the max hold", err, store.ErrNotHeld)
	_, err = e.s.RenewHold(e.ctx, store.HoldSemaphore, n, token.New(), 10*time.Second)
	isErr(e, "RenewHold with another token", err, store.ErrNotHeld)

	m := e.name("rw")
	t1 := e.now()
	s1, s2 := sharedReq(m, "s1", 10*time.Second), sharedReq(m, "s2", 10*time.Second)
	g1, g2 := e.grant(s1), e.grant(s2)
	e.advance(5 * time.Second)
	l, err = e.s.RenewHold(e.ctx, store.HoldLock, m, s2.Token, time.Minute)
	noErr(e, "RenewHold of a shared holder", err)
	e.wantLease("renew of a shared holder", l, store.Lease{TTL: time.Minute, ExpireTime: t1.Add(65 * time.Second), Fence: g2.Fence})
	l, err = e.s.RenewHold(e.ctx, store.HoldLock, m, s1.Token, time.Second)
	noErr(e, "RenewHold of a shared holder", err)
	e.wantLease("a shortening renewal of a shared holder", l, store.Lease{TTL: time.Second, ExpireTime: t1.Add(6 * time.Second), Fence: g1.Fence})
	g1.ExpireTime, g2.ExpireTime = t1.Add(6*time.Second), t1.Add(65*time.Second)
	e.wantHolds("shared holders after renewals", store.HoldLock, m, 0, 0, holder("s1", g1, true, false, t1), holder("s2", g2, true, false, t1))

	id := e.session(time.Minute)
	q := inSession(permitReq(e.name("bound"), "q", 1, 0), id)
	e.grant(q)
	_, err = e.s.RenewHold(e.ctx, store.HoldSemaphore, q.Name, q.Token, time.Minute)
	isErr(e, "RenewHold of a session-bound permit", err, store.ErrSessionBound)
}

// holdsReleaseHold: ReleaseHold and AbandonHold of one holder leave the
// others; a wrong token or kind changes nothing.
func holdsReleaseHold(e *env) {
	t0 := e.now()
	n := e.name("sem")
	p1, p2 := permitReq(n, "p1", 2, time.Minute), permitReq(n, "p2", 2, time.Minute)
	e.grant(p1)
	e.advance(time.Second)
	g2 := e.grant(p2)
	e.advance(2*time.Second + 5*us)
	for _, bad := range []struct {
		kind store.HoldKind
		tok  string
	}{{store.HoldSemaphore, token.New()}, {store.HoldLock, p1.Token}, {store.HoldElection, p1.Token}} {
		if e.releaseHold(bad.kind, n, bad.tok) {
			e.Errorf("ReleaseHold(%s, %.6s…): true, want false", bad.kind, bad.tok)
		}
		noErr(e, "AbandonHold with a wrong token or kind", e.s.AbandonHold(e.ctx, bad.kind, n, bad.tok, ""))
	}
	rel, err := e.s.ReleaseHold(e.ctx, store.HoldSemaphore, n, p1.Token, newInstance())
	noErr(e, "ReleaseHold", err)
	if !rel.Released || rel.Held != 3*time.Second+5*us || len(rel.Handoffs) > 0 {
		e.Errorf("ReleaseHold = %+v; want released after 3.000005s, no hand-off", rel)
	}
	if e.releaseHold(store.HoldSemaphore, n, p1.Token) {
		e.Error("second ReleaseHold: true")
	}
	e.wantHolds("after p1's release", store.HoldSemaphore, n, 0, 2, holder("p2", g2, false, false, t0.Add(time.Second)))
	noErr(e, "AbandonHold", e.s.AbandonHold(e.ctx, store.HoldSemaphore, n, p2.Token, ""))
	e.wantHolds("after p2 was abandoned", store.HoldSemaphore, n, 0, 0)

	m := e.name("rw")
	s1, s2 := sharedReq(m, "s1", time.Minute), sharedReq(m, "s2", time.Minute)
	e.grant(s1)
	gs2 := e.grant(s2)
	e.free(s1)
	e.wantHolds("the other shared holder stays", store.HoldLock, m, 0, 0, holder("s2", gs2, true, false, e.now()))
	e.refused("exclusive beside the remaining shared holder", exclusiveReq(m, "x", time.Minute), refusal{holder: "s2", expire: gs2.ExpireTime, retryAt: gs2.ExpireTime})
	ok, _, err := ReleaseLock(e.ctx, e.s, m, s2.Token)
	noErr(e, "ReleaseHold of a shared holder", err)
	if !ok {
		e.Error("ReleaseHold of a shared holder: false")
	}
	e.grant(exclusiveReq(m, "x", time.Minute))
}

// holdsGetHolds: GetHolds lists every live holder, by fence, with the
// live tickets and the semaphore's limit; GetLock is GetHolds of a lock.
func holdsGetHolds(e *env) {
	t0 := e.now()
	n := e.name("rw")
	e.wantHolds("a name never used", store.HoldLock, n, 0, 0)
	a := newInstance()
	id := e.session(30 * time.Second)
	s1 := inSession(sharedReq(n, "s1", 0), id)
	g1 := e.grant(s1)
	e.advance(time.Second)
	s2 := sharedReq(n, "s2", 10*time.Second)
	g2 := e.grant(s2)
	x := waiting(exclusiveReq(n, "x", time.Minute), a)
	e.try(x)
	s3 := waitingFor(sharedReq(n, "s3", time.Minute), a, 5*time.Second)
	e.try(s3)
	e.wantHolds("two shared holders and two tickets", store.HoldLock, n, 2, 0,
		holder("s1", g1, true, true, t0), holder("s2", g2, true, false, t0.Add(time.Second)))
	info, err := e.s.GetHolds(e.ctx, store.HoldLock, n)
	noErr(e, "GetHolds", err)
	if len(info.Holders) != 2 || info.Waiters != 2 || info.Owner != "s1" || !info.SessionBound {
		e.Errorf("GetLock = %+v; want GetHolds' answer", info)
	}
	e.advance(store.WaitLease) // x's ticket lapses (not renewed)
	e.wantHolds("after a ticket lapsed", store.HoldLock, n, 1, 0,
		holder("s1", g1, true, true, t0), holder("s2", g2, true, false, t0.Add(time.Second)))
	e.advance(9 * time.Second) // s2 expires, s3 lapses
	e.wantHolds("after a holder expired", store.HoldLock, n, 0, 0, holder("s1", g1, true, true, t0))

	m := e.name("sem")
	p1 := permitReq(m, "p1", 2, time.Minute)
	gp1 := e.grant(p1)
	p2 := inSession(permitReq(m, "p2", 2, 0), id)
	gp2 := e.grant(p2)
	w := waiting(permitReq(m, "w", 2, time.Minute), a)
	e.try(w)
	now := e.now()
	e.wantHolds("a full semaphore", store.HoldSemaphore, m, 1, 2, holder("p1", gp1, false, false, now), holder("p2", gp2, false, true, now))
	e.free(p1)
	e.free(p2)
	e.wantHolds("a semaphore with a ticket only", store.HoldSemaphore, m, 1, 2)
	e.leave(w)
	e.wantHolds("an empty semaphore", store.HoldSemaphore, m, 0, 0)
}

// holdsWakeTargeted: a release wakes the instance of the head ticket, and
// not an instance whose ticket cannot be granted yet.
func holdsWakeTargeted(e *env) {
	n := e.name("lock")
	a, b := newInstance(), newInstance()
	subA, subB := e.waitSub(store.HoldLock, n, a), e.waitSub(store.HoldLock, n, b)
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	w1, w2 := waiting(exclusiveReq(n, "w1", time.Minute), a), waiting(exclusiveReq(n, "w2", time.Minute), b)
	e.try(w1)
	e.try(w2)
	drain(subA)
	drain(subB)
	e.free(h)
	// A wake-up comes at once, not at a waiter's fallback timer.
	e.wantWakeWithin(subA, time.Second, "the head's instance after ReleaseHold")
	e.wantNoWake(subB, "the next ticket's instance after ReleaseHold")
	e.grant(w1)
	e.free(w1)
	e.wantWake(subB, "the new head's instance after ReleaseHold")
	e.wantNoWake(subA, "an instance without tickets")
}

// holdsWakeSharedRun: a release wakes the run of shared tickets at the head
// (their instances), not the exclusive ticket after them nor the shared
// ones behind it; a release that lets no one in wakes no one.
func holdsWakeSharedRun(e *env) {
	n := e.name("rw")
	insts := []string{newInstance(), newInstance(), newInstance(), newInstance()}
	subs := make([]*store.Subscription, len(insts))
	for i, in := range insts {
		subs[i] = e.waitSub(store.HoldLock, n, in)
	}
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	s0 := waiting(sharedReq(n, "s0", time.Minute), insts[0])
	s1 := waiting(sharedReq(n, "s1", time.Minute), insts[1])
	x2 := waiting(exclusiveReq(n, "x2", time.Minute), insts[2])
	s3 := waiting(sharedReq(n, "s3", time.Minute), insts[3])
	for _, r := range []store.HoldRequest{s0, s1, x2, s3} {
		e.try(r)
	}
	for _, s := range subs {
		drain(s)
	}
	e.free(h)
	e.wantWake(subs[0], "the first shared ticket's instance")
	e.wantWake(subs[1], "the second shared ticket's instance")
	e.wantNoWake(subs[2], "the exclusive ticket's instance")
	e.wantNoWake(subs[3], "the instance of the shared ticket behind the exclusive one")
	e.grant(s0)
	e.grant(s1)
	for _, s := range subs {
		drain(s)
	}
	e.free(s0) // s1 still holds: x2 cannot be granted
	e.wantNoWake(subs[2], "the exclusive ticket's instance while a shared holder remains")
	e.free(s1)
	e.wantWake(subs[2], "the exclusive ticket's instance after the last shared release")
	e.wantNoWake(subs[3], "the shared ticket behind the exclusive one")
}

// holdsWakeSharedRunCapped: the run of shared tickets woken stops at
// MaxHolders.
func holdsWakeSharedRunCapped(e *env) {
	n := e.name("rw")
	a, b := newInstance(), newInstance()
	subA, subB := e.waitSub(store.HoldLock, n, a), e.waitSub(store.HoldLock, n, b)
	capped := func(owner string, ttl time.Duration) store.HoldRequest {
		r := sharedReq(n, owner, ttl)
		r.MaxHolders = 2
		return r
	}
	h1, h2 := capped("h1", time.Minute), capped("h2", time.Minute)
	e.grant(h1)
	e.grant(h2)
	s1, s2 := waiting(capped("s1", time.Hour), a), waiting(capped("s2", time.Hour), b)
	e.try(s1)
	e.try(s2)
	drain(subA)
	drain(subB)
	e.free(h1) // room for one
	e.wantWake(subA, "the first shared ticket's instance")
	e.wantNoWake(subB, "the second shared ticket's instance, with room for one")
	e.grant(s1)
	e.refused("the second shared ticket at the cap", s2, refusal{holder: "h2", expire: base.Add(time.Minute), retryAt: base.Add(time.Minute), queued: true})
	drain(subB)
	e.free(h2)
	e.wantWake(subB, "the second shared ticket's instance")
}

// holdsWakeSemaphore: a freed permit wakes the first ticket's instance
// only.
func holdsWakeSemaphore(e *env) {
	n := e.name("sem")
	insts := []string{newInstance(), newInstance(), newInstance()}
	subs := make([]*store.Subscription, len(insts))
	for i, in := range insts {
		subs[i] = e.waitSub(store.HoldSemaphore, n, in)
	}
	h1, h2 := permitReq(n, "h1", 2, time.Minute), permitReq(n, "h2", 2, time.Minute)
	e.grant(h1)
	e.grant(h2)
	ws := make([]store.HoldRequest, len(insts))
	for i, in := range insts {
		ws[i] = waiting(permitReq(n, fmt.Sprint("w", i), 2, time.Minute), in)
		e.try(ws[i])
	}
	for _, s := range subs {
		drain(s)
	}
	e.free(h1)
	e.wantWake(subs[0], "the first ticket's instance")
	e.wantNoWake(subs[1], "the second ticket's instance")
	e.wantNoWake(subs[2], "the third ticket's instance")
	if g := e.try(ws[1]); g.Acquired || !g.Queued {
		e.Errorf("the second ticket with one free permit and the first ticket ahead: %+v; want queued", g)
	}
	e.grant(ws[0])
	e.free(h2)
	e.wantWake(subs[1], "the second ticket's instance after the next release")
	e.wantNoWake(subs[2], "the third ticket's instance after the next release")
}

// holdsWakeOnEnd: every way a hold ends that lets the head in wakes the
// head's instance, and only it.
func holdsWakeOnEnd(e *env) {
	ends := []struct {
		name string
		end  func(e *env, n string, queue func()) // holds n, queues the tickets, ends the hold
	}{
		{"Release", func(e *env, n string, queue func()) {
			r := exclusiveReq(n, "h", time.Minute)
			e.grant(r)
			queue()
			e.free(r)
		}},
		{"Abandon", func(e *env, n string, queue func()) {
			r := exclusiveReq(n, "h", time.Minute)
			e.grant(r)
			queue()
			noErr(e, "AbandonHold", e.s.AbandonHold(e.ctx, store.HoldLock, n, r.Token, ""))
		}},
		{"ReleaseHold", func(e *env, n string, queue func()) {
			r := exclusiveReq(n, "h", time.Minute)
			e.grant(r)
			queue()
			if !e.release(n, r.Token) {
				e.Fatal("ReleaseHold: false")
			}
		}},
		{"CloseSession", func(e *env, n string, queue func()) {
			id := e.session(time.Minute)
			e.grant(inSession(exclusiveReq(n, "h", 0), id))
			queue()
			_, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
			noErr(e, "CloseSession", err)
		}},
		{"SessionExpiredCheck", func(e *env, n string, queue func()) {
			id := e.session(10 * time.Second)
			e.grant(inSession(exclusiveReq(n, "h", 0), id))
			queue()
			e.advance(10 * time.Second)
			e.check(id) // drops the expired hold
		}},
		{"SessionMaxHoldCheck", func(e *env, n string, queue func()) {
			id := e.session(time.Minute)
			r := inSession(exclusiveReq(n, "h", 0), id)
			r.MaxHold = time.Second
			e.grant(r)
			queue()
			e.advance(time.Second)
			e.keepAlive(id, 0) // drops the hold at its max hold
		}},
		{"ExpiredCleanedUp", func(e *env, n string, queue func()) {
			e.grant(exclusiveReq(n, "h", 10*time.Second))
			queue()
			e.advance(10 * time.Second)
			// A request behind the queue finds the expired holder.
			e.refused("no ticket, behind the queue", exclusiveReq(n, "late", time.Minute), refusal{})
		}},
	}
	for _, c := range ends {
		e.sub(c.name, func(e *env) {
			n := e.name("lock")
			a, b := newInstance(), newInstance()
			subA, subB := e.waitSub(store.HoldLock, n, a), e.waitSub(store.HoldLock, n, b)
			c.end(e, n, func() {
				e.Helper()
				for _, in := range []string{a, b} {
					if g := e.try(waitingFor(exclusiveReq(n, "w", time.Minute), in, time.Hour)); !g.Queued {
						e.Fatalf("a ticket behind the holder: %+v; want queued", g)
					}
				}
				drain(subA)
				drain(subB)
			})
			e.wantWake(subA, "the head's instance")
			e.wantNoWake(subB, "the second ticket's instance")
		})
	}
}

// holdsWakeOnLeaveQueue: a head ticket that leaves the queue lets the next
// in; one that is not at the head, or leaves while the lock is held, lets
// no one in.
func holdsWakeOnLeaveQueue(e *env) {
	n := e.name("lock")
	a, b, c := newInstance(), newInstance(), newInstance()
	subA, subB, subC := e.waitSub(store.HoldLock, n, a), e.waitSub(store.HoldLock, n, b), e.waitSub(store.HoldLock, n, c)
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	wa, wb, wc := waiting(exclusiveReq(n, "a", time.Minute), a), waiting(exclusiveReq(n, "b", time.Minute), b), waiting(exclusiveReq(n, "c", time.Minute), c)
	for _, r := range []store.HoldRequest{wa, wb, wc} {
		e.try(r)
	}
	drain(subA)
	drain(subB)
	drain(subC)
	e.leave(wa) // the lock is held: no one can come in
	e.wantNoWake(subB, "the next ticket's instance while the lock is held")
	e.free(h)
	e.wantWake(subB, "the head's instance after the release")
	e.leave(wc)
	e.wantNoWake(subA, "an instance whose ticket left")
	e.leave(wb)
	e.wantNoWake(subC, "an instance whose ticket left, when the head left")
	e.grant(exclusiveReq(n, "late", time.Minute))
}

// lockDelayCases are the holds a session-bound lock-delay keeps from being
// granted: the first is held by the session, the second asks after.
var lockDelayCases = []struct {
	name        string
	blocks      bool // the held one keeps the asked one out while live
	held, asked func(n string) store.HoldRequest
}{
	{"Exclusive", true, func(n string) store.HoldRequest { return exclusiveReq(n, "bound", 0) },
		func(n string) store.HoldRequest { return exclusiveReq(n, "next", time.Minute) }},
	{"SharedThenShared", false, func(n string) store.HoldRequest { return sharedReq(n, "bound", 0) },
		func(n string) store.HoldRequest { return sharedReq(n, "next", time.Minute) }},
	{"SharedThenExclusive", true, func(n string) store.HoldRequest { return sharedReq(n, "bound", 0) },
		func(n string) store.HoldRequest { return exclusiveReq(n, "next", time.Minute) }},
	// Nothing is granted during the delay, free permits or not.
	{"Semaphore", false, func(n string) store.HoldRequest { return permitReq(n, "bound", 3, 0) },
		func(n string) store.HoldRequest { return permitReq(n, "next", 3, time.Minute) }},
}

// holdsLockDelay: a hold whose session expired keeps its name from anyone
// until its deadline + the session's lock-delay, whoever notices the expiry
// first and whenever; RetryAt says when.
func holdsLockDelay(e *env) {
	const d = 5 * time.Second
	for _, c := range lockDelayCases {
		kind := c.held("").Kind
		e.sub(c.name, func(e *env) {
			n := e.name("delayed")
			t0 := e.now()
			id := e.sessionWithDelay(10*time.Second, d)
			bound := inSession(c.held(n), id)
			g := e.grant(bound)
			dl := t0.Add(10 * time.Second)
			e.advance(10*time.Second - us)
			if c.blocks {
				e.refused("1µs before the session's deadline", c.asked(n), refusal{holder: "bound", expire: dl, retryAt: dl})
			}
			if !e.checkFence(kind, n, g.Fence) {
				e.Error("CheckFence 1µs before the deadline: false")
			}
			e.advance(us)
			if e.checkFence(kind, n, g.Fence) {
				e.Error("CheckFence at the deadline: true")
			}
			e.refused("at the session's deadline", c.asked(n), refusal{retryAt: dl.Add(d)})
			e.advance(d - us)
			e.refused("1µs before the delay ends", c.asked(n), refusal{retryAt: dl.Add(d)})
			w := waiting(c.asked(n), newInstance())
			e.refused("with a ticket, 1µs before the delay ends", w, refusal{retryAt: dl.Add(d), queued: true})
			e.advance(us)
			e.grant(w)
			wantLost(e, "the session", e.check(id).Lost, []store.LostHold{{Kind: kind, Name: n, Fence: g.Fence, Reason: store.LostSessionExpired}})
		})
	}
	// The delay counts from the deadline, however late the expiry is
	// noticed, and by whom.
	e.sub("NoticedLateBySession", func(e *env) {
		n := e.name("delayed")
		t0 := e.now()
		id := e.sessionWithDelay(10*time.Second, d)
		e.grant(inSession(exclusiveReq(n, "bound", 0), id))
		e.advance(12 * time.Second)
		e.check(id) // drops the expired hold
		dl := t0.Add(10 * time.Second)
		e.advance(d - 2*time.Second - us)
		e.refused("1µs before the delay ends", exclusiveReq(n, "next", time.Minute), refusal{retryAt: dl.Add(d)})
		e.advance(us)
		e.grant(exclusiveReq(n, "next", time.Minute))
	})
	e.sub("NoticedLateByRequest", func(e *env) {
		n := e.name("delayed")
		t0 := e.now()
		id := e.sessionWithDelay(10*time.Second, d)
		e.grant(inSession(exclusiveReq(n, "bound", 0), id))
		e.advance(10*time.Second + d - us)
		e.refused("first call, 1µs before the delay ends", exclusiveReq(n, "next", time.Minute), refusal{retryAt: t0.Add(10*time.Second + d)})
		e.advance(us)
		e.grant(exclusiveReq(n, "next", time.Minute))
	})
	// The deadline is the session's last: a renewal moves the delay too.
	e.sub("Renewed", func(e *env) {
		n := e.name("delayed")
		t0 := e.now()
		id := e.sessionWithDelay(10*time.Second, d)
		e.grant(inSession(exclusiveReq(n, "bound", 0), id))
		e.advance(5 * time.Second)
		e.keepAlive(id, 10*time.Second)
		dl := t0.Add(15 * time.Second)
		e.advance(10*time.Second + d - us)
		e.refused("1µs before the delay ends", exclusiveReq(n, "next", time.Minute), refusal{retryAt: dl.Add(d)})
		e.advance(us)
		e.grant(exclusiveReq(n, "next", time.Minute))
	})
	// A max hold after the session's deadline: the session ended the hold.
	e.sub("MaxHoldAfterDeadline", func(e *env) {
		n := e.name("delayed")
		t0 := e.now()
		id := e.sessionWithDelay(10*time.Second, d)
		r := inSession(exclusiveReq(n, "bound", 0), id)
		r.MaxHold = time.Hour
		e.grant(r)
		e.advance(10*time.Second + d - us)
		e.refused("1µs before the delay ends", exclusiveReq(n, "next", time.Minute), refusal{retryAt: t0.Add(10*time.Second + d)})
		e.advance(us)
		e.grant(exclusiveReq(n, "next", time.Minute))
	})
	// ResumeSession keeps the session's lock-delay.
	e.sub("Resumed", func(e *env) {
		n := e.name("delayed")
		id := e.sessionWithDelay(10*time.Second, d)
		_, err := e.s.ResumeSession(e.ctx, id, 20*time.Second)
		noErr(e, "ResumeSession", err)
		t1 := e.now()
		e.grant(inSession(exclusiveReq(n, "bound", 0), id))
		e.advance(20 * time.Second)
		e.refused("at the resumed session's deadline", exclusiveReq(n, "next", time.Minute), refusal{retryAt: t1.Add(20*time.Second + d)})
		e.advance(d)
		e.grant(exclusiveReq(n, "next", time.Minute))
	})
	// A delay on one name keeps no other name.
	e.sub("OtherNames", func(e *env) {
		n := e.name("delayed")
		id := e.sessionWithDelay(10*time.Second, d)
		e.grant(inSession(exclusiveReq(n, "bound", 0), id))
		e.advance(10 * time.Second)
		e.refused("the delayed name", exclusiveReq(n, "next", time.Minute), refusal{retryAt: e.now().Add(d)})
		e.grant(exclusiveReq(e.name("other"), "next", time.Minute))
		e.grant(permitReq(n, "next", 1, time.Minute)) // same name, other kind
	})
}

// holdsLockDelayThenFIFO: a session-bound hold whose session expires with
// nothing running that could notice (no sweep, no call until the delay's
// last microsecond) is granted to no one, waiters included, until the
// session's deadline + its lock-delay; then the name goes to the waiters
// in the order they queued, whoever asks first.
func holdsLockDelayThenFIFO(e *env) {
	const d = 5 * time.Second
	cases := []struct {
		name string
		req  func(n, owner string) store.HoldRequest
	}{
		{"Lock", func(n, owner string) store.HoldRequest { return exclusiveReq(n, owner, time.Minute) }},
		{"Semaphore", func(n, owner string) store.HoldRequest { return permitReq(n, owner, 1, time.Minute) }},
	}
	for _, c := range cases {
		e.sub(c.name, func(e *env) {
			n := e.name("fifo")
			t0 := e.now()
			id := e.sessionWithDelay(10*time.Second, d)
			e.grant(inSession(c.req(n, "bound"), id))
			dl := t0.Add(10 * time.Second)
			inst := newInstance()
			var ws []store.HoldRequest
			for i := range 3 {
				w := waitingFor(c.req(n, fmt.Sprint("waiter", i)), inst, time.Minute)
				e.refused(fmt.Sprint("waiter ", i, " while the session lives"), w, refusal{holder: "bound", expire: dl, retryAt: dl, queued: true})
				ws = append(ws, w)
			}
			e.advance(10*time.Second + d - us)
			e.refused("waiter 2, 1µs before the delay ends", ws[2], refusal{retryAt: dl.Add(d), queued: true})
			e.refused("a newcomer, 1µs before the delay ends", c.req(n, "late"), refusal{retryAt: dl.Add(d)})
			e.advance(us)
			e.refused("waiter 2, when the delay has ended", ws[2], refusal{queued: true})
			e.refused("waiter 1", ws[1], refusal{queued: true})
			e.refused("a newcomer", c.req(n, "late"), refusal{})
			for i, w := range ws {
				e.grant(w)
				if i+1 < len(ws) {
					e.refused(fmt.Sprint("a newcomer while waiter ", i, " holds"), c.req(n, "late"),
						refusal{holder: w.Owner, expire: e.now().Add(time.Minute), retryAt: e.now().Add(time.Minute)})
				}
				e.free(w)
			}
			e.grant(c.req(n, "late"))
		})
	}
}

// holdsReleasedAfterRecordedDeadline: a session-bound hold whose session
// lives on by heartbeats, long after the deadline it was granted with, is
// refused a renewal by its token as bound (not "not held"), is released by
// its token, and sets no lock-delay: the next request is granted at once.
func holdsReleasedAfterRecordedDeadline(e *env) {
	const d = 5 * time.Second
	cases := []struct {
		name string
		req  func(n, owner string) store.HoldRequest
	}{
		{"Lock", func(n, owner string) store.HoldRequest { return exclusiveReq(n, owner, time.Minute) }},
		{"Semaphore", func(n, owner string) store.HoldRequest { return permitReq(n, owner, 1, time.Minute) }},
	}
	for _, c := range cases {
		e.sub(c.name, func(e *env) {
			n := e.name("late-release")
			id := e.sessionWithDelay(10*time.Second, d)
			r := inSession(c.req(n, "bound"), id)
			e.grant(r)
			for range 3 { // 18 s: the grant's deadline (10 s) long past, the session live
				e.advance(6 * time.Second)
				e.keepAlive(id, 10*time.Second)
			}
			// Held, and bound: a renewal by its token is refused as
			// bound (its session renews it), not answered "not held".
			kind := store.HoldLock
			if c.name == "Semaphore" {
				kind = store.HoldSemaphore
			}
			if _, err := e.s.RenewHold(e.ctx, kind, n, r.Token, time.Minute); !errors.Is(err, store.ErrSessionBound) {
				e.Errorf("RenewHold by the token of a bound hold past its recorded deadline, its session live = %v, want ErrSessionBound", err)
			}
			e.free(r)
			e.grant(c.req(n, "next"))
		})
	}
}

// holdsBoundBeyondCleanBatch: with more session-bound holders past their
// recorded deadline than one step asks sessions about (the Redis store
// asks 100 at a time, the first by deadline), a renewal and a release by
// the token of the one past its deadline last still find it held and
// bound: the caller's own holder is always asked about.
func holdsBoundBeyondCleanBatch(e *env) {
	n := e.name("many-bound")
	var ids []string
	var reqs []store.HoldRequest
	for i := range 120 {
		id := e.sessionWithDelay(10*time.Second, 0)
		if i == 119 {
			e.advance(time.Second) // its recorded deadline is the latest
		}
		r := inSession(permitReq(n, fmt.Sprint("p", i), 200, time.Minute), id)
		e.grant(r)
		ids, reqs = append(ids, id), append(reqs, r)
	}
	for range 3 { // the grants' deadlines long past, the sessions live
		e.advance(6 * time.Second)
		for _, id := range ids {
			e.keepAlive(id, 10*time.Second)
		}
	}
	last := reqs[len(reqs)-1]
	if _, err := e.s.RenewHold(e.ctx, store.HoldSemaphore, n, last.Token, time.Minute); !errors.Is(err, store.ErrSessionBound) {
		e.Errorf("RenewHold of the last of 120 bound holders past their recorded deadline = %v, want ErrSessionBound", err)
	}
	e.free(last)
}

// holdsPlainAndSharedTakeTurns: one lock name held in turn by a plain
// exclusive holder and by shared ones (a backend may keep the two apart):
// each blocks the other while it holds, GetHolds and CheckFence see
// whichever holds, and fences go up across the turns.
func holdsPlainAndSharedTakeTurns(e *env) {
	n := e.name("turns")
	var last uint64
	fenceUp := func(what string, g store.Grant) {
		e.Helper()
		if g.Fence <= last {
			e.Errorf("%s: fence %d, want above %d", what, g.Fence, last)
		}
		last = g.Fence
	}
	for round := range 2 {
		x := exclusiveReq(n, "x", time.Minute)
		gx := e.grant(x)
		fenceUp(fmt.Sprint("exclusive, round ", round), gx)
		e.refused("shared beside the exclusive holder", sharedReq(n, "s", time.Minute),
			refusal{holder: "x", expire: gx.ExpireTime, retryAt: gx.ExpireTime})
		if info := e.holds(store.HoldLock, n); !info.Held || info.Fence != gx.Fence {
			e.Errorf("GetHolds while x holds = %+v; want held with fence %d", info, gx.Fence)
		}
		if !e.checkFence(store.HoldLock, n, gx.Fence) {
			e.Errorf("CheckFence(%d) while x holds = false", gx.Fence)
		}
		e.free(x)
		if e.checkFence(store.HoldLock, n, gx.Fence) {
			e.Errorf("CheckFence(%d) after x released = true", gx.Fence)
		}
		var shared []store.HoldRequest
		for i := range 2 { // s0's deadline first
			r := sharedReq(n, fmt.Sprint("s", i), time.Duration(i+1)*time.Minute)
			fenceUp(fmt.Sprint("shared ", i, ", round ", round), e.grant(r))
			shared = append(shared, r)
		}
		e.refused("exclusive beside shared holders", exclusiveReq(n, "y", time.Minute),
			refusal{holder: "s0", expire: e.now().Add(time.Minute), retryAt: e.now().Add(time.Minute)})
		for _, r := range shared {
			e.free(r)
		}
		e.advance(time.Second)
	}
}

// holdsLockDelayRetryAtLater: RetryAt is the later of the blocking holder's
// deadline and the delay's end.
func holdsLockDelayRetryAtLater(e *env) {
	const d = 5 * time.Second
	n := e.name("delayed")
	t0 := e.now()
	id := e.sessionWithDelay(10*time.Second, d)
	e.grant(inSession(sharedReq(n, "bound", 0), id))
	e.grant(sharedReq(n, "plain", 18*time.Second))
	dl := t0.Add(10 * time.Second)
	e.advance(10 * time.Second)
	e.refused("exclusive: the shared holder outlives the delay", exclusiveReq(n, "x", time.Minute),
		refusal{holder: "plain", expire: t0.Add(18 * time.Second), retryAt: t0.Add(18 * time.Second)})
	e.refused("shared: only the delay", sharedReq(n, "s", time.Minute), refusal{retryAt: dl.Add(d)})
	e.advance(d)
	e.grant(sharedReq(n, "s", time.Minute))
}

// holdsNoLockDelay: a hold that ends by release, abandon, a clean close, its
// max hold, or a plain lease's expiry, or of a session without lock-delay,
// sets no delay.
func holdsNoLockDelay(e *env) {
	const d = 5 * time.Second
	cases := []struct {
		name string
		sem  bool                   // the hold is a permit of limit 1
		end  func(e *env, n string) // holds n and ends the hold
	}{
		{"Release", false, func(e *env, n string) {
			id := e.sessionWithDelay(time.Minute, d)
			r := inSession(exclusiveReq(n, "bound", 0), id)
			e.grant(r)
			e.free(r)
		}},
		{"Abandon", false, func(e *env, n string) {
			id := e.sessionWithDelay(time.Minute, d)
			r := inSession(exclusiveReq(n, "bound", 0), id)
			e.grant(r)
			noErr(e, "AbandonHold", e.s.AbandonHold(e.ctx, store.HoldLock, n, r.Token, ""))
		}},
		{"CloseSession", false, func(e *env, n string) {
			id := e.sessionWithDelay(time.Minute, d)
			e.grant(inSession(exclusiveReq(n, "bound", 0), id))
			_, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
			noErr(e, "CloseSession", err)
		}},
		{"MaxHold", false, func(e *env, n string) {
			id := e.sessionWithDelay(time.Minute, d)
			r := inSession(exclusiveReq(n, "bound", 0), id)
			r.MaxHold = 3 * time.Second
			e.grant(r)
			e.advance(3 * time.Second)
		}},
		{"MaxHoldReported", false, func(e *env, n string) {
			id := e.sessionWithDelay(time.Minute, d)
			r := inSession(exclusiveReq(n, "bound", 0), id)
			r.MaxHold = 3 * time.Second
			e.grant(r)
			e.advance(3 * time.Second)
			e.keepAlive(id, 0)
		}},
		// The max hold ends it at the session's deadline: not by the session.
		{"MaxHoldAtDeadline", false, func(e *env, n string) {
			id := e.sessionWithDelay(3*time.Second, d)
			r := inSession(exclusiveReq(n, "bound", 0), id)
			r.MaxHold = 3 * time.Second
			e.grant(r)
			e.advance(3 * time.Second)
		}},
		{"Lease", false, func(e *env, n string) {
			e.grant(exclusiveReq(n, "plain", 3*time.Second))
			e.advance(3 * time.Second)
		}},
		{"SessionWithoutDelay", false, func(e *env, n string) {
			id := e.session(3 * time.Second)
			e.grant(inSession(exclusiveReq(n, "bound", 0), id))
			e.advance(3 * time.Second)
		}},
		{"SemaphoreRelease", true, func(e *env, n string) {
			id := e.sessionWithDelay(time.Minute, d)
			r := inSession(permitReq(n, "bound", 1, 0), id)
			e.grant(r)
			e.free(r)
		}},
		{"SemaphoreClose", true, func(e *env, n string) {
			id := e.sessionWithDelay(time.Minute, d)
			e.grant(inSession(permitReq(n, "bound", 1, 0), id))
			_, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
			noErr(e, "CloseSession", err)
		}},
	}
	for _, c := range cases {
		e.sub(c.name, func(e *env) {
			n := e.name("nodelay")
			c.end(e, n)
			if c.sem {
				e.grant(permitReq(n, "next", 1, time.Minute))
				return
			}
			e.grant(exclusiveReq(n, "next", time.Minute))
		})
	}
}

// holdsCheckFence: CheckFence is true for a live holder's fence only.
func holdsCheckFence(e *env) {
	n := e.name("lock")
	r := exclusiveReq(n, "x", 10*time.Second)
	g := e.grant(r)
	yesNo := func(what string, kind store.HoldKind, name string, fence uint64, want bool) {
		e.Helper()
		if got := e.checkFence(kind, name, fence); got != want {
			e.Errorf("CheckFence %s = %v, want %v", what, got, want)
		}
	}
	yesNo("of the live holder", store.HoldLock, n, g.Fence, true)
	yesNo("of a fence never issued", store.HoldLock, n, g.Fence+1000, false)
	yesNo("of the fence before", store.HoldLock, n, g.Fence-1, false)
	yesNo("of another kind", store.HoldSemaphore, n, g.Fence, false)
	yesNo("of another name", store.HoldLock, e.name("never"), g.Fence, false)
	e.free(r)
	yesNo("after release", store.HoldLock, n, g.Fence, false)
	g = e.grant(exclusiveReq(n, "y", 10*time.Second))
	e.advance(10*time.Second - us)
	yesNo("1µs before expiry", store.HoldLock, n, g.Fence, true)
	e.advance(us)
	yesNo("at expiry", store.HoldLock, n, g.Fence, false)

	m := e.name("rw")
	s1, s2 := sharedReq(m, "s1", time.Minute), sharedReq(m, "s2", time.Minute)
	g1, g2 := e.grant(s1), e.grant(s2)
	yesNo("of the first shared holder", store.HoldLock, m, g1.Fence, true)
	yesNo("of the second shared holder", store.HoldLock, m, g2.Fence, true)
	e.free(s1)
	yesNo("of a released shared holder", store.HoldLock, m, g1.Fence, false)
	yesNo("of the remaining shared holder", store.HoldLock, m, g2.Fence, true)

	sem := e.name("sem")
	var fences []uint64
	for i := range 3 {
		fences = append(fences, e.grant(permitReq(sem, fmt.Sprint("p", i), 3, time.Minute)).Fence)
	}
	for i, f := range fences {
		yesNo(fmt.Sprint("of permit ", i), store.HoldSemaphore, sem, f, true)
	}

	id := e.session(10 * time.Second)
	b := e.name("bound")
	gb := e.grant(inSession(exclusiveReq(b, "bound", 0), id))
	yesNo("of a session-bound holder", store.HoldLock, b, gb.Fence, true)
	e.advance(10 * time.Second)
	yesNo("after its session expired", store.HoldLock, b, gb.Fence, false)
}

// holdsSessionPermits: a session's permits and shared locks are its holds
// like its locks: renewed with it, reported lost when it expires.
func holdsSessionPermits(e *env) {
	t0 := e.now()
	id := e.session(10 * time.Second)
	l, s, p := e.name("l"), e.name("s"), e.name("p")
	gl := e.grant(inSession(exclusiveReq(l, "alice", 0), id))
	gs := e.grant(inSession(sharedReq(s, "alice", 0), id))
	gp := e.grant(inSession(permitReq(p, "alice", 2, 0), id))
	for _, g := range []store.Grant{gl, gs, gp} {
		if g.TTL != 10*time.Second || !g.ExpireTime.Equal(t0.Add(10*time.Second)) {
			e.Errorf("session-bound grant = %+v; want the session's lease", g)
		}
	}
	e.advance(4 * time.Second)
	e.keepAlive(id, 10*time.Second)
	gp.ExpireTime, gs.ExpireTime = t0.Add(14*time.Second), t0.Add(14*time.Second)
	e.wantHolds("the permit after a keepalive", store.HoldSemaphore, p, 0, 2, holder("alice", gp, false, true, t0))
	e.wantHolds("the shared lock after a keepalive", store.HoldLock, s, 0, 0, holder("alice", gs, true, true, t0))
	e.advance(10 * time.Second)
	e.wantHolds("the permit after the session expired", store.HoldSemaphore, p, 0, 0)
	st := e.check(id)
	e.wantSession("check after expiry", st, store.SessionState{ID: id, Expired: true, Lost: []store.LostHold{
		{Kind: store.HoldLock, Name: l, Fence: gl.Fence, Reason: store.LostSessionExpired},
		{Kind: store.HoldLock, Name: s, Fence: gs.Fence, Reason: store.LostSessionExpired},
		{Kind: store.HoldSemaphore, Name: p, Fence: gp.Fence, Reason: store.LostSessionExpired},
	}})
	e.grant(exclusiveReq(s, "bob", time.Minute))
	e.grant(permitReq(p, "bob", 1, time.Minute))
}

// holdsSessionPermitMaxHold: a permit's max hold ends it and is reported.
func holdsSessionPermitMaxHold(e *env) {
	id := e.session(time.Minute)
	p := e.name("p")
	r := inSession(permitReq(p, "alice", 1, 0), id)
	r.MaxHold = 3 * time.Second
	g := e.grant(r)
	eq(e, "the permit's TTL", g.TTL, 3*time.Second)
	eqTime(e, "the session's NextLoss", e.check(id).NextLoss, base.Add(3*time.Second))
	e.advance(3 * time.Second)
	wantLost(e, "check at the max hold", e.check(id).Lost, []store.LostHold{{Kind: store.HoldSemaphore, Name: p, Fence: g.Fence, Reason: store.LostMaxHold}})
	e.grant(permitReq(p, "bob", 1, time.Minute))
}

// holdsSessionAlreadyHolds: a session holds at most one hold of a kind on a
// name; asking again, in whatever mode, answers the existing grant.
func holdsSessionAlreadyHolds(e *env) {
	id := e.session(time.Minute)
	n := e.name("rw")
	first := inSession(sharedReq(n, "alice", 0), id)
	g := e.grant(first)
	e.grant(sharedReq(n, "bob", time.Minute))
	for _, again := range []store.HoldRequest{inSession(sharedReq(n, "alice", 0), id), inSession(exclusiveReq(n, "alice", 0), id)} {
		again.MaxSessionHolds = 1
		a := e.try(again)
		if !a.Acquired || !a.AlreadyHeld || a.Token != first.Token || a.Fence != g.Fence || !a.ExpireTime.Equal(g.ExpireTime) {
			e.Errorf("asking again (shared %v) = %+v; want the existing grant (fence %d), already held", again.Shared, a, g.Fence)
		}
	}
	eq(e, "holders", len(e.holds(store.HoldLock, n).Holders), 2)

	p := e.name("sem")
	pr := inSession(permitReq(p, "alice", 3, 0), id)
	gp := e.grant(pr)
	again := inSession(permitReq(p, "alice", 3, 0), id)
	a := e.try(again)
	if !a.Acquired || !a.AlreadyHeld || a.Token != pr.Token || a.Fence != gp.Fence {
		e.Errorf("asking for a permit again = %+v; want the existing grant (fence %d), already held", a, gp.Fence)
	}
	eq(e, "permits", len(e.holds(store.HoldSemaphore, p).Holders), 1)
	// A lock and a permit of one name are two holds.
	e.grant(inSession(exclusiveReq(p, "alice", 0), id))
}

// holdsAlreadyHeldLeavesTheQueue: a session's waiting request whose answer
// is its own existing grant (AlreadyHeld) takes its ticket out of the
// queue, so that it blocks nobody after.
func holdsAlreadyHeldLeavesTheQueue(e *env) {
	id := e.session(time.Minute)
	n := e.name("again")
	a := newInstance()
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	t1 := waiting(inSession(exclusiveReq(n, "s", 0), id), a)
	t2 := waiting(inSession(exclusiveReq(n, "s", 0), id), a)
	x := waiting(exclusiveReq(n, "x", time.Minute), a)
	for _, r := range []store.HoldRequest{t1, t2, x} {
		if g := e.try(r); g.Acquired || !g.Queued {
			e.Fatalf("%s: %+v; want queued", r.Owner, g)
		}
	}
	e.free(h)
	g1 := e.grant(t1)
	if g := e.try(t2); !g.AlreadyHeld || g.Fence != g1.Fence {
		e.Fatalf("the session's second waiting request = %+v; want its grant (fence %d), already held", g, g1.Fence)
	}
	eq(e, "Waiters after the already-held answer", e.waiters(store.HoldLock, n), 1)
	e.free(t1)
	e.grant(x)
}

// holdsSessionCapCountsEveryKind: MaxSessionHolds counts locks, shared
// locks, permits and leaderships together.
func holdsSessionCapCountsEveryKind(e *env) {
	id := e.session(time.Minute)
	capped := func(r store.HoldRequest) store.HoldRequest {
		r = inSession(r, id)
		r.MaxSessionHolds = 4
		return r
	}
	e.grant(capped(exclusiveReq(e.name("l"), "a", 0)))
	e.grant(capped(sharedReq(e.name("s"), "a", 0)))
	p := capped(permitReq(e.name("p"), "a", 2, 0))
	e.grant(p)
	_, err := e.s.Campaign(e.ctx, store.Campaign{Name: e.name("e"), Token: token.New(), SessionID: id, Value: []byte("v"), MaxSessionHolds: 4})
	noErr(e, "Campaign under the cap", err)
	_, err = e.s.AcquireHold(e.ctx, capped(permitReq(e.name("p2"), "a", 2, 0)))
	isErr(e, "a permit over the cap", err, store.ErrTooManyHolds)
	_, err = e.s.AcquireHold(e.ctx, capped(sharedReq(e.name("s2"), "a", 0)))
	isErr(e, "a shared lock over the cap", err, store.ErrTooManyHolds)
	_, err = e.s.Campaign(e.ctx, store.Campaign{Name: e.name("e2"), Token: token.New(), SessionID: id, Value: []byte("v"), MaxSessionHolds: 4})
	isErr(e, "a campaign over the cap", err, store.ErrTooManyHolds)
	e.wantHolds("the refused permit's semaphore", store.HoldSemaphore, e.name("p2"), 0, 0)
	e.free(p)
	e.grant(capped(permitReq(e.name("p2"), "a", 2, 0)))
}

// holdsSessionClose: CloseSession releases every kind of hold and says
// which.
func holdsSessionClose(e *env) {
	id := e.session(time.Minute)
	l, s, p := e.name("l"), e.name("s"), e.name("p")
	e.grant(inSession(exclusiveReq(l, "alice", 0), id))
	e.grant(inSession(sharedReq(s, "alice", 0), id))
	e.grant(inSession(permitReq(p, "alice", 2, 0), id))
	e.advance(2 * time.Second)
	released, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
	noErr(e, "CloseSession", err)
	slices.SortFunc(released, func(a, b store.ReleasedHold) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	want := []store.ReleasedHold{{Kind: store.HoldLock, Name: l, Held: 2 * time.Second}, {Kind: store.HoldLock, Name: s, Held: 2 * time.Second},
		{Kind: store.HoldSemaphore, Name: p, Held: 2 * time.Second}}
	if fmt.Sprint(released) != fmt.Sprint(want) {
		e.Errorf("CloseSession = %+v, want %+v", released, want)
	}
	e.wantHolds("the semaphore", store.HoldSemaphore, p, 0, 0)
	e.wantHolds("the shared lock", store.HoldLock, s, 0, 0)
}

// holdsSessionAbandon: an abandoned session-bound permit becomes a loss
// report (GONE) and wakes its session.
func holdsSessionAbandon(e *env) {
	id := e.session(time.Minute)
	p := e.name("p")
	sub := e.subscribe(store.SessionTopic(id))
	r := inSession(permitReq(p, "alice", 2, 0), id)
	g := e.grant(r)
	e.wantWake(sub, "SessionTopic after a session-bound permit")
	drain(sub)
	noErr(e, "AbandonHold", e.s.AbandonHold(e.ctx, store.HoldSemaphore, p, r.Token, ""))
	e.wantWake(sub, "SessionTopic after AbandonHold")
	e.wantHolds("after AbandonHold", store.HoldSemaphore, p, 0, 0)
	wantLost(e, "the session after AbandonHold", e.check(id).Lost, []store.LostHold{{Kind: store.HoldSemaphore, Name: p, Fence: g.Fence, Reason: store.LostGone}})
}

// concurrentDeadline bounds the real time a concurrency case may take
// before it is reported stuck (it never waits for time to pass: the fake
// clock stands still, so no lease ends during it).
const concurrentDeadline = time.Minute

// holdsConcurrentSemaphore: 64 goroutines take turns at a semaphore of 5
// permits, each waiting with a ticket: never more than 5 live at once, by
// the goroutines' own count and by GetHolds; every fence distinct.
func holdsConcurrentSemaphore(e *env) {
	const workers, rounds, limit = 64, 3, 5
	n := e.name("sem")
	insts := []string{newInstance(), newInstance()}
	var (
		mu     sync.Mutex
		live   = map[uint64]bool{}
		fences = map[uint64]bool{}
	)
	e.concurrently(workers, rounds, func(w, round int) (store.HoldRequest, func(g store.Grant) error) {
		r := waiting(permitReq(n, fmt.Sprint("w", w), limit, time.Hour), insts[w%2])
		return r, func(g store.Grant) error {
			mu.Lock()
			if fences[g.Fence] {
				mu.Unlock()
				return fmt.Errorf("fence %d granted twice", g.Fence)
			}
			fences[g.Fence] = true
			live[g.Fence] = true
			count := len(live)
			mu.Unlock()
			if count > limit {
				return fmt.Errorf("%d permits live at once, limit %d", count, limit)
			}
			if g.Holders > limit {
				return fmt.Errorf("grant counts %d holders, limit %d", g.Holders, limit)
			}
			linger()
			info, err := e.s.GetHolds(e.ctx, store.HoldSemaphore, n)
			if err != nil {
				return err
			}
			if len(info.Holders) > limit || !slices.ContainsFunc(info.Holders, func(h store.HolderInfo) bool { return h.Fence == g.Fence }) {
				return fmt.Errorf("GetHolds = %d holders %+v, want at most %d, fence %d among them", len(info.Holders), info.Holders, limit, g.Fence)
			}
			mu.Lock()
			delete(live, g.Fence)
			mu.Unlock()
			return nil
		}
	})
	eq(e, "fences issued", len(fences), workers*rounds)
	e.wantHolds("at the end", store.HoldSemaphore, n, 0, 0)
}

// holdsConcurrentSharedExclusive: 64 goroutines, one in sixteen exclusive,
// take turns at a lock, waiting with tickets: an exclusive holder is alone,
// at most MaxHolders shared ones hold together.
func holdsConcurrentSharedExclusive(e *env) {
	const workers, rounds, maxShared = 64, 3, 8
	n := e.name("rw")
	insts := []string{newInstance(), newInstance()}
	var (
		mu                sync.Mutex
		exclusive, shared int
	)
	e.concurrently(workers, rounds, func(w, round int) (store.HoldRequest, func(g store.Grant) error) {
		excl := w%16 == 0
		r := sharedReq(n, fmt.Sprint("w", w), time.Hour)
		r.Shared, r.MaxHolders = !excl, maxShared
		r = waiting(r, insts[w%2])
		return r, func(g store.Grant) error {
			mu.Lock()
			if excl {
				exclusive++
			} else {
				shared++
			}
			x, s := exclusive, shared
			mu.Unlock()
			if x > 1 || (x == 1 && s > 0) || s > maxShared {
				return fmt.Errorf("%d exclusive and %d shared holders at once (max shared %d)", x, s, maxShared)
			}
			linger()
			info, err := e.s.GetHolds(e.ctx, store.HoldLock, n)
			if err != nil {
				return err
			}
			ex := slices.ContainsFunc(info.Holders, func(h store.HolderInfo) bool { return !h.Shared })
			if (ex && len(info.Holders) > 1) || len(info.Holders) > maxShared || len(info.Holders) == 0 {
				return fmt.Errorf("GetHolds = %+v: an exclusive holder with others, or over %d shared, or none", info.Holders, maxShared)
			}
			mu.Lock()
			if excl {
				exclusive--
			} else {
				shared--
			}
			mu.Unlock()
			return nil
		}
	})
	e.wantHolds("at the end", store.HoldLock, n, 0, 0)
}

// linger lets the other workers run while a worker holds, so that holds
// overlap as much as the store lets them.
func linger() {
	for range 20 {
		runtime.Gosched()
	}
}

// concurrently runs workers goroutines of rounds rounds each: a round makes
// a request until it is granted (coming back with its ticket), runs the
// round's check while holding, then releases. The first error fails the
// test.
func (e *env) concurrently(workers, rounds int, round func(w, round int) (store.HoldRequest, func(store.Grant) error)) {
	e.Helper()
	stop := time.Now().Add(concurrentDeadline)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			errs[w] = func() error {
				for i := range rounds {
					r, check := round(w, i)
					for {
						g, err := e.s.AcquireHold(e.ctx, r)
						if err != nil {
							return err
						}
						if g.Acquired {
							if err := check(g); err != nil {
								return err
							}
							rel, err := e.s.ReleaseHold(e.ctx, r.Kind, r.Name, r.Token, "")
							if err != nil {
								return err
							}
							if !rel.Released {
								return fmt.Errorf("worker %d round %d: release of a live grant: false", w, i)
							}
							break
						}
						if !g.Queued {
							return fmt.Errorf("worker %d round %d: not granted and not queued: %+v", w, i, g)
						}
						if time.Now().After(stop) {
							return fmt.Errorf("worker %d round %d: not granted within %v", w, i, concurrentDeadline)
						}
						runtime.Gosched()
					}
				}
				return nil
			}()
		})
	}
	close(start)
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			e.Fatalf("worker %d: %v", w, err)
		}
	}
}
