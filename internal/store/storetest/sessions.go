package storetest

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

func sessionTests() []test {
	return []test{
		{"Create", sessCreate},
		{"Unknown", sessUnknown},
		{"KeepAliveRenews", sessKeepAliveRenews},
		{"CheckDoesNotRenew", sessCheckDoesNotRenew},
		{"NamespaceCap", sessNamespaceCap},
		{"ExpiryBoundary", sessExpiryBoundary},
		{"ExpiredReportedUntilAcked", sessExpiredReportedUntilAcked},
		{"ExpiredForgottenAfterGrace", sessExpiredForgottenAfterGrace},
		{"KeepAliveNeverRevives", sessKeepAliveNeverRevives},
		{"LostMaxHoldReportedUntilAcked", sessLostMaxHoldReportedUntilAcked},
		{"ResumeSupersedes", sessResumeSupersedes},
		{"ResumeRepeatsReports", sessResumeRepeatsReports},
		{"NextLoss", sessNextLoss},
		{"CloseTellsHoldTime", sessCloseTellsHoldTime},
		{"ReleasedNotLost", sessReleasedNotLost},
		{"CloseReleases", sessCloseReleases},
		{"CloseSkipsLostLocks", sessCloseSkipsLostLocks},
		{"CloseExpired", sessCloseExpired},
	}
}

// session creates a session of ttl, which must succeed, and returns its ID.
func (e *env) session(ttl time.Duration) string {
	e.Helper()
	id := token.New()
	_, err := e.s.CreateSession(e.ctx, id, ttl, 0, 0)
	noErr(e, "CreateSession", err)
	return id
}

func (e *env) keepAlive(id string, ttl time.Duration) store.SessionState {
	e.Helper()
	st, err := e.s.KeepAliveSession(e.ctx, store.SessionRef{ID: id}, ttl)
	noErr(e, "KeepAliveSession", err)
	return st
}

func (e *env) check(id string) store.SessionState {
	e.Helper()
	st, err := e.s.CheckSession(e.ctx, store.SessionRef{ID: id})
	noErr(e, "CheckSession", err)
	return st
}

// ackAll is a check that acknowledges every report of st.
func (e *env) ackAll(id string, st store.SessionState) (store.SessionState, error) {
	e.Helper()
	var ack uint64
	for _, l := range st.Lost {
		ack = max(ack, l.Seq)
	}
	return e.s.CheckSession(e.ctx, store.SessionRef{ID: id, Ack: ack})
}

// wantSession compares a session state; TTL and ExpireTime only for a live
// session, since the contract leaves them open for an expired one.
func (e *env) wantSession(what string, got, want store.SessionState) {
	e.Helper()
	if got.ID != want.ID || got.Expired != want.Expired ||
		(!want.Expired && (got.TTL != want.TTL || !got.ExpireTime.Equal(want.ExpireTime))) {
		e.Errorf("%s: state = %+v, want %+v", what, got, want)
	}
	wantLost(e, what, got.Lost, want.Lost)
}

// wantLost compares loss reports by kind, name, fence and reason; their
// Seqs must be distinct, positive and in order.
func wantLost(e *env, what string, got, want []store.LostHold) {
	e.Helper()
	for i, l := range got {
		if l.Seq == 0 || (i > 0 && l.Seq <= got[i-1].Seq) {
			e.Errorf("%s: reports %+v: Seq must be positive and increasing", what, got)
			break
		}
	}
	sortLost := func(l []store.LostHold) []store.LostHold {
		l = append([]store.LostHold(nil), l...)
		for i := range l {
			l[i].Seq = 0
		}
		sort.Slice(l, func(i, j int) bool {
			if l[i].Kind != l[j].Kind {
				return l[i].Kind < l[j].Kind
			}
			return l[i].Name < l[j].Name
		})
		return l
	}
	got, want = sortLost(got), sortLost(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.Errorf("%s: Lost = %+v, want %+v", what, got, want)
	}
}

// wantGone checks that id is unknown to every session call.
func (e *env) wantGone(what, id string) {
	e.Helper()
	_, err := e.s.KeepAliveSession(e.ctx, store.SessionRef{ID: id}, 0)
	isErr(e, what+": KeepAliveSession", err, store.ErrSessionNotFound)
	_, err = e.s.CheckSession(e.ctx, store.SessionRef{ID: id})
	isErr(e, what+": CheckSession", err, store.ErrSessionNotFound)
	_, err = e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
	isErr(e, what+": CloseSession", err, store.ErrSessionNotFound)
}

