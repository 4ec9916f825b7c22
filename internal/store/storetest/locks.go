package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

func lockTests() []test {
	return []test{
		{"AcquireFree", lockAcquireFree},
		{"Contended", lockContended},
		{"ExpiryBoundary", lockExpiryBoundary},
		{"GetLockFree", lockGetLockFree},
		{"ReleaseNeedsToken", lockReleaseNeedsToken},
		{"ReleaseStaleToken", lockReleaseStaleToken},
		{"ReleaseAfterExpiry", lockReleaseAfterExpiry},
		{"Renew", lockRenew},
		{"RenewNotHeld", lockRenewNotHeld},
		{"MaxHoldCapsAcquire", lockMaxHoldCapsAcquire},
		{"MaxHoldCapsRenewals", lockMaxHoldCapsRenewals},
		{"FenceFloor", lockFenceFloor},
		{"FenceMonotonic", lockFenceMonotonic},
		{"Truncation", lockTruncation},
		{"ConcurrentAcquire", lockConcurrentAcquire},
		{"SessionNotFound", lockSessionNotFound},
		{"SessionBound", lockSessionBound},
		{"SessionBoundRenew", lockSessionBoundRenew},
		{"SessionBoundMaxHold", lockSessionBoundMaxHold},
		{"SessionBoundRelease", lockSessionBoundRelease},
		{"ReleaseTellsHoldTime", lockReleaseTellsHoldTime},
		{"SessionLockCap", lockSessionLockCap},
		{"SessionLockCapCountsReports", lockSessionLockCapCountsReports},
		{"SessionAlreadyHolds", lockSessionAlreadyHolds},
		{"Abandon", lockAbandon},
	}
}

func (e *env) acquire(req store.HoldRequest) store.Grant {
	e.Helper()
	g, err := e.s.AcquireHold(e.ctx, req)
	noErr(e, "AcquireHold "+req.Name, err)
	return g
}

// lock acquires name with a plain lease, which must succeed, and returns the
// token and the grant.
func (e *env) lock(name, owner string, ttl time.Duration) (string, store.Grant) {
	e.Helper()
	tok := token.New()
	g := e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: owner, TTL: ttl})
	if !g.Acquired {
		e.Fatalf("AcquireHold %s by %s: not acquired (holder %q, ttl %v)", name, owner, g.Holder, g.TTL)
	}
	return tok, g
}

// sessionLock acquires name bound to session id, which must succeed.
func (e *env) sessionLock(name, owner, id string, maxHold time.Duration) (string, store.Grant) {
	e.Helper()
	tok := token.New()
	g := e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: owner, TTL: time.Hour, MaxHold: maxHold, SessionID: id})
	if !g.Acquired {
		e.Fatalf("AcquireHold %s in session: not acquired (holder %q)", name, g.Holder)
	}
	return tok, g
}

func (e *env) release(name, tok string) bool {
	e.Helper()
	ok, held, err := ReleaseLock(e.ctx, e.s, name, tok)
	noErr(e, "ReleaseHold "+name, err)
	if !ok && held != 0 {
		e.Errorf("ReleaseHold %s: not released, yet held %v", name, held)
	}
	return ok
}

func (e *env) renew(name, tok string, ttl time.Duration) store.Lease {
	e.Helper()
	l, err := e.s.RenewHold(e.ctx, store.HoldLock, name, tok, ttl)
	noErr(e, "RenewHold "+name, err)
	return l
}

// wantLock checks every field of GetLock(name). A free lock is the zero
// HoldInfo. HoldInfo has no token field, and Owner and SessionID must be
// exactly the expected ones, so a token cannot leak through it.
func (e *env) wantLock(name string, want store.HoldInfo) {
	e.Helper()
	got, err := e.s.GetHolds(e.ctx, store.HoldLock, name)
	noErr(e, "GetLock "+name, err)
	if got.Held != want.Held || got.Owner != want.Owner || got.Fence != want.Fence ||
		got.SessionBound != want.SessionBound || got.TTL != want.TTL ||
		!got.ExpireTime.Equal(want.ExpireTime) || !got.AcquireTime.Equal(want.AcquireTime) {
		e.Errorf("GetLock(%s) =\n\t%+v\nwant\n\t%+v", name, got, want)
	}
}

