package storetest

import (
	"time"

	"github.com/coordd/coordd/internal/store"
)

// The cases of hand-offs (store.Holds): a ReleaseHold or LeaveQueue made by
// an instance grants that instance's plain tickets that it lets in, in
// queue order, as AcquireHold would have granted their requests, and wakes
// the others' instances only.
func handoffTests() []test {
	return []test{
		{"HandoffOnRelease", handoffOnRelease},
		{"HandoffOnlyToItsInstance", handoffOnlyToItsInstance},
		{"HandoffNotToASession", handoffNotToASession},
		{"HandoffSharedRun", handoffSharedRun},
		{"HandoffSharedRunCapped", handoffSharedRunCapped},
		{"HandoffSemaphore", handoffSemaphore},
		{"HandoffMaxHold", handoffMaxHold},
		{"HandoffNotToALapsedTicket", handoffNotToALapsedTicket},
		{"HandoffNotDuringLockDelay", handoffNotDuringLockDelay},
		{"HandoffComingBack", handoffComingBack},
		{"HandoffOnLeaveQueue", handoffOnLeaveQueue},
		{"LeaveQueueFindsAHandoff", leaveQueueFindsAHandoff},
	}
}

// queued gives r a fresh ticket of instance with a lease longer than any
// case here lasts (a case about lapse uses waitingFor).
func queued(r store.HoldRequest, instance string) store.HoldRequest {
	return waitingFor(r, instance, time.Hour)
}

// releaseBy releases r's grant, which must be live, as instance, and
// returns the hand-offs.
func (e *env) releaseBy(r store.HoldRequest, instance string) []store.Handoff {
	e.Helper()
	rel, err := e.s.ReleaseHold(e.ctx, r.Kind, r.Name, r.Token, instance)
	noErr(e, "ReleaseHold", err)
	if !rel.Released {
		e.Fatalf("ReleaseHold %s by %s: not released", r.Kind, r.Owner)
	}
	return rel.Handoffs
}

// leaveBy takes r's ticket out of the queue as instance, with r's token,
// and returns the hand-offs.
func (e *env) leaveBy(r store.HoldRequest, instance string) []store.Handoff {
	e.Helper()
	hs, err := e.s.LeaveQueue(e.ctx, r.Kind, r.Name, r.Wait.Ticket, r.Token, instance)
	noErr(e, "LeaveQueue", err)
	return hs
}

// handedOff is what a hand-off of r must grant: its holders after it, and
// the semaphore's limit (0 for a lock).
type handedOff struct {
	r       store.HoldRequest
	holders int
	limit   int
}

// wantHandoffs checks that hs grant exactly want, in order, each as
// AcquireHold would have granted it now (its TTL, capped by its max hold),
// with fences above above and rising; it returns the grants.
func (e *env) wantHandoffs(what string, hs []store.Handoff, above uint64, want ...handedOff) []store.Grant {
	e.Helper()
	if len(hs) != len(want) {
		e.Fatalf("%s: %d hand-offs %+v, want %d", what, len(hs), hs, len(want))
	}
	var out []store.Grant
	for i, h := range hs {
		w := want[i]
		ttl := w.r.TTL
		if w.r.MaxHold > 0 && w.r.MaxHold < ttl {
			ttl = w.r.MaxHold
		}
		g := h.Grant
		if h.Ticket != w.r.Wait.Ticket || h.Token != w.r.Token || !g.Acquired || g.AlreadyHeld || g.Token != "" ||
			g.Fence <= above || g.TTL != ttl || !g.ExpireTime.Equal(e.now().Add(ttl)) ||
			g.Holders != w.holders || g.Limit != w.limit || g.Queued || g.Holder != "" || !g.RetryAt.IsZero() {
			e.Errorf("%s: hand-off %d =\n\t%+v\nwant %s's ticket and token, a fence above %d, ttl %v, holders %d, limit %d",
				what, i, h, w.r.Owner, above, ttl, w.holders, w.limit)
		}
		above = g.Fence
		out = append(out, g)
	}
	return out
}