func sessCreate(e *env) {
	e.clk.Set(base.Add(1500 * time.Nanosecond))
	t0 := base.Add(us) // the store's now, in microseconds
	id := token.New()
	st, err := e.s.CreateSession(e.ctx, id, 10*time.Second+999*time.Nanosecond, 0, 0)
	noErr(e, "CreateSession", err)
	e.wantSession("create", st, store.SessionState{ID: id, TTL: 10 * time.Second, ExpireTime: t0.Add(10 * time.Second)})
	e.wantSession("check", e.check(id), store.SessionState{ID: id, TTL: 10 * time.Second, ExpireTime: t0.Add(10 * time.Second)})
}

func sessUnknown(e *env) {
	e.wantGone("unknown session", token.New())
}

func sessKeepAliveRenews(e *env) {
	t0 := e.now()
	id := e.session(10 * time.Second)
	n1, n2 := e.name("l1"), e.name("l2")
	_, g1 := e.sessionLock(n1, "alice", id, 0)
	e.advance(time.Second)
	_, g2 := e.sessionLock(n2, "alice", id, 0)
	lockAt := func(n string, g store.Grant, acquired time.Time, ttl time.Duration, expire time.Time) {
		e.Helper()
		info := held("alice", g.Fence, ttl, expire, acquired)
		info.SessionBound = true
		e.wantLock(n, info)
	}

	e.advance(3 * time.Second) // t0+4s
	e.wantSession("keepalive ttl 0", e.keepAlive(id, 0), store.SessionState{ID: id, TTL: 10 * time.Second, ExpireTime: t0.Add(14 * time.Second)})
	lockAt(n1, g1, t0, 10*time.Second, t0.Add(14*time.Second))
	lockAt(n2, g2, t0.Add(time.Second), 10*time.Second, t0.Add(14*time.Second))

	e.advance(4 * time.Second) // t0+8s
	e.wantSession("keepalive ttl 20s", e.keepAlive(id, 20*time.Second), store.SessionState{ID: id, TTL: 20 * time.Second, ExpireTime: t0.Add(28 * time.Second)})
	lockAt(n1, g1, t0, 20*time.Second, t0.Add(28*time.Second))
	lockAt(n2, g2, t0.Add(time.Second), 20*time.Second, t0.Add(28*time.Second))

	e.advance(10 * time.Second) // t0+18s: ttl 0 now means the new TTL, 20s
	e.wantSession("keepalive ttl 0 after 20s", e.keepAlive(id, 0), store.SessionState{ID: id, TTL: 20 * time.Second, ExpireTime: t0.Add(38 * time.Second)})
	e.advance(20*time.Second - us)
	lockAt(n1, g1, t0, us, t0.Add(38*time.Second))
	e.wantSession("keepalive 1µs before expiry", e.keepAlive(id, 0), store.SessionState{ID: id, TTL: 20 * time.Second, ExpireTime: t0.Add(58*time.Second - us)})
	lockAt(n2, g2, t0.Add(time.Second), 20*time.Second, t0.Add(58*time.Second-us))
}

func sessCheckDoesNotRenew(e *env) {
	t0 := e.now()
	id := e.session(10 * time.Second)
	n := e.name("lock")
	_, g := e.sessionLock(n, "alice", id, 0)
	e.advance(9 * time.Second)
	// TTL is what is left of the lease.
	e.wantSession("check", e.check(id), store.SessionState{ID: id, TTL: time.Second, ExpireTime: t0.Add(10 * time.Second)})
	info := held("alice", g.Fence, time.Second, t0.Add(10*time.Second), t0)
	info.SessionBound = true
	e.wantLock(n, info)
	e.advance(time.Second)
	st := e.check(id)
	e.wantSession("check at expiry", st, store.SessionState{ID: id, Expired: true,
		Lost: []store.LostHold{{Kind: store.HoldLock, Name: n, Fence: g.Fence, Reason: store.LostSessionExpired}}})
	e.wantLock(n, store.HoldInfo{})
	acked, err := e.ackAll(id, st)
	noErr(e, "a check that acknowledges the expiry's reports", err)
	e.wantSession("a check that acknowledges the expiry's reports", acked, store.SessionState{ID: id, Expired: true})
	e.advance(store.SessionGrace)
	e.wantGone("after the grace", id)
}