func held(owner string, fence uint64, ttl time.Duration, expire, acquired time.Time) store.HoldInfo {
	return store.HoldInfo{Held: true, Owner: owner, Fence: fence, TTL: ttl, ExpireTime: expire, AcquireTime: acquired}
}

func (e *env) wantGrant(what string, got, want store.Grant) {
	e.Helper()
	if got.Acquired != want.Acquired || got.Fence != want.Fence || got.TTL != want.TTL ||
		!got.ExpireTime.Equal(want.ExpireTime) || (!want.Acquired && got.Holder != want.Holder) {
		e.Errorf("%s: grant =\n\t%+v\nwant\n\t%+v", what, got, want)
	}
}

func (e *env) wantLease(what string, got, want store.Lease) {
	e.Helper()
	if got.TTL != want.TTL || got.Fence != want.Fence || !got.ExpireTime.Equal(want.ExpireTime) {
		e.Errorf("%s: lease = %+v, want %+v", what, got, want)
	}
}

func floor(t time.Time) uint64 { return uint64(t.UnixMicro()) }

func lockAcquireFree(e *env) {
	n := e.name("lock")
	t0 := e.now()
	_, g := e.lock(n, "alice", 10*time.Second)
	e.wantGrant("grant", g, store.Grant{Acquired: true, Fence: floor(t0), TTL: 10 * time.Second, ExpireTime: t0.Add(10 * time.Second)})
	e.wantLock(n, held("alice", g.Fence, 10*time.Second, t0.Add(10*time.Second), t0))
	e.advance(4 * time.Second)
	e.wantLock(n, held("alice", g.Fence, 6*time.Second, t0.Add(10*time.Second), t0))
}

func lockContended(e *env) {
	n := e.name("lock")
	t0 := e.now()
	_, ga := e.lock(n, "alice", 10*time.Second)
	e.advance(3 * time.Second)
	g := e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "bob", TTL: 20 * time.Second})
	e.wantGrant("contended", g, store.Grant{Acquired: false, Fence: 0, TTL: 7 * time.Second, ExpireTime: t0.Add(10 * time.Second), Holder: "alice"})
	// A holder asking again with a fresh token is contending like anyone.
	g = e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "alice", TTL: 20 * time.Second})
	e.wantGrant("re-acquire by holder", g, store.Grant{Acquired: false, TTL: 7 * time.Second, ExpireTime: t0.Add(10 * time.Second), Holder: "alice"})
	e.wantLock(n, held("alice", ga.Fence, 7*time.Second, t0.Add(10*time.Second), t0))
}

func lockExpiryBoundary(e *env) {
	n := e.name("lock")
	t0 := e.now()
	_, ga := e.lock(n, "alice", 10*time.Second)
	e.advance(10*time.Second - us)
	g := e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "bob", TTL: 5 * time.Second})
	e.wantGrant("1µs before expiry", g, store.Grant{TTL: us, ExpireTime: t0.Add(10 * time.Second), Holder: "alice"})
	e.wantLock(n, held("alice", ga.Fence, us, t0.Add(10*time.Second), t0))
	e.advance(us) // a lock is live while now < its deadline
	e.wantLock(n, store.HoldInfo{})
	t1 := e.now()
	_, gb := e.lock(n, "bob", 5*time.Second)
	e.wantGrant("at expiry", gb, store.Grant{Acquired: true, Fence: floor(t1), TTL: 5 * time.Second, ExpireTime: t1.Add(5 * time.Second)})
	e.wantLock(n, held("bob", gb.Fence, 5*time.Second, t1.Add(5*time.Second), t1))
}

func lockGetLockFree(e *env) {
	n := e.name("lock")
	e.wantLock(n, store.HoldInfo{})
	tok, _ := e.lock(n, "alice", 10*time.Second)
	if !e.release(n, tok) {
		e.Fatal("release by holder: false")
	}
	e.wantLock(n, store.HoldInfo{})
}

func lockReleaseNeedsToken(e *env) {
	n := e.name("lock")
	t0 := e.now()
	tok, g := e.lock(n, "alice", 10*time.Second)
	want := held("alice", g.Fence, 10*time.Second, t0.Add(10*time.Second), t0)
	for _, bad := range []string{token.New(), "", tok[:31]} {
		if e.release(n, bad) {
			e.Errorf("ReleaseHold with token %q: true, want false", bad)
		}
		e.wantLock(n, want)
	}
	if !e.release(n, tok) {
		e.Error("ReleaseHold by holder: false, want true")
	}
	e.wantLock(n, store.HoldInfo{})
	if e.release(n, tok) {
		e.Error("second ReleaseHold: true, want false")
	}
	if e.release(e.name("never"), token.New()) {
		e.Error("ReleaseHold of a lock never acquired: true, want false")
	}
}