// handoffOnRelease: a release by an instance grants the head ticket of
// that instance at once, waking no one; the grant is a holder like any
// (GetHolds, CheckFence), and the ticket is out of the queue.
func handoffOnRelease(e *env) {
	n := e.name("lock")
	a, b := newInstance(), newInstance()
	subA, subB := e.waitSub(store.HoldLock, n, a), e.waitSub(store.HoldLock, n, b)
	h := exclusiveReq(n, "h", time.Minute)
	gh := e.grant(h)
	w1 := queued(exclusiveReq(n, "w1", time.Minute), a)
	w2 := queued(exclusiveReq(n, "w2", 2*time.Minute), a)
	w3 := queued(exclusiveReq(n, "w3", time.Minute), b)
	for _, w := range []store.HoldRequest{w1, w2, w3} {
		e.try(w)
	}
	drain(subA)
	drain(subB)
	e.advance(time.Second)
	g1 := e.wantHandoffs("h's release by w1's instance", e.releaseBy(h, a), gh.Fence, handedOff{r: w1, holders: 1})[0]
	e.wantNoWake(subA, "the instance handed the lock")
	e.wantNoWake(subB, "an instance behind")
	e.wantHolds("after the hand-off", store.HoldLock, n, 2, 0, holder("w1", g1, false, false, e.now()))
	if !e.checkFence(store.HoldLock, n, g1.Fence) {
		e.Error("CheckFence of the hand-off's fence: false")
	}
	e.refused("a new request behind the queue", exclusiveReq(n, "late", time.Minute),
		refusal{holder: "w1", expire: g1.ExpireTime, retryAt: g1.ExpireTime})
	g2 := e.wantHandoffs("w1's release", e.releaseBy(w1, a), g1.Fence, handedOff{r: w2, holders: 1})[0]
	// The head is another instance's now: woken, not granted.
	e.wantHandoffs("w2's release", e.releaseBy(w2, a), g2.Fence)
	e.wantWake(subB, "the head's instance")
	e.wantNoWake(subA, "the releasing instance")
	e.grant(w3)
}

// handoffOnlyToItsInstance: a release without an instance, or by another
// instance, hands nothing off; it wakes the head's instance.
func handoffOnlyToItsInstance(e *env) {
	n := e.name("lock")
	a := newInstance()
	subA := e.waitSub(store.HoldLock, n, a)
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	w := queued(exclusiveReq(n, "w", time.Minute), a)
	e.try(w)
	drain(subA)
	e.wantHandoffs("a release by another instance", e.releaseBy(h, newInstance()), 0)
	e.wantWake(subA, "the head's instance")
	e.wantHolds("after the release", store.HoldLock, n, 1, 0)
	e.grant(w)
}

// handoffNotToASession: a session-bound ticket is never handed off (its
// binding is its instance's work): it is woken, and nothing behind it
// passes it.
func handoffNotToASession(e *env) {
	n := e.name("lock")
	a := newInstance()
	subA := e.waitSub(store.HoldLock, n, a)
	h := exclusiveReq(n, "h", time.Minute)
	e.grant(h)
	id := e.session(time.Minute)
	bound := queued(inSession(exclusiveReq(n, "bound", 0), id), a)
	plain := queued(exclusiveReq(n, "plain", time.Minute), a)
	e.try(bound)
	e.try(plain)
	drain(subA)
	e.wantHandoffs("a release with a session-bound ticket at the head", e.releaseBy(h, a), 0)
	e.wantWake(subA, "the session-bound ticket's instance")
	e.wantHolds("after the release", store.HoldLock, n, 2, 0)
	e.grant(bound)
	e.refused("the plain ticket behind, the session-bound one holding", plain,
		refusal{holder: "bound", expire: e.now().Add(time.Minute), retryAt: e.now().Add(time.Minute), queued: true})
}