func sessExpiryBoundary(e *env) {
	t0 := e.now()
	s1, s2 := e.session(10*time.Second), e.session(10*time.Second)
	e.advance(10*time.Second - us)
	e.wantSession("keepalive 1µs before expiry", e.keepAlive(s1, 0), store.SessionState{ID: s1, TTL: 10 * time.Second, ExpireTime: t0.Add(20*time.Second - us)})
	e.advance(us) // like a lock, a session is live while now < its deadline
	e.wantSession("keepalive at expiry", e.keepAlive(s2, 0), store.SessionState{ID: s2, Expired: true})
}

// sessExpiredReportedUntilAcked: an expired session's reports (every lock
// it had) come with every call until one acknowledges them; the expiry
// itself is reported until the grace ends; then the session is unknown.
func sessExpiredReportedUntilAcked(e *env) {
	id := e.session(10 * time.Second)
	n1, n2 := e.name("l1"), e.name("l2")
	_, g1 := e.sessionLock(n1, "alice", id, 0)
	_, g2 := e.sessionLock(n2, "alice", id, time.Hour)
	e.advance(15 * time.Second)
	want := store.SessionState{ID: id, Expired: true, Lost: []store.LostHold{
		{Kind: store.HoldLock, Name: n1, Fence: g1.Fence, Reason: store.LostSessionExpired},
		{Kind: store.HoldLock, Name: n2, Fence: g2.Fence, Reason: store.LostSessionExpired},
	}}
	first := e.keepAlive(id, 10*time.Second)
	e.wantSession("keepalive after expiry", first, want)
	// The reply was lost, or its send failed: the next call reports it
	// again, with the same reports.
	again := e.keepAlive(id, 10*time.Second)
	e.wantSession("keepalive after an unacknowledged report", again, want)
	if fmt.Sprint(again.Lost) != fmt.Sprint(first.Lost) {
		e.Errorf("reports changed: %+v, then %+v", first.Lost, again.Lost)
	}
	e.wantSession("check after an unacknowledged report", e.check(id), want)
	e.wantLock(n1, store.HoldInfo{})
	e.wantLock(n2, store.HoldInfo{})
	_, err := e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: n1, Token: token.New(), Owner: "alice", SessionID: id})
	isErr(e, "AcquireHold in the expired session", err, store.ErrSessionNotFound)
	// Acknowledged reports go; the expiry itself is reported until the
	// grace ends, so that a late heartbeat still learns it.
	acked, err := e.ackAll(id, first)
	noErr(e, "a call that acknowledges the reports", err)
	e.wantSession("a call that acknowledges the reports", acked, store.SessionState{ID: id, Expired: true})
	e.lock(n1, "bob", time.Second)
	e.advance(store.SessionGrace)
	e.wantGone("after the grace", id)
}

func sessExpiredForgottenAfterGrace(e *env) {
	s1, s2, s3 := e.session(10*time.Second), e.session(10*time.Second), e.session(10*time.Second)
	e.advance(10*time.Second + store.SessionGrace - us)
	e.wantSession("check 1µs before the grace ends", e.check(s1), store.SessionState{ID: s1, Expired: true})
	e.advance(us)
	e.wantGone("when the grace ends", s2)
	e.advance(time.Hour)
	e.wantGone("an hour after the grace", s3)
}

func sessKeepAliveNeverRevives(e *env) {
	id := e.session(10 * time.Second)
	n := e.name("lock")
	_, g := e.sessionLock(n, "alice", id, 0)
	e.advance(10 * time.Second)
	t1 := e.now()
	_, gb := e.lock(n, "bob", 30*time.Second)
	st := e.keepAlive(id, time.Minute)
	e.wantSession("keepalive after expiry", st, store.SessionState{ID: id, Expired: true,
		Lost: []store.LostHold{{Kind: store.HoldLock, Name: n, Fence: g.Fence, Reason: store.LostSessionExpired}}})
	e.wantLock(n, held("bob", gb.Fence, 30*time.Second, t1.Add(30*time.Second), t1))
	e.wantSession("keepalive again", e.keepAlive(id, time.Minute), store.SessionState{ID: id, Expired: true,
		Lost: []store.LostHold{{Kind: store.HoldLock, Name: n, Fence: g.Fence, Reason: store.LostSessionExpired}}})
	acked, err := e.ackAll(id, st)
	noErr(e, "acknowledging the expiry's reports", err)
	e.wantSession("acknowledging the expiry's reports", acked, store.SessionState{ID: id, Expired: true})
	e.wantLock(n, held("bob", gb.Fence, 30*time.Second, t1.Add(30*time.Second), t1))
	e.advance(store.SessionGrace)
	e.wantGone("after the grace", id)
}