func lockReleaseStaleToken(e *env) {
	n := e.name("lock")
	toka, _ := e.lock(n, "alice", 10*time.Second)
	e.advance(10 * time.Second)
	t1 := e.now()
	_, gb := e.lock(n, "bob", 10*time.Second)
	if e.release(n, toka) {
		e.Error("ReleaseHold with the previous holder's token: true, want false")
	}
	_, err := e.s.RenewHold(e.ctx, store.HoldLock, n, toka, time.Minute)
	isErr(e, "RenewHold with the previous holder's token", err, store.ErrNotHeld)
	e.wantLock(n, held("bob", gb.Fence, 10*time.Second, t1.Add(10*time.Second), t1))
}

func lockReleaseAfterExpiry(e *env) {
	n := e.name("lock")
	tok, _ := e.lock(n, "alice", 10*time.Second)
	e.advance(10 * time.Second)
	if e.release(n, tok) {
		e.Error("ReleaseHold after expiry: true, want false")
	}
	e.wantLock(n, store.HoldInfo{})
}

func lockRenew(e *env) {
	n := e.name("lock")
	t0 := e.now()
	tok, g := e.lock(n, "alice", 10*time.Second)
	e.advance(4 * time.Second)
	l := e.renew(n, tok, 15*time.Second)
	e.wantLease("renew", l, store.Lease{TTL: 15 * time.Second, ExpireTime: t0.Add(19 * time.Second), Fence: g.Fence})
	e.wantLock(n, held("alice", g.Fence, 15*time.Second, t0.Add(19*time.Second), t0))
	e.advance(15*time.Second - us)
	e.wantLock(n, held("alice", g.Fence, us, t0.Add(19*time.Second), t0))
	// A renewal may shorten the lease: the deadline is now + ttl.
	t1 := e.now()
	l = e.renew(n, tok, 2*time.Second)
	e.wantLease("shortening renew", l, store.Lease{TTL: 2 * time.Second, ExpireTime: t1.Add(2 * time.Second), Fence: g.Fence})
	e.advance(2 * time.Second)
	e.wantLock(n, store.HoldInfo{})
}

func lockRenewNotHeld(e *env) {
	n := e.name("lock")
	t0 := e.now()
	tok, g := e.lock(n, "alice", 10*time.Second)
	_, err := e.s.RenewHold(e.ctx, store.HoldLock, n, token.New(), time.Minute)
	isErr(e, "RenewHold with a wrong token", err, store.ErrNotHeld)
	e.wantLock(n, held("alice", g.Fence, 10*time.Second, t0.Add(10*time.Second), t0))
	_, err = e.s.RenewHold(e.ctx, store.HoldLock, e.name("never"), tok, time.Minute)
	isErr(e, "RenewHold of a lock never acquired", err, store.ErrNotHeld)
	if !e.release(n, tok) {
		e.Fatal("release by holder: false")
	}
	_, err = e.s.RenewHold(e.ctx, store.HoldLock, n, tok, time.Minute)
	isErr(e, "RenewHold after release", err, store.ErrNotHeld)
	e.wantLock(n, store.HoldInfo{})

	tok, _ = e.lock(n, "alice", 5*time.Second)
	e.advance(5 * time.Second)
	_, err = e.s.RenewHold(e.ctx, store.HoldLock, n, tok, time.Minute)
	isErr(e, "RenewHold after expiry", err, store.ErrNotHeld)
	e.wantLock(n, store.HoldInfo{}) // not revived
}

func lockMaxHoldCapsAcquire(e *env) {
	n := e.name("lock")
	t0 := e.now()
	g := e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "alice", TTL: 10 * time.Second, MaxHold: 4 * time.Second})
	e.wantGrant("grant", g, store.Grant{Acquired: true, Fence: floor(t0), TTL: 4 * time.Second, ExpireTime: t0.Add(4 * time.Second)})
	e.wantLock(n, held("alice", g.Fence, 4*time.Second, t0.Add(4*time.Second), t0))
	e.advance(4 * time.Second)
	e.wantLock(n, store.HoldInfo{})
}

