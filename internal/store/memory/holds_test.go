package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// The memory store notifies before a call returns, so these tests see
// exactly which wake-ups a call made, without waiting.

type holdsEnv struct {
	*testing.T
	s   *Store
	c   *clock.Fake
	ctx context.Context
}

func newHoldsEnv(t *testing.T) *holdsEnv {
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := New(Options{Clock: c, SweepInterval: time.Hour})
	t.Cleanup(func() { _ = s.Close() })
	return &holdsEnv{T: t, s: s, c: c, ctx: context.Background()}
}

func (e *holdsEnv) acquire(req store.HoldRequest) store.Grant {
	e.Helper()
	if req.Token == "" {
		req.Token = token.New()
	}
	g, err := e.s.AcquireHold(e.ctx, req)
	if err != nil {
		e.Fatalf("AcquireHold %+v: %v", req, err)
	}
	return g
}

// waiter is a request with its ticket on its own instance, subscribed to
// its wake-ups.
type waiter struct {
	req store.HoldRequest
	sub *store.Subscription
}

func (e *holdsEnv) waiter(req store.HoldRequest) *waiter {
	e.Helper()
	req.Token = token.New()
	req.Wait = &store.WaitTicket{Ticket: token.New(), Instance: token.New()[:16], Lease: time.Minute}
	sub, err := e.s.Subscribe(e.ctx, store.WaitTopic(req.Kind, req.Name, req.Wait.Instance))
	if err != nil {
		e.Fatal(err)
	}
	e.Cleanup(sub.Close)
	return &waiter{req: req, sub: sub}
}

func woken(w *waiter) bool {
	select {
	case <-w.sub.C():
		return true
	default:
		return false
	}
}

// wantWoken checks which waiters the last call woke (and forgets it).
func (e *holdsEnv) wantWoken(what string, ws map[string]*waiter, want ...string) {
	e.Helper()
	for name, w := range ws {
		got, should := woken(w), false
		for _, n := range want {
			should = should || n == name
		}
		if got != should {
			e.Errorf("%s: %s woken %v, want %v", what, name, got, should)
		}
	}
}

func (e *holdsEnv) release(kind store.HoldKind, name, tok string) {
	e.Helper()
	if rel, err := e.s.ReleaseHold(e.ctx, kind, name, tok, ""); err != nil || !rel.Released {
		e.Fatalf("ReleaseHold: %+v, %v", rel, err)
	}
}