// sessLostMaxHoldReportedUntilAcked: a lock that reaches its max hold
// leaves the session and is reported by every call until one acknowledges
// the report.
func sessLostMaxHoldReportedUntilAcked(e *env) {
	id := e.session(10 * time.Second)
	a, b, c := e.name("a"), e.name("b"), e.name("c")
	_, ga := e.sessionLock(a, "alice", id, 3*time.Second)
	_, gb := e.sessionLock(b, "alice", id, 6*time.Second)
	_, gc := e.sessionLock(c, "alice", id, 0)
	e.advance(3 * time.Second)
	lostA := []store.LostHold{{Kind: store.HoldLock, Name: a, Fence: ga.Fence, Reason: store.LostMaxHold}}
	st := e.check(id)
	wantLost(e, "check at a's max hold", st.Lost, lostA)
	e.wantLock(a, store.HoldInfo{})
	wantLost(e, "keepalive that acknowledges nothing", e.keepAlive(id, 0).Lost, lostA)
	acked, err := e.s.KeepAliveSession(e.ctx, store.SessionRef{ID: id, Ack: st.Lost[0].Seq}, 0)
	noErr(e, "keepalive that acknowledges a", err)
	wantLost(e, "keepalive that acknowledges a", acked.Lost, nil)
	e.advance(3 * time.Second)
	st = e.keepAlive(id, 0)
	wantLost(e, "keepalive at b's max hold", st.Lost, []store.LostHold{{Kind: store.HoldLock, Name: b, Fence: gb.Fence, Reason: store.LostMaxHold}})
	if len(st.Lost) == 1 && len(acked.Lost) == 0 && st.Lost[0].Seq <= 1 {
		e.Errorf("b's report has Seq %d, want it after a's", st.Lost[0].Seq)
	}
	st, err = e.ackAll(id, st)
	noErr(e, "check that acknowledges b", err)
	wantLost(e, "check that acknowledges b", st.Lost, nil)
	wantLost(e, "keepalive after b was acknowledged", e.keepAlive(id, 0).Lost, nil)
	// a and b left the session's set: its expiry loses only c.
	e.advance(10 * time.Second)
	e.wantSession("keepalive after expiry", e.keepAlive(id, 0), store.SessionState{ID: id, Expired: true,
		Lost: []store.LostHold{{Kind: store.HoldLock, Name: c, Fence: gc.Fence, Reason: store.LostSessionExpired}}})
}

// sessResumeSupersedes: ResumeSession moves the session to a new stream
// epoch; calls naming the old one are ErrSuperseded and change nothing.
func sessResumeSupersedes(e *env) {
	t0 := e.now()
	id := token.New()
	st, err := e.s.CreateSession(e.ctx, id, 10*time.Second, 0, 0)
	noErr(e, "CreateSession", err)
	eq(e, "CreateSession's stream", st.Stream, uint64(1))
	n := e.name("lock")
	_, g := e.sessionLock(n, "alice", id, 0)
	e.advance(time.Second)
	st, err = e.s.ResumeSession(e.ctx, id, 20*time.Second)
	noErr(e, "ResumeSession", err)
	eq(e, "ResumeSession's stream", st.Stream, uint64(2))
	e.wantSession("resume", st, store.SessionState{ID: id, Stream: 2, TTL: 20 * time.Second, ExpireTime: t0.Add(21 * time.Second)})
	old := store.SessionRef{ID: id, Stream: 1}
	_, err = e.s.KeepAliveSession(e.ctx, old, time.Minute)
	isErr(e, "KeepAliveSession on the old stream", err, store.ErrSuperseded)
	_, err = e.s.CheckSession(e.ctx, old)
	isErr(e, "CheckSession on the old stream", err, store.ErrSuperseded)
	_, err = e.s.CloseSession(e.ctx, old)
	isErr(e, "CloseSession on the old stream", err, store.ErrSuperseded)
	info := held("alice", g.Fence, 20*time.Second, t0.Add(21*time.Second), t0)
	info.SessionBound = true
	e.wantLock(n, info)
	cur := store.SessionRef{ID: id, Stream: 2}
	st, err = e.s.KeepAliveSession(e.ctx, cur, 0)
	noErr(e, "KeepAliveSession on the new stream", err)
	e.wantSession("keepalive on the new stream", st, store.SessionState{ID: id, Stream: 2, TTL: 20 * time.Second, ExpireTime: t0.Add(21 * time.Second)})
	released, err := e.s.CloseSession(e.ctx, cur)
	noErr(e, "CloseSession on the new stream", err)
	eqStrings(e, "CloseSession names", releasedNames(released), []string{n})
	e.wantGone("after CloseSession", id)
}