func lockMaxHoldCapsRenewals(e *env) {
	n := e.name("lock")
	t0 := e.now()
	tok := token.New()
	g := e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: n, Token: tok, Owner: "alice", TTL: 10 * time.Second, MaxHold: 25 * time.Second})
	e.wantGrant("grant", g, store.Grant{Acquired: true, Fence: floor(t0), TTL: 10 * time.Second, ExpireTime: t0.Add(10 * time.Second)})
	e.advance(8 * time.Second)
	e.wantLease("renew at 8s", e.renew(n, tok, 10*time.Second), store.Lease{TTL: 10 * time.Second, ExpireTime: t0.Add(18 * time.Second), Fence: g.Fence})
	e.advance(8 * time.Second)
	e.wantLease("renew at 16s", e.renew(n, tok, 10*time.Second), store.Lease{TTL: 9 * time.Second, ExpireTime: t0.Add(25 * time.Second), Fence: g.Fence})
	e.advance(9*time.Second - us)
	e.wantLease("renew 1µs before max hold", e.renew(n, tok, 10*time.Second), store.Lease{TTL: us, ExpireTime: t0.Add(25 * time.Second), Fence: g.Fence})
	e.wantLock(n, held("alice", g.Fence, us, t0.Add(25*time.Second), t0))
	e.advance(us)
	e.wantLock(n, store.HoldInfo{})
	_, err := e.s.RenewHold(e.ctx, store.HoldLock, n, tok, 10*time.Second)
	isErr(e, "RenewHold at max hold", err, store.ErrNotHeld)
	e.lock(n, "bob", time.Second)
}

// lockFenceFloor checks fence = max(last fence + 1, floor) exactly, with the
// clock still, jumping forward, and going back.
func lockFenceFloor(e *env) {
	n := e.name("lock")
	acquireRelease := func(what string, want uint64) uint64 {
		e.Helper()
		tok, g := e.lock(n, "alice", time.Second)
		if g.Fence != want {
			e.Errorf("%s: fence = %d, want %d (floor %d)", what, g.Fence, want, floor(e.now()))
		}
		if !e.release(n, tok) {
			e.Fatalf("%s: release: false", what)
		}
		return g.Fence
	}
	f := acquireRelease("first grant", floor(e.now()))
	f = acquireRelease("second grant at the same instant", f+1)
	f = acquireRelease("third grant at the same instant", f+1)
	e.advance(us)
	acquireRelease("1µs later, below last+1", f+1)
	e.advance(1000 * time.Hour)
	f = acquireRelease("after the clock jumps 1000h forward", floor(e.now()))
	e.clk.Set(base.Add(-1000 * time.Hour))
	acquireRelease("after the clock goes 2000h back", f+1)
	e.clk.Set(base.Add(2000 * time.Hour))
	acquireRelease("after the clock jumps forward again", floor(e.now()))
}

func lockFenceMonotonic(e *env) {
	n := e.name("lock")
	var last uint64
	for i := range 1000 {
		now := e.now()
		tok, g := e.lock(n, "alice", time.Second)
		want := max(last+1, floor(now))
		if g.Fence != want || g.Fence <= last || g.Fence < floor(now) {
			e.Fatalf("grant %d: fence = %d, want %d (last %d, floor %d)", i, g.Fence, want, last, floor(now))
		}
		last = g.Fence
		if i%3 == 1 {
			e.advance(time.Second) // let it expire instead of releasing it
		} else if !e.release(n, tok) {
			e.Fatalf("grant %d: release: false", i)
		}
		e.advance(time.Duration(i%4) * us)
	}
}

// lockTruncation checks that durations and times have microsecond resolution.
func lockTruncation(e *env) {
	n := e.name("lock")
	e.clk.Set(base.Add(1500 * time.Nanosecond))
	t0 := base.Add(us) // the store's now
	tok := token.New()
	g := e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: n, Token: tok, Owner: "alice", TTL: 10*time.Second + 999*time.Nanosecond})
	e.wantGrant("grant", g, store.Grant{Acquired: true, Fence: floor(t0), TTL: 10 * time.Second, ExpireTime: t0.Add(10 * time.Second)})
	e.wantLock(n, held("alice", g.Fence, 10*time.Second, t0.Add(10*time.Second), t0))
	e.advance(time.Millisecond)
	t1 := t0.Add(time.Millisecond)
	l := e.renew(n, tok, 5*time.Second+time.Nanosecond)
	e.wantLease("renew", l, store.Lease{TTL: 5 * time.Second, ExpireTime: t1.Add(5 * time.Second), Fence: g.Fence})
	e.wantLock(n, held("alice", g.Fence, 5*time.Second, t1.Add(5*time.Second), t0))
}