// TestTicketOrderSharedExclusive: behind an exclusive holder wait S1, S2
// (shared), E (exclusive), S3 (shared). The release lets in the run of
// shared tickets at the head, and wakes only them; S3 stays behind E
// (writers are not starved); E is woken when the readers are gone, S3
// when E is.
func TestTicketOrderSharedExclusive(t *testing.T) {
	e := newHoldsEnv(t)
	const n = "ns:rw"
	lock := func(shared bool) store.HoldRequest {
		return store.HoldRequest{Kind: store.HoldLock, Name: n, Owner: "o", TTL: time.Hour, Shared: shared, MaxHolders: 10}
	}
	x := lock(false)
	x.Token = token.New()
	if g := e.acquire(x); !g.Acquired {
		t.Fatalf("first grant %+v", g)
	}
	ws := map[string]*waiter{"S1": e.waiter(lock(true)), "S2": e.waiter(lock(true)), "E": e.waiter(lock(false)), "S3": e.waiter(lock(true))}
	for _, name := range []string{"S1", "S2", "E", "S3"} {
		if g := e.acquire(ws[name].req); g.Acquired || !g.Queued {
			t.Fatalf("%s: %+v, want queued", name, g)
		}
	}
	e.wantWoken("queueing", ws)

	e.release(store.HoldLock, n, x.Token)
	e.wantWoken("the exclusive holder's release", ws, "S1", "S2")

	// S3 without its place, and with it, is behind E.
	if g := e.acquire(lock(true)); g.Acquired || !g.RetryAt.IsZero() || g.Holder != "" {
		t.Errorf("a new shared request behind E = %+v; want refused, blocked by a ticket only", g)
	}
	if g := e.acquire(ws["S3"].req); g.Acquired || !g.Queued {
		t.Errorf("S3 = %+v; want queued behind E", g)
	}
	// S2 may come back before S1: shared tickets ahead do not block it.
	if g := e.acquire(ws["S2"].req); !g.Acquired || g.Holders != 1 {
		t.Fatalf("S2 = %+v; want granted, 1 holder", g)
	}
	e.wantWoken("S2's grant", ws, "S1") // still at the head, and may come in
	if g := e.acquire(ws["S1"].req); !g.Acquired || g.Holders != 2 {
		t.Fatalf("S1 = %+v; want granted, 2 holders", g)
	}
	e.wantWoken("S1's grant", ws)
	if g := e.acquire(ws["E"].req); g.Acquired || !g.Queued || g.Holders != 2 || g.Holder != "o" {
		t.Errorf("E beside readers = %+v; want queued, 2 holders", g)
	}
	e.release(store.HoldLock, n, ws["S1"].req.Token)
	e.wantWoken("the first reader's release", ws)
	e.release(store.HoldLock, n, ws["S2"].req.Token)
	e.wantWoken("the last reader's release", ws, "E")
	if g := e.acquire(ws["E"].req); !g.Acquired {
		t.Fatalf("E = %+v; want granted", g)
	}
	e.release(store.HoldLock, n, ws["E"].req.Token)
	e.wantWoken("the writer's release", ws, "S3")
	if g := e.acquire(ws["S3"].req); !g.Acquired {
		t.Fatalf("S3 = %+v; want granted", g)
	}
}

// TestTargetedWakeSemaphore: a release wakes the first ticket only, two
// releases the first two; a ticket leaving wakes the next in its place;
// an instance with no ticket that can be granted is never woken.
func TestTargetedWakeSemaphore(t *testing.T) {
	e := newHoldsEnv(t)
	const n = "ns:sem"
	permit := func() store.HoldRequest {
		return store.HoldRequest{Kind: store.HoldSemaphore, Name: n, Owner: "o", TTL: time.Hour, Limit: 2}
	}
	h1, h2 := permit(), permit()
	h1.Token, h2.Token = token.New(), token.New()
	e.acquire(h1)
	e.acquire(h2)
	ws := map[string]*waiter{"A": e.waiter(permit()), "B": e.waiter(permit()), "C": e.waiter(permit()), "D": e.waiter(permit())}
	for _, name := range []string{"A", "B", "C", "D"} {
		if g := e.acquire(ws[name].req); !g.Queued || g.Limit != 2 || g.Holders != 2 {
			t.Fatalf("%s = %+v; want queued", name, g)
		}
	}
	e.release(store.HoldSemaphore, n, h1.Token)
	e.wantWoken("one release", ws, "A")
	e.release(store.HoldSemaphore, n, h2.Token)
	e.wantWoken("two releases", ws, "A", "B")
	if _, err := e.s.LeaveQueue(e.ctx, store.HoldSemaphore, n, ws["A"].req.Wait.Ticket, "", ""); err != nil {
		t.Fatal(err)
	}
	e.wantWoken("the head leaving", ws, "B", "C")
	if g := e.acquire(ws["C"].req); !g.Acquired || g.Holders != 1 {
		t.Fatalf("C = %+v; want granted", g)
	}
	e.wantWoken("C's grant", ws, "B")
	// A lapsed ticket blocks no one, and its lapse wakes whom it lets in.
	if g := e.acquire(ws["B"].req); !g.Acquired {
		t.Fatalf("B = %+v; want granted", g)
	}
	e.wantWoken("B's grant", ws)
	e.release(store.HoldSemaphore, n, ws["B"].req.Token)
	e.wantWoken("B's release", ws, "D")
	e.c.Advance(time.Minute) // D's lease passes
	late := e.waiter(permit())
	ws["late"] = late
	if g := e.acquire(late.req); !g.Acquired {
		t.Fatalf("a request behind a lapsed ticket = %+v; want granted", g)
	}
	e.wantWoken("after the lapse", ws)
}