// sessResumeRepeatsReports: a report sent to a stream that broke before
// acknowledging it comes again on the stream that resumes the session.
func sessResumeRepeatsReports(e *env) {
	id := e.session(10 * time.Second)
	n := e.name("lock")
	_, g := e.sessionLock(n, "alice", id, time.Second)
	e.advance(time.Second)
	lost := []store.LostHold{{Kind: store.HoldLock, Name: n, Fence: g.Fence, Reason: store.LostMaxHold}}
	wantLost(e, "check at the max hold", e.check(id).Lost, lost)
	st, err := e.s.ResumeSession(e.ctx, id, 0)
	noErr(e, "ResumeSession", err)
	wantLost(e, "resume", st.Lost, lost)
	st, err = e.s.KeepAliveSession(e.ctx, store.SessionRef{ID: id, Stream: st.Stream, Ack: st.Lost[len(st.Lost)-1].Seq}, 0)
	noErr(e, "keepalive that acknowledges", err)
	wantLost(e, "keepalive that acknowledges", st.Lost, nil)
}

// sessNextLoss: a state tells when the session's next lock reaches its max
// hold before the session's deadline.
func sessNextLoss(e *env) {
	t0 := e.now()
	id := e.session(10 * time.Second)
	if st := e.check(id); !st.NextLoss.IsZero() {
		e.Errorf("NextLoss with no locks = %v, want zero", st.NextLoss)
	}
	e.sessionLock(e.name("a"), "alice", id, 20*time.Second) // after the deadline
	if st := e.check(id); !st.NextLoss.IsZero() {
		e.Errorf("NextLoss with a max hold after the deadline = %v, want zero", st.NextLoss)
	}
	e.sessionLock(e.name("b"), "alice", id, 5*time.Second)
	e.sessionLock(e.name("c"), "alice", id, 3*time.Second)
	eqTime(e, "NextLoss", e.keepAlive(id, 0).NextLoss, t0.Add(3*time.Second))
}

// sessCloseTellsHoldTime: CloseSession says how long each lock was held.
func sessCloseTellsHoldTime(e *env) {
	id := e.session(10 * time.Second)
	a, b := e.name("a"), e.name("b")
	e.sessionLock(a, "alice", id, 0)
	e.advance(2 * time.Second)
	e.sessionLock(b, "alice", id, 0)
	e.keepAlive(id, 0)
	e.advance(time.Second)
	released, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
	noErr(e, "CloseSession", err)
	sort.Slice(released, func(i, j int) bool { return released[i].Name < released[j].Name })
	if fmt.Sprint(released) != fmt.Sprint([]store.ReleasedHold{{Kind: store.HoldLock, Name: a, Held: 3 * time.Second}, {Kind: store.HoldLock, Name: b, Held: time.Second}}) {
		e.Errorf("CloseSession = %+v, want a held 3s and b 1s", released)
	}
}

func sessReleasedNotLost(e *env) {
	id := e.session(10 * time.Second)
	a, b := e.name("a"), e.name("b")
	toka, _ := e.sessionLock(a, "alice", id, 0)
	_, gb := e.sessionLock(b, "alice", id, 0)
	if !e.release(a, toka) {
		e.Fatal("ReleaseHold by its token: false")
	}
	wantLost(e, "keepalive after release", e.keepAlive(id, 0).Lost, nil)
	wantLost(e, "check after release", e.check(id).Lost, nil)
	e.advance(10 * time.Second)
	e.wantSession("keepalive after expiry", e.keepAlive(id, 0), store.SessionState{ID: id, Expired: true,
		Lost: []store.LostHold{{Kind: store.HoldLock, Name: b, Fence: gb.Fence, Reason: store.LostSessionExpired}}})
}