func lockConcurrentAcquire(e *env) {
	n := e.name("lock")
	t0 := e.now()
	const workers = 50
	grants := make([]store.Grant, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			<-start
			grants[i], errs[i] = e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: fmt.Sprint("w", i), TTL: 10 * time.Second})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, g := range grants {
		noErr(e, fmt.Sprint("AcquireHold by worker ", i), errs[i])
		if g.Acquired {
			if winner >= 0 {
				e.Fatalf("workers %d and %d both acquired the lock", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		e.Fatal("no worker acquired the lock")
	}
	owner := fmt.Sprint("w", winner)
	for i, g := range grants {
		if i != winner {
			e.wantGrant(fmt.Sprint("worker ", i), g, store.Grant{TTL: 10 * time.Second, ExpireTime: t0.Add(10 * time.Second), Holder: owner})
		}
	}
	e.wantLock(n, held(owner, grants[winner].Fence, 10*time.Second, t0.Add(10*time.Second), t0))
}

func lockSessionNotFound(e *env) {
	n := e.name("lock")
	_, err := e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "alice", TTL: time.Minute, SessionID: token.New()})
	isErr(e, "AcquireHold with an unknown session", err, store.ErrSessionNotFound)
	e.wantLock(n, store.HoldInfo{})

	id := e.session(10 * time.Second)
	e.advance(10 * time.Second)
	_, err = e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "alice", TTL: time.Minute, SessionID: id})
	isErr(e, "AcquireHold with an expired session", err, store.ErrSessionNotFound)
	e.wantLock(n, store.HoldInfo{})
	// The failed acquisition does not use up the report of the expiry.
	st, err := e.s.KeepAliveSession(e.ctx, store.SessionRef{ID: id}, 0)
	noErr(e, "KeepAliveSession after expiry", err)
	e.wantSession("keepalive after expiry", st, store.SessionState{ID: id, Expired: true})
}

func lockSessionBound(e *env) {
	n := e.name("lock")
	t0 := e.now()
	id := e.session(10 * time.Second)
	e.advance(2 * time.Second)
	t1 := e.now()
	_, g := e.sessionLock(n, "alice", id, 0) // TTL (1h) is ignored
	e.wantGrant("grant", g, store.Grant{Acquired: true, Fence: floor(t1), TTL: 8 * time.Second, ExpireTime: t0.Add(10 * time.Second)})
	info := held("alice", g.Fence, 8*time.Second, t0.Add(10*time.Second), t1)
	info.SessionBound = true
	e.wantLock(n, info)

	e.advance(3 * time.Second)
	e.keepAlive(id, 10*time.Second)
	info.TTL, info.ExpireTime = 10*time.Second, t0.Add(15*time.Second)
	e.wantLock(n, info)
	gb := e.acquire(store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "bob", TTL: time.Second})
	e.wantGrant("contended", gb, store.Grant{TTL: 10 * time.Second, ExpireTime: t0.Add(15 * time.Second), Holder: "alice"})
}

func lockSessionBoundRenew(e *env) {
	n := e.name("lock")
	t0 := e.now()
	id := e.session(10 * time.Second)
	tok, g := e.sessionLock(n, "alice", id, 0)
	_, err := e.s.RenewHold(e.ctx, store.HoldLock, n, tok, time.Minute)
	isErr(e, "RenewHold of a session-bound lock", err, store.ErrSessionBound)
	info := held("alice", g.Fence, 10*time.Second, t0.Add(10*time.Second), t0)
	info.SessionBound = true
	e.wantLock(n, info)
}