// handoffSharedRun: an exclusive holder's release hands off the run of
// shared tickets of its instance at the head; another instance's shared
// ticket in the run is woken (and counts as a holder for those behind);
// the run stops at an exclusive ticket.
func handoffSharedRun(e *env) {
	n := e.name("rw")
	a, b := newInstance(), newInstance()
	subA, subB := e.waitSub(store.HoldLock, n, a), e.waitSub(store.HoldLock, n, b)
	h := exclusiveReq(n, "h", time.Minute)
	gh := e.grant(h)
	s0 := queued(sharedReq(n, "s0", time.Minute), a)
	s1 := queued(sharedReq(n, "s1", time.Minute), b)
	s2 := queued(sharedReq(n, "s2", time.Minute), a)
	x3 := queued(exclusiveReq(n, "x3", time.Minute), a)
	s4 := queued(sharedReq(n, "s4", time.Minute), a)
	for _, r := range []store.HoldRequest{s0, s1, s2, x3, s4} {
		e.try(r)
	}
	drain(subA)
	drain(subB)
	gs := e.wantHandoffs("the exclusive holder's release", e.releaseBy(h, a), gh.Fence,
		handedOff{r: s0, holders: 1}, handedOff{r: s2, holders: 2})
	e.wantWake(subB, "the woken shared ticket's instance")
	e.wantNoWake(subA, "the instance handed the shared run")
	e.wantHolds("after the hand-offs", store.HoldLock, n, 3, 0,
		holder("s0", gs[0], true, false, e.now()), holder("s2", gs[1], true, false, e.now()))
	e.grant(s1)
	e.refused("the shared ticket behind the exclusive one", s4, refusal{queued: true})
}

// handoffSharedRunCapped: the run stops at the lock's cap on shared
// holders, tickets let in but not granted (woken) counting.
func handoffSharedRunCapped(e *env) {
	n := e.name("rw")
	a, b := newInstance(), newInstance()
	subA, subB := e.waitSub(store.HoldLock, n, a), e.waitSub(store.HoldLock, n, b)
	capped := func(owner string) store.HoldRequest {
		r := sharedReq(n, owner, time.Minute)
		r.MaxHolders = 3
		return r
	}
	h := exclusiveReq(n, "h", time.Minute)
	h.MaxHolders = 3
	gh := e.grant(h)
	s0, s1, s2, s3 := queued(capped("s0"), a), queued(capped("s1"), b), queued(capped("s2"), a), queued(capped("s3"), a)
	for _, r := range []store.HoldRequest{s0, s1, s2, s3} {
		e.try(r)
	}
	drain(subA)
	drain(subB)
	gs := e.wantHandoffs("the release", e.releaseBy(h, a), gh.Fence, handedOff{r: s0, holders: 1}, handedOff{r: s2, holders: 2})
	e.wantWake(subB, "the woken ticket's instance")
	e.wantNoWake(subA, "s3's instance: the cap is reached with the woken ticket")
	e.wantHolds("after the hand-offs", store.HoldLock, n, 2, 0,
		holder("s0", gs[0], true, false, e.now()), holder("s2", gs[1], true, false, e.now()))
}

// handoffSemaphore: a released permit is handed to the head ticket of the
// releasing instance; a permit released by another instance wakes the
// head's instance.
func handoffSemaphore(e *env) {
	n := e.name("sem")
	a, b := newInstance(), newInstance()
	subA := e.waitSub(store.HoldSemaphore, n, a)
	h1, h2 := permitReq(n, "h1", 2, time.Minute), permitReq(n, "h2", 2, time.Minute)
	g1 := e.grant(h1)
	g2 := e.grant(h2)
	w0 := queued(permitReq(n, "w0", 2, time.Minute), a)
	w1 := queued(permitReq(n, "w1", 2, time.Minute), a)
	e.try(w0)
	e.try(w1)
	drain(subA)
	e.wantHandoffs("h1's release by the waiters' instance", e.releaseBy(h1, a), max(g1.Fence, g2.Fence), handedOff{r: w0, holders: 2, limit: 2})
	e.wantNoWake(subA, "the waiters' instance")
	e.wantHandoffs("h2's release by another instance", e.releaseBy(h2, b), 0)
	e.wantWake(subA, "the head's instance")
	e.grant(w1)
	eq(e, "Waiters", e.waiters(store.HoldSemaphore, n), 0)
}