func sessCloseReleases(e *env) {
	id := e.session(10 * time.Second)
	a, b, c := e.name("a"), e.name("b"), e.name("c")
	e.sessionLock(a, "alice", id, 0)
	e.sessionLock(b, "alice", id, 0)
	t0 := e.now()
	_, gc := e.lock(c, "carol", time.Minute)
	inst := newInstance()
	w := waiting(exclusiveReq(a, "bob", time.Second), inst)
	if g := e.try(w); g.Acquired || !g.Queued {
		e.Fatalf("bob's wait for a = %+v, want queued", g)
	}
	sub := e.waitSub(store.HoldLock, a, inst)
	names, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
	noErr(e, "CloseSession", err)
	eqStrings(e, "CloseSession names", releasedNames(names), []string{a, b})
	e.wantWake(sub, "the waiter's WaitTopic after CloseSession")
	e.wantLock(b, store.HoldInfo{})
	e.wantLock(c, held("carol", gc.Fence, time.Minute, t0.Add(time.Minute), t0))
	e.grant(w)
	e.wantGone("after CloseSession", id)
}

func sessCloseSkipsLostLocks(e *env) {
	id := e.session(10 * time.Second)
	a, b, c := e.name("a"), e.name("b"), e.name("c")
	e.sessionLock(a, "alice", id, 3*time.Second)
	tokb, _ := e.sessionLock(b, "alice", id, 0)
	e.sessionLock(c, "alice", id, 0)
	if !e.release(b, tokb) {
		e.Fatal("ReleaseHold by its token: false")
	}
	e.advance(3 * time.Second)
	t1 := e.now()
	_, ga := e.lock(a, "bob", time.Minute)
	names, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
	noErr(e, "CloseSession", err)
	eqStrings(e, "CloseSession names", releasedNames(names), []string{c})
	e.wantLock(a, held("bob", ga.Fence, time.Minute, t1.Add(time.Minute), t1))
	e.wantLock(c, store.HoldInfo{})
}

func sessCloseExpired(e *env) {
	id := e.session(10 * time.Second)
	n := e.name("lock")
	e.sessionLock(n, "alice", id, 0)
	e.advance(10 * time.Second)
	t1 := e.now()
	_, g := e.lock(n, "bob", time.Minute)
	names, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
	noErr(e, "CloseSession of an expired session", err)
	eqStrings(e, "CloseSession names", releasedNames(names), nil)
	e.wantLock(n, held("bob", g.Fence, time.Minute, t1.Add(time.Minute), t1))
	e.wantGone("after CloseSession of an expired session", id)
}

// sessNamespaceCap: a namespace has at most max live sessions; an expired,
// reported or closed one frees its place; other namespaces are not counted.
func sessNamespaceCap(e *env) {
	ns, other := "n"+token.New()[:10], "n"+token.New()[:10]
	create := func(ns string, ttl time.Duration) (string, error) {
		id := store.Scope(ns, token.New())
		_, err := e.s.CreateSession(e.ctx, id, ttl, 2, 0)
		return id, err
	}
	a, err := create(ns, time.Second)
	noErr(e, "first session", err)
	b, err := create(ns, time.Minute)
	noErr(e, "second session", err)
	if _, err := create(ns, time.Minute); !errors.Is(err, store.ErrTooManySessions) {
		e.Fatalf("third session with max 2 = %v, want ErrTooManySessions", err)
	}
	if _, err := create(other, time.Minute); err != nil {
		e.Fatalf("a session of another namespace = %v, want it created", err)
	}
	// A heartbeat (on Redis it may set a's place in the namespace's count
	// to outlive a's deadline), then a expires: its place is free.
	e.advance(500 * time.Millisecond)
	_, err = e.s.KeepAliveSession(e.ctx, store.SessionRef{ID: a}, 0)
	noErr(e, "heartbeat", err)
	e.advance(1500 * time.Millisecond) // a expires
	_, err = create(ns, time.Minute)
	noErr(e, "a session after one expired after a heartbeat", err)
	if _, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: b}); err != nil {
		e.Fatal(err)
	}
	_, err = create(ns, time.Minute)
	noErr(e, "a session after one was closed", err)
	if _, err := create(ns, time.Minute); !errors.Is(err, store.ErrTooManySessions) {
		e.Fatalf("over the cap again = %v, want ErrTooManySessions", err)
	}
}

func releasedNames(r []store.ReleasedHold) []string {
	names, _ := ReleasedNames(r, nil)
	return names
}

// ReleasedNames returns the names of the holds CloseSession released, for
// tests: ReleasedNames(s.CloseSession(ctx, ref)).
func ReleasedNames(r []store.ReleasedHold, err error) ([]string, error) {
	var names []string
	for _, l := range r {
		names = append(names, l.Name)
	}
	return names, err
}