// TestLockDelayBoundaries: a session's expiry keeps its hold's name from
// being granted until its deadline + the session's delay, exactly, for a
// lock and a semaphore, even across the sweep; a release, a clean close
// and a max hold's end delay nothing.
func TestLockDelayBoundaries(t *testing.T) {
	const delay = 5 * time.Second
	e := newHoldsEnv(t)
	session := func() string {
		id := "ns/" + token.New()
		if _, err := e.s.CreateSession(e.ctx, id, 10*time.Second, 0, delay); err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, kind := range []store.HoldKind{store.HoldLock, store.HoldSemaphore} {
		n := "ns:" + string(kind)
		req := func(id string, maxHold time.Duration) store.HoldRequest {
			return store.HoldRequest{Kind: kind, Name: n, Token: token.New(), Owner: "o", TTL: time.Second, SessionID: id, Limit: 1, MaxHold: maxHold}
		}
		grant := func(what string, r store.HoldRequest) {
			t.Helper()
			if g := e.acquire(r); !g.Acquired {
				t.Fatalf("%s %s = %+v; want granted", kind, what, g)
			}
		}
		t0 := e.c.Now()
		grant("a session's", req(session(), 0))
		e.c.Advance(10 * time.Second) // the session expires
		end := t0.Add(10*time.Second + delay)
		if g := e.acquire(req("", 0)); g.Acquired || !g.RetryAt.Equal(end) || g.Holder != "" || g.Holders != 0 {
			t.Errorf("%s at the session's deadline = %+v; want refused until %v", kind, g, end)
		}
		e.s.sweep() // the name keeps only its delay: not freed
		e.c.Set(end.Add(-time.Microsecond))
		if g := e.acquire(req("", 0)); g.Acquired || !g.RetryAt.Equal(end) {
			t.Errorf("%s 1µs before the delay's end = %+v; want refused until %v", kind, g, end)
		}
		e.c.Set(end)
		r := req("", 0)
		grant("at the delay's end", r)
		e.release(kind, n, r.Token)

		// A release and a clean close delay nothing.
		id := session()
		r = req(id, 0)
		grant("a session's", r)
		e.release(kind, n, r.Token)
		grant("after a release", req("", 0))
		e.c.Advance(time.Second)
		grant("a session's, again", req(id, 0))
		if _, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id}); err != nil {
			t.Fatal(err)
		}
		grant("after a clean close", req("", 0))
		e.c.Advance(time.Second)
		// A max hold's end delays nothing, even found after the session's.
		grant("a session's with a max hold", req(session(), 2*time.Second))
		e.c.Advance(time.Minute)
		grant("after a max hold's end", req("", 0))
		e.c.Advance(time.Second)
	}
}