// handoffMaxHold: a hand-off's lease is its request's TTL capped by its max
// hold, counted from the hand-off.
func handoffMaxHold(e *env) {
	n := e.name("lock")
	a := newInstance()
	h := exclusiveReq(n, "h", time.Minute)
	gh := e.grant(h)
	w := exclusiveReq(n, "w", time.Minute)
	w.MaxHold = 3 * time.Second
	w = queued(w, a)
	e.try(w)
	e.advance(time.Second)
	g := e.wantHandoffs("the release", e.releaseBy(h, a), gh.Fence, handedOff{r: w, holders: 1})[0]
	_, err := e.s.RenewHold(e.ctx, store.HoldLock, n, w.Token, time.Minute)
	noErr(e, "RenewHold", err)
	if info := e.holds(store.HoldLock, n); !info.ExpireTime.Equal(g.ExpireTime) {
		e.Errorf("renewed past the max hold: expires %v, want %v", info.ExpireTime, g.ExpireTime)
	}
}

// handoffNotToALapsedTicket: a ticket whose lease passed is never granted;
// the next live one is.
func handoffNotToALapsedTicket(e *env) {
	n := e.name("lock")
	a := newInstance()
	h := exclusiveReq(n, "h", time.Minute)
	gh := e.grant(h)
	short := waitingFor(exclusiveReq(n, "short", time.Minute), a, time.Second)
	long := waitingFor(exclusiveReq(n, "long", time.Minute), a, time.Minute)
	e.try(short)
	e.try(long)
	e.advance(time.Second)
	e.wantHandoffs("the release after the first ticket lapsed", e.releaseBy(h, a), gh.Fence, handedOff{r: long, holders: 1})
	eq(e, "Waiters", e.waiters(store.HoldLock, n), 0)
}

// handoffNotDuringLockDelay: while a lock-delay lasts nothing is handed
// off; the first release or LeaveQueue after it hands off.
func handoffNotDuringLockDelay(e *env) {
	const d = 5 * time.Second
	n := e.name("sem")
	a := newInstance()
	id := e.sessionWithDelay(10*time.Second, d)
	e.grant(inSession(permitReq(n, "bound", 2, 0), id))
	p := permitReq(n, "plain", 2, time.Hour)
	e.grant(p)
	w1 := queued(permitReq(n, "w1", 2, time.Minute), a)
	e.try(w1)
	e.advance(10 * time.Second) // the session expires: the delay begins
	e.wantHandoffs("a release during the lock-delay", e.releaseBy(p, a), 0)
	w2 := queued(permitReq(n, "w2", 2, time.Minute), a)
	e.refused("a request during the lock-delay", w2, refusal{retryAt: e.now().Add(d), queued: true})
	e.advance(d)
	e.wantHandoffs("a LeaveQueue after the lock-delay", e.leaveBy(w2, a), 0, handedOff{r: w1, holders: 1, limit: 2})
}

// handoffComingBack: a handed-off request that comes back (its hand-off was
// never delivered) is answered with that grant, and is not queued again.
func handoffComingBack(e *env) {
	n := e.name("sem")
	a := newInstance()
	h := permitReq(n, "h", 1, time.Minute)
	gh := e.grant(h)
	w := queued(permitReq(n, "w", 1, time.Minute), a)
	e.try(w)
	late := queued(permitReq(n, "late", 1, time.Minute), a)
	e.try(late)
	g := e.wantHandoffs("the release", e.releaseBy(h, a), gh.Fence, handedOff{r: w, holders: 1, limit: 1})[0]
	e.advance(time.Second)
	// With its old ticket (gone), and with a new one (its ticket was found
	// gone, and it queues again).
	for _, r := range []store.HoldRequest{w, queued(w, a)} {
		again := e.try(r)
		if !again.Acquired || again.AlreadyHeld || again.Fence != g.Fence || !again.ExpireTime.Equal(g.ExpireTime) || again.Queued {
			e.Errorf("the handed-off request coming back = %+v; want its grant (fence %d, expires %v)", again, g.Fence, g.ExpireTime)
		}
	}
	eq(e, "Waiters", e.waiters(store.HoldSemaphore, n), 1)
}