func lockSessionBoundMaxHold(e *env) {
	n := e.name("lock")
	t0 := e.now()
	id := e.session(10 * time.Second)
	e.advance(2 * time.Second)
	t1 := e.now()
	_, g := e.sessionLock(n, "alice", id, 6*time.Second)
	e.wantGrant("grant", g, store.Grant{Acquired: true, Fence: floor(t1), TTL: 6 * time.Second, ExpireTime: t0.Add(8 * time.Second)})
	info := held("alice", g.Fence, 6*time.Second, t0.Add(8*time.Second), t1)
	info.SessionBound = true
	e.wantLock(n, info)
	e.advance(3 * time.Second)
	st := e.keepAlive(id, 10*time.Second)
	wantLost(e, "keepalive before max hold", st.Lost, nil)
	info.TTL = 3 * time.Second
	e.wantLock(n, info) // capped at grant + MaxHold, not the session's deadline
	e.advance(3*time.Second - us)
	st = e.keepAlive(id, 10*time.Second)
	wantLost(e, "keepalive 1µs before max hold", st.Lost, nil)
	info.TTL = us
	e.wantLock(n, info)
	e.advance(us)
	e.wantLock(n, store.HoldInfo{})
	e.lock(n, "bob", time.Second)
}

func lockSessionBoundRelease(e *env) {
	n := e.name("lock")
	id := e.session(10 * time.Second)
	tok, _ := e.sessionLock(n, "alice", id, 0)
	if !e.release(n, tok) {
		e.Fatal("ReleaseHold of a session-bound lock by its token: false, want true")
	}
	e.wantLock(n, store.HoldInfo{})
	st := e.keepAlive(id, 0)
	wantLost(e, "keepalive after release", st.Lost, nil)
	names, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id})
	noErr(e, "CloseSession", err)
	eqStrings(e, "CloseSession names", releasedNames(names), nil)
}

// lockReleaseTellsHoldTime: a release reports how long the lock was held.
func lockReleaseTellsHoldTime(e *env) {
	n := e.name("lock")
	tok, _ := e.lock(n, "alice", time.Minute)
	e.advance(3*time.Second + 250*us)
	ok, held, err := ReleaseLock(e.ctx, e.s, n, tok)
	noErr(e, "ReleaseHold", err)
	if !ok || held != 3*time.Second+250*us {
		e.Fatalf("ReleaseHold = %v, held %v; want released after 3.00025s", ok, held)
	}
}

// lockSessionLockCap: a session may hold at most MaxSessionHolds locks; a
// refused one is not granted, and a released one frees its place.
func lockSessionLockCap(e *env) {
	id := e.session(time.Minute)
	var toks []string
	for i := range 3 {
		tok := token.New()
		g, err := e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: e.name(fmt.Sprint("l", i)), Token: tok, TTL: time.Minute, SessionID: id, MaxSessionHolds: 3})
		noErr(e, "AcquireHold under the cap", err)
		if !g.Acquired {
			e.Fatalf("lock %d under the cap: not acquired", i)
		}
		toks = append(toks, tok)
	}
	over := e.name("l3")
	_, err := e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: over, Token: token.New(), TTL: time.Minute, SessionID: id, MaxSessionHolds: 3})
	if !errors.Is(err, store.ErrTooManyHolds) {
		e.Fatalf("a fourth lock with MaxSessionHolds 3 = %v, want ErrTooManyHolds", err)
	}
	e.wantLock(over, store.HoldInfo{})
	if !e.release(e.name("l0"), toks[0]) {
		e.Fatal("release under the cap: false")
	}
	g, err := e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: over, Token: token.New(), TTL: time.Minute, SessionID: id, MaxSessionHolds: 3})
	if err != nil || !g.Acquired {
		e.Fatalf("a lock after one was released = %+v, %v; want acquired", g, err)
	}
}

// lockSessionLockCapCountsReports: a loss report not yet acknowledged takes
// a place under the cap, so that a session's reports stay bounded.
func lockSessionLockCapCountsReports(e *env) {
	id := e.session(time.Minute)
	acquire := func(name string, maxHold time.Duration) error {
		_, err := e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), MaxHold: maxHold, SessionID: id, MaxSessionHolds: 2})
		return err
	}
	noErr(e, "first lock", acquire(e.name("a"), time.Second))
	noErr(e, "second lock", acquire(e.name("b"), 0))
	e.advance(time.Second)
	st := e.check(id)
	wantLost(e, "check at a's max hold", st.Lost, []store.LostHold{{Kind: store.HoldLock, Name: e.name("a"), Fence: st.Lost[0].Fence, Reason: store.LostMaxHold}})
	isErr(e, "a lock while a's report is unacknowledged", acquire(e.name("c"), 0), store.ErrTooManyHolds)
	_, err := e.ackAll(id, st)
	noErr(e, "acknowledge a", err)
	noErr(e, "a lock once a's report was acknowledged", acquire(e.name("c"), 0))
}