// TestMoreExpiredThanOneCleanUp: when more holders expire at once than a
// call removes, the counts, the grants and the lock-delay are as if all
// were removed.
func TestMoreExpiredThanOneCleanUp(t *testing.T) {
	e := newHoldsEnv(t)
	const n = "ns:big"
	const limit = 3 * cleanBatch
	permit := func(id string) store.HoldRequest {
		return store.HoldRequest{Kind: store.HoldSemaphore, Name: n, Owner: "o", TTL: time.Second, SessionID: id, Limit: limit}
	}
	for i := range limit - 1 {
		id := fmt.Sprint("ns/s", i)                               // a session holds one permit of a name
		ttl := 10*time.Second + time.Duration(i)*time.Millisecond // the later ones delay longer
		if _, err := e.s.CreateSession(e.ctx, id, ttl, 0, time.Second); err != nil {
			t.Fatal(err)
		}
		if g := e.acquire(permit(id)); !g.Acquired || g.Holders != i+1 {
			t.Fatalf("permit %d = %+v", i, g)
		}
	}
	last := permit("")
	last.TTL = time.Hour
	if g := e.acquire(last); !g.Acquired || g.Holders != limit {
		t.Fatalf("the last permit = %+v", g)
	}
	t0 := e.c.Now()
	e.c.Advance(11 * time.Second) // the sessions' permits expire
	end := t0.Add(10*time.Second + (limit-2)*time.Millisecond + time.Second)
	if g := e.acquire(permit("")); g.Acquired || !g.RetryAt.Equal(end) || g.Holders != 1 {
		t.Errorf("during the lock-delay = %+v; want refused until %v, 1 live holder", g, end)
	}
	info, err := e.s.GetHolds(e.ctx, store.HoldSemaphore, n)
	if err != nil || len(info.Holders) != 1 || info.Limit != limit {
		t.Errorf("GetHolds = %d holders, limit %d, %v; want 1, %d", len(info.Holders), info.Limit, err, limit)
	}
	e.c.Set(end.Add(-time.Microsecond))
	if g := e.acquire(permit("")); g.Acquired {
		t.Errorf("1µs before the last lock-delay's end = %+v; want refused", g)
	}
	e.c.Set(end)
	for i := range limit - 1 {
		if g := e.acquire(permit("")); !g.Acquired || g.Holders != i+2 {
			t.Fatalf("permit %d after the delay = %+v", i, g)
		}
	}
	if g := e.acquire(permit("")); g.Acquired {
		t.Fatalf("one permit too many = %+v", g)
	}
}

// TestSweepFreesHolds: the sweep removes expired holders and lapsed
// tickets of names nobody touches, waking whom a lapse lets in, and then
// forgets the names.
func TestSweepFreesHolds(t *testing.T) {
	e := newHoldsEnv(t)
	const n = "ns:l"
	h := store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "o", TTL: time.Hour}
	e.acquire(h)
	w1, w2 := e.waiter(h), e.waiter(h)
	w1.req.Wait.Lease = time.Second
	e.acquire(w1.req)
	e.acquire(w2.req)
	e.release(store.HoldLock, n, h.Token)
	ws := map[string]*waiter{"w1": w1, "w2": w2}
	e.wantWoken("the release", ws, "w1")
	e.c.Advance(time.Second) // w1 lapses
	e.s.sweep()
	e.wantWoken("the sweep after w1's lapse", ws, "w2")
	e.c.Advance(time.Hour)
	e.s.sweep()
	if n := e.s.Len(); n != 0 {
		t.Errorf("Len after everything ended = %d, want 0", n)
	}
}

// TestElectionKeptWhileRecent: an election without leader or waiters keeps
// its revision and log for the idle name ttl after its last change (so
// that observers behind it see the changes they missed), and is forgotten
// by the sweep after that.
func TestElectionKeptWhileRecent(t *testing.T) {
	e := newHoldsEnv(t)
	const n = "ns:e"
	id := "ns/s"
	if _, err := e.s.CreateSession(e.ctx, id, time.Minute, 0, 0); err != nil {
		t.Fatal(err)
	}
	c, err := e.s.Campaign(e.ctx, store.Campaign{Name: n, Token: token.New(), SessionID: id, Value: []byte("v")})
	if err != nil || !c.Elected {
		t.Fatalf("Campaign = %+v, %v", c, err)
	}
	if _, err := e.s.CloseSession(e.ctx, store.SessionRef{ID: id}); err != nil {
		t.Fatal(err)
	}
	e.c.Advance(DefaultIdleNameTTL - time.Microsecond)
	e.s.sweep()
	if l, err := e.s.ElectionChanges(e.ctx, n, 0); err != nil || len(l.Changes) != 2 || l.Current.Rev != 2 || l.Current.HasLeader {
		t.Fatalf("ElectionChanges before the retention's end = %+v, %v; want 2 changes, no leader at rev 2", l, err)
	}
	e.c.Advance(time.Microsecond)
	e.s.sweep()
	if n := e.s.Len(); n != 0 {
		t.Errorf("Len after the retention = %d, want 0", n)
	}
}
