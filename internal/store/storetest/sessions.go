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
		{"ExpiredReportedOnce", sessExpiredReportedOnce},
		{"ExpiredForgottenAfterGrace", sessExpiredForgottenAfterGrace},
		{"KeepAliveNeverRevives", sessKeepAliveNeverRevives},
		{"LostMaxHoldReportedOnce", sessLostMaxHoldReportedOnce},
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
	_, err := e.s.CreateSession(e.ctx, id, ttl, 0)
	noErr(e, "CreateSession", err)
	return id
}

func (e *env) keepAlive(id string, ttl time.Duration) store.SessionState {
	e.Helper()
	st, err := e.s.KeepAliveSession(e.ctx, id, ttl)
	noErr(e, "KeepAliveSession", err)
	return st
}

func (e *env) check(id string) store.SessionState {
	e.Helper()
	st, err := e.s.CheckSession(e.ctx, id)
	noErr(e, "CheckSession", err)
	return st
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

func wantLost(e *env, what string, got, want []store.LostLock) {
	e.Helper()
	sortLost := func(l []store.LostLock) []store.LostLock {
		l = append([]store.LostLock(nil), l...)
		sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
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
	_, err := e.s.KeepAliveSession(e.ctx, id, 0)
	isErr(e, what+": KeepAliveSession", err, store.ErrSessionNotFound)
	_, err = e.s.CheckSession(e.ctx, id)
	isErr(e, what+": CheckSession", err, store.ErrSessionNotFound)
	_, err = e.s.CloseSession(e.ctx, id)
	isErr(e, what+": CloseSession", err, store.ErrSessionNotFound)
}

func sessCreate(e *env) {
	e.clk.Set(base.Add(1500 * time.Nanosecond))
	t0 := base.Add(us) // the store's now, in microseconds
	id := token.New()
	st, err := e.s.CreateSession(e.ctx, id, 10*time.Second+999*time.Nanosecond, 0)
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
	lockAt := func(n string, g store.LockGrant, acquired time.Time, ttl time.Duration, expire time.Time) {
		e.Helper()
		info := held("alice", g.Fence, ttl, expire, acquired)
		info.SessionID = id
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
	info.SessionID = id
	e.wantLock(n, info)
	e.advance(time.Second)
	e.wantSession("check at expiry", e.check(id), store.SessionState{ID: id, Expired: true,
		Lost: []store.LostLock{{Name: n, Fence: g.Fence, Reason: store.LostSessionExpired}}})
	e.wantLock(n, store.LockInfo{})
	e.wantGone("after the expiry was reported by CheckSession", id)
}

func sessExpiryBoundary(e *env) {
	t0 := e.now()
	s1, s2 := e.session(10*time.Second), e.session(10*time.Second)
	e.advance(10*time.Second - us)
	e.wantSession("keepalive 1µs before expiry", e.keepAlive(s1, 0), store.SessionState{ID: s1, TTL: 10 * time.Second, ExpireTime: t0.Add(20*time.Second - us)})
	e.advance(us) // like a lock, a session is live while now < its deadline
	e.wantSession("keepalive at expiry", e.keepAlive(s2, 0), store.SessionState{ID: s2, Expired: true})
}

func sessExpiredReportedOnce(e *env) {
	id := e.session(10 * time.Second)
	n1, n2 := e.name("l1"), e.name("l2")
	_, g1 := e.sessionLock(n1, "alice", id, 0)
	_, g2 := e.sessionLock(n2, "alice", id, time.Hour)
	e.advance(15 * time.Second)
	e.wantSession("keepalive after expiry", e.keepAlive(id, 10*time.Second), store.SessionState{ID: id, Expired: true, Lost: []store.LostLock{
		{Name: n1, Fence: g1.Fence, Reason: store.LostSessionExpired},
		{Name: n2, Fence: g2.Fence, Reason: store.LostSessionExpired},
	}})
	e.wantGone("after the expiry was reported", id)
	e.wantLock(n1, store.LockInfo{})
	e.wantLock(n2, store.LockInfo{})
	_, err := e.s.AcquireLock(e.ctx, store.AcquireLock{Name: n1, Token: token.New(), Owner: "alice", SessionID: id})
	isErr(e, "AcquireLock in the reported session", err, store.ErrSessionNotFound)
	e.lock(n1, "bob", time.Second)
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
	e.wantSession("keepalive after expiry", e.keepAlive(id, time.Minute), store.SessionState{ID: id, Expired: true,
		Lost: []store.LostLock{{Name: n, Fence: g.Fence, Reason: store.LostSessionExpired}}})
	e.wantLock(n, held("bob", gb.Fence, 30*time.Second, t1.Add(30*time.Second), t1))
	e.wantGone("after the expiry was reported", id)
	e.wantLock(n, held("bob", gb.Fence, 30*time.Second, t1.Add(30*time.Second), t1))
}

func sessLostMaxHoldReportedOnce(e *env) {
	id := e.session(10 * time.Second)
	a, b, c := e.name("a"), e.name("b"), e.name("c")
	_, ga := e.sessionLock(a, "alice", id, 3*time.Second)
	_, gb := e.sessionLock(b, "alice", id, 6*time.Second)
	_, gc := e.sessionLock(c, "alice", id, 0)
	e.advance(3 * time.Second)
	st := e.check(id)
	wantLost(e, "check at a's max hold", st.Lost, []store.LostLock{{Name: a, Fence: ga.Fence, Reason: store.LostMaxHold}})
	wantLost(e, "keepalive after a was reported", e.keepAlive(id, 0).Lost, nil)
	e.wantLock(a, store.LockInfo{})
	e.advance(3 * time.Second)
	wantLost(e, "keepalive at b's max hold", e.keepAlive(id, 0).Lost, []store.LostLock{{Name: b, Fence: gb.Fence, Reason: store.LostMaxHold}})
	wantLost(e, "check after b was reported", e.check(id).Lost, nil)
	wantLost(e, "keepalive after b was reported", e.keepAlive(id, 0).Lost, nil)
	// a and b left the session's set: its expiry loses only c.
	e.advance(10 * time.Second)
	e.wantSession("keepalive after expiry", e.keepAlive(id, 0), store.SessionState{ID: id, Expired: true,
		Lost: []store.LostLock{{Name: c, Fence: gc.Fence, Reason: store.LostSessionExpired}}})
}

func sessReleasedNotLost(e *env) {
	id := e.session(10 * time.Second)
	a, b := e.name("a"), e.name("b")
	toka, _ := e.sessionLock(a, "alice", id, 0)
	_, gb := e.sessionLock(b, "alice", id, 0)
	if !e.release(a, toka) {
		e.Fatal("ReleaseLock by its token: false")
	}
	wantLost(e, "keepalive after release", e.keepAlive(id, 0).Lost, nil)
	wantLost(e, "check after release", e.check(id).Lost, nil)
	e.advance(10 * time.Second)
	e.wantSession("keepalive after expiry", e.keepAlive(id, 0), store.SessionState{ID: id, Expired: true,
		Lost: []store.LostLock{{Name: b, Fence: gb.Fence, Reason: store.LostSessionExpired}}})
}

func sessCloseReleases(e *env) {
	id := e.session(10 * time.Second)
	a, b, c := e.name("a"), e.name("b"), e.name("c")
	e.sessionLock(a, "alice", id, 0)
	e.sessionLock(b, "alice", id, 0)
	t0 := e.now()
	_, gc := e.lock(c, "carol", time.Minute)
	sub := e.subscribe(store.LockTopic(a))
	drain(sub)
	names, err := e.s.CloseSession(e.ctx, id)
	noErr(e, "CloseSession", err)
	eqStrings(e, "CloseSession names", names, []string{a, b})
	e.wantWake(sub, "LockTopic after CloseSession")
	e.wantLock(a, store.LockInfo{})
	e.wantLock(b, store.LockInfo{})
	e.wantLock(c, held("carol", gc.Fence, time.Minute, t0.Add(time.Minute), t0))
	e.lock(a, "bob", time.Second)
	e.wantGone("after CloseSession", id)
}

func sessCloseSkipsLostLocks(e *env) {
	id := e.session(10 * time.Second)
	a, b, c := e.name("a"), e.name("b"), e.name("c")
	e.sessionLock(a, "alice", id, 3*time.Second)
	tokb, _ := e.sessionLock(b, "alice", id, 0)
	e.sessionLock(c, "alice", id, 0)
	if !e.release(b, tokb) {
		e.Fatal("ReleaseLock by its token: false")
	}
	e.advance(3 * time.Second)
	t1 := e.now()
	_, ga := e.lock(a, "bob", time.Minute)
	names, err := e.s.CloseSession(e.ctx, id)
	noErr(e, "CloseSession", err)
	eqStrings(e, "CloseSession names", names, []string{c})
	e.wantLock(a, held("bob", ga.Fence, time.Minute, t1.Add(time.Minute), t1))
	e.wantLock(c, store.LockInfo{})
}

func sessCloseExpired(e *env) {
	id := e.session(10 * time.Second)
	n := e.name("lock")
	e.sessionLock(n, "alice", id, 0)
	e.advance(10 * time.Second)
	t1 := e.now()
	_, g := e.lock(n, "bob", time.Minute)
	names, err := e.s.CloseSession(e.ctx, id)
	noErr(e, "CloseSession of an expired session", err)
	eqStrings(e, "CloseSession names", names, nil)
	e.wantLock(n, held("bob", g.Fence, time.Minute, t1.Add(time.Minute), t1))
	e.wantGone("after CloseSession of an expired session", id)
}

// sessNamespaceCap: a namespace has at most max live sessions; an expired,
// reported or closed one frees its place; other namespaces are not counted.
func sessNamespaceCap(e *env) {
	ns, other := "n"+token.New()[:10], "n"+token.New()[:10]
	create := func(ns string, ttl time.Duration) (string, error) {
		id := store.Scope(ns, token.New())
		_, err := e.s.CreateSession(e.ctx, id, ttl, 2)
		return id, err
	}
	_, err := create(ns, time.Second)
	noErr(e, "first session", err)
	b, err := create(ns, time.Minute)
	noErr(e, "second session", err)
	if _, err := create(ns, time.Minute); !errors.Is(err, store.ErrTooManySessions) {
		e.Fatalf("third session with max 2 = %v, want ErrTooManySessions", err)
	}
	if _, err := create(other, time.Minute); err != nil {
		e.Fatalf("a session of another namespace = %v, want it created", err)
	}
	e.advance(time.Second) // a expires
	_, err = create(ns, time.Minute)
	noErr(e, "a session after one expired", err)
	if _, err := e.s.CloseSession(e.ctx, b); err != nil {
		e.Fatal(err)
	}
	_, err = create(ns, time.Minute)
	noErr(e, "a session after one was closed", err)
	if _, err := create(ns, time.Minute); !errors.Is(err, store.ErrTooManySessions) {
		e.Fatalf("over the cap again = %v, want ErrTooManySessions", err)
	}
}