// handoffOnLeaveQueue: a ticket that leaves lets in the next one, which is
// handed off if it is the leaving instance's, woken if not.
func handoffOnLeaveQueue(e *env) {
	n := e.name("sem")
	a, b := newInstance(), newInstance()
	subA, subB := e.waitSub(store.HoldSemaphore, n, a), e.waitSub(store.HoldSemaphore, n, b)
	h1, h2 := permitReq(n, "h1", 2, time.Minute), permitReq(n, "h2", 2, time.Minute)
	g1 := e.grant(h1)
	g2 := e.grant(h2)
	w0 := queued(permitReq(n, "w0", 2, time.Minute), b)
	w1 := queued(permitReq(n, "w1", 2, time.Minute), a)
	w2 := queued(permitReq(n, "w2", 2, time.Minute), a)
	for _, w := range []store.HoldRequest{w0, w1, w2} {
		e.try(w)
	}
	e.free(h1) // no instance: wakes w0's
	e.wantWake(subB, "the head's instance")
	drain(subA)
	e.wantHandoffs("w0 leaving, by its instance", e.leaveBy(w0, b), 0)
	e.wantWake(subA, "the new head's instance")
	e.wantHandoffs("w1 leaving, by its instance", e.leaveBy(w1, a), max(g1.Fence, g2.Fence), handedOff{r: w2, holders: 2, limit: 2})
}

// leaveQueueFindsAHandoff: a request that gives up after a hand-off
// granted it (before it was told) finds that grant by leaving the queue:
// it is answered with its ticket, and nothing changes; a session-bound
// holder's token finds nothing.
func leaveQueueFindsAHandoff(e *env) {
	n := e.name("lock")
	a := newInstance()
	h := exclusiveReq(n, "h", time.Minute)
	gh := e.grant(h)
	w1 := queued(exclusiveReq(n, "w1", time.Minute), a)
	w2 := queued(exclusiveReq(n, "w2", time.Minute), a)
	e.try(w1)
	e.try(w2)
	g1 := e.wantHandoffs("h's release", e.releaseBy(h, a), gh.Fence, handedOff{r: w1, holders: 1})[0]
	e.advance(time.Second)
	found := e.leaveBy(w1, a)
	if len(found) != 1 || found[0].Ticket != w1.Wait.Ticket || found[0].Token != w1.Token || found[0].Grant.Fence != g1.Fence ||
		!found[0].Grant.ExpireTime.Equal(g1.ExpireTime) || found[0].Grant.TTL != g1.ExpireTime.Sub(e.now()) || found[0].Grant.Holders != 1 {
		e.Errorf("w1 giving up after its hand-off: %+v; want its grant (fence %d, expires %v)", found, g1.Fence, g1.ExpireTime)
	}
	e.wantHolds("after w1 gave up", store.HoldLock, n, 1, 0, holder("w1", g1, false, false, e.now().Add(-time.Second)))
	e.wantHandoffs("w1's release", e.releaseBy(w1, a), g1.Fence, handedOff{r: w2, holders: 1})
	// A LeaveQueue naming a session-bound holder's token finds nothing.
	m := e.name("bound")
	id := e.session(time.Minute)
	bound := queued(inSession(exclusiveReq(m, "bound", 0), id), a)
	gb := e.grant(bound)
	e.wantHandoffs("a LeaveQueue with a session-bound holder's token", e.leaveBy(bound, a), 0)
	e.wantHolds("the session-bound holder", store.HoldLock, m, 0, 0, holder("bound", gb, false, true, e.now()))
}