// lockSessionAlreadyHolds: a session asking for a lock it holds is
// answered at once with its existing grant (AlreadyHeld, with the grant's
// token and fence), not a new grant and not a wait for itself, even at its
// lock cap; the lock is unchanged. Another session, at its cap, is told the
// lock is held before it is told it is full.
func lockSessionAlreadyHolds(e *env) {
	t0 := e.now()
	id := e.session(time.Minute)
	n := e.name("lock")
	tok, g := e.sessionLock(n, "alice", id, 0)
	e.advance(time.Second)
	again, err := e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "alice", SessionID: id, MaxSessionHolds: 1})
	noErr(e, "AcquireHold of a lock the session holds, at its cap", err)
	if !again.Acquired || !again.AlreadyHeld || again.Token != tok || again.Fence != g.Fence ||
		again.TTL != time.Minute-time.Second || !again.ExpireTime.Equal(t0.Add(time.Minute)) {
		e.Errorf("AcquireHold of a lock the session holds = %+v; want its grant (token, fence %d), already held", again, g.Fence)
	}
	info := held("alice", g.Fence, time.Minute-time.Second, t0.Add(time.Minute), t0)
	info.SessionBound = true
	e.wantLock(n, info)
	other := e.session(time.Minute)
	e.sessionLock(e.name("other"), "bob", other, 0)
	g2, err := e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "bob", SessionID: other, MaxSessionHolds: 1})
	noErr(e, "AcquireHold of a held lock by a full session", err)
	if g2.Acquired || g2.Holder != "alice" {
		e.Errorf("a full session asking for a held lock = %+v; want not acquired, held by alice", g2)
	}
	_, err = e.s.AcquireHold(e.ctx, store.HoldRequest{Kind: store.HoldLock, Name: e.name("free"), Token: token.New(), SessionID: other, MaxSessionHolds: 1})
	isErr(e, "a full session asking for a free lock", err, store.ErrTooManyHolds)
}

// lockAbandon: AbandonHold ends an uncertain grant: a lease is released; a
// session-bound lock is deleted and its session reports it lost (GONE) and
// is woken; a token that does not hold the lock changes nothing.
func lockAbandon(e *env) {
	n := e.name("lease")
	tok, _ := e.lock(n, "alice", time.Minute)
	noErr(e, "AbandonHold with another token", e.s.AbandonHold(e.ctx, store.HoldLock, n, token.New(), ""))
	if info, err := e.s.GetHolds(e.ctx, store.HoldLock, n); err != nil || !info.Held {
		e.Fatalf("a lease after AbandonHold with another token = %+v, %v; want held", info, err)
	}
	noErr(e, "AbandonHold", e.s.AbandonHold(e.ctx, store.HoldLock, n, tok, ""))
	e.wantLock(n, store.HoldInfo{})

	id := e.session(time.Minute)
	b := e.name("bound")
	sub := e.subscribe(store.SessionTopic(id))
	btok, g := e.sessionLock(b, "alice", id, 0)
	drain(sub)
	noErr(e, "AbandonHold of a session's lock", e.s.AbandonHold(e.ctx, store.HoldLock, b, btok, ""))
	e.wantWake(sub, "SessionTopic after AbandonHold")
	e.wantLock(b, store.HoldInfo{})
	wantLost(e, "the session after AbandonHold", e.check(id).Lost, []store.LostHold{{Kind: store.HoldLock, Name: b, Fence: g.Fence, Reason: store.LostGone}})
	noErr(e, "AbandonHold again", e.s.AbandonHold(e.ctx, store.HoldLock, b, btok, ""))
}

// ReleaseLock releases lock name's hold of tok, without an instance (no
// hand-off), as the Release of a lock does: for tests of a store's locks.
func ReleaseLock(ctx context.Context, s store.Holds, name, tok string) (bool, time.Duration, error) {
	rel, err := s.ReleaseHold(ctx, store.HoldLock, name, tok, "")
	return rel.Released, rel.Held, err
}
