package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// staleHolder moves holder tok of (kind, name) to deadline in its record
// and in the holders by deadline, as a renewal that never reached the hold
// would leave it: its recorded deadline behind its session's.
func staleHolder(t *testing.T, s *Store, c goredis.Cmdable, kind store.HoldKind, name, tok string, deadline int64) {
	t.Helper()
	ctx := context.Background()
	keys := s.keys.hold(kind, name)
	rec, err := c.HGet(ctx, keys[0], tok).Result()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.SplitN(rec, " ", 3) // fence deadline rest
	rec = f[0] + " " + strconv.FormatInt(deadline, 10) + " " + f[2]
	if err := c.HSet(ctx, keys[0], tok, rec).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(ctx, keys[1], goredis.Z{Score: float64(deadline), Member: tok}).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestSessionHolderLivesBySession: a session-bound holder whose recorded
// deadline has passed while its session lives is live: a contender is
// refused, GetHolds and CheckFence report it (with its session's
// deadline), and the holder's record takes that deadline. Once the
// session has expired, the holder is dead without any keepalive or sweep:
// nobody gets it until the session's lock-delay has passed, counted from
// the session's deadline, and then the first waiter in line does.
func TestSessionHolderLivesBySession(t *testing.T) {
	addr := redistest.Standalone(t)
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := openStore(t, Config{Addrs: []string{addr}, Prefix: "vouch" + token.New()[:8], Clock: clk, Timeout: 5 * time.Second})
	c := goredis.NewClient(redistest.Options(addr))
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	const name = "ns:vouched"
	id := "ns:" + token.New()
	st, err := s.CreateSession(ctx, id, 10*time.Second, 0, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tok := token.New()
	g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: "s", SessionID: id})
	if err != nil || !g.Acquired {
		t.Fatalf("session-bound grant = %+v, %v", g, err)
	}
	// The session is renewed; its hold's record is left 5 s behind now.
	clk.Advance(6 * time.Second)
	if st, err = s.KeepAliveSession(ctx, store.SessionRef{ID: id}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	staleHolder(t, s, c, store.HoldLock, name, tok, clk.Now().Add(-5*time.Second).UnixMicro())

	contender := func(tk string, w *store.WaitTicket) store.Grant {
		t.Helper()
		g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tk, Owner: "c", TTL: time.Minute, Wait: w})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	first := &store.WaitTicket{Ticket: token.New(), Instance: "a", Lease: time.Hour}
	second := &store.WaitTicket{Ticket: token.New(), Instance: "b", Lease: time.Hour}
	firstTok, secondTok := token.New(), token.New()
	if g := contender(firstTok, first); g.Acquired || g.Holder != "s" {
		t.Fatalf("a contender while the holder's session lives = %+v; want refused, held by s", g)
	}
	if g := contender(secondTok, second); g.Acquired || !g.Queued {
		t.Fatalf("a second contender = %+v; want queued", g)
	}
	info, err := s.GetHolds(ctx, store.HoldLock, name)
	if err != nil || !info.Held || info.Fence != g.Fence || !info.ExpireTime.Equal(st.ExpireTime) {
		t.Fatalf("GetHolds while the session lives = %+v, %v; want held with fence %d until the session's deadline %v", info, err, g.Fence, st.ExpireTime)
	}
	if ok, err := s.CheckFence(ctx, store.HoldLock, name, g.Fence); err != nil || !ok {
		t.Fatalf("CheckFence(%d) while the session lives = %v, %v", g.Fence, ok, err)
	}

	// The session expires; nothing sweeps it or drops its hold, whose
	// record says only that it lived until the session's deadline: asking
	// the session tells it is dead.
	clk.Set(st.ExpireTime.Add(time.Second))
	if ok, err := s.CheckFence(ctx, store.HoldLock, name, g.Fence); err != nil || ok {
		t.Fatalf("CheckFence(%d) after the session expired = %v, %v; want false", g.Fence, ok, err)
	}
	if info, err := s.GetHolds(ctx, store.HoldLock, name); err != nil || info.Held {
		t.Fatalf("GetHolds after the session expired = %+v, %v; want not held", info, err)
	}
	// Within the lock-delay (2 s from the session's deadline): nobody.
	if g := contender(firstTok, first); g.Acquired {
		t.Fatalf("the first waiter within the lock-delay = %+v; want refused", g)
	}
	clk.Set(st.ExpireTime.Add(2*time.Second + time.Millisecond))
	if g := contender(secondTok, second); g.Acquired {
		t.Fatalf("the second waiter, ahead of the first, after the lock-delay = %+v; want refused (FIFO)", g)
	}
	if g := contender(firstTok, first); !g.Acquired {
		t.Fatalf("the first waiter after the lock-delay = %+v; want granted", g)
	}
}

// TestSessionHolderReleasedPastItsRecordedDeadline: a session-bound hold
// released by its token is released, with no lock-delay (the next
// contender gets it at once), even when its recorded deadline passes
// between the release's steps (releaseHold: a try that finds it bound,
// the hold out of its session's set, the release). The hold leaves the set
// with its session's word on it (session_vouch.lua with unbind), which the
// release decides by. The steps are run here as releaseHold runs them,
// with the record made stale between them; without that word (the
// release asking the session afresh, which by then holds nothing) the
// release answers "not held", as the linearizability check of
// session-bound semaphores once caught.
func TestSessionHolderReleasedPastItsRecordedDeadline(t *testing.T) {
	addr := redistest.Standalone(t)
	ctx := context.Background()
	const name = "ns:released"
	run := func(withWord bool) (released released, contender store.Grant) {
		t.Helper()
		clk := clock.NewFake(time.Unix(1_800_000_000, 0))
		s := openStore(t, Config{Addrs: []string{addr}, Prefix: "rel" + token.New()[:8], Clock: clk, Timeout: 5 * time.Second})
		c := goredis.NewClient(redistest.Options(addr))
		t.Cleanup(func() { _ = c.Close() })
		id := "ns:" + token.New()
		if _, err := s.CreateSession(ctx, id, 10*time.Second, 0, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		tok := token.New()
		if g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: "s", SessionID: id}); err != nil || !g.Acquired {
			t.Fatalf("session-bound grant = %+v, %v", g, err)
		}
		clk.Advance(6 * time.Second)
		if _, err := s.KeepAliveSession(ctx, store.SessionRef{ID: id}, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		rel, err := s.release(ctx, store.HoldLock, name, tok, false, "", "", "")
		if err != nil || rel.code != codeSessionBound {
			t.Fatalf("release of a bound hold by its token = %+v, %v; want SESSION_BOUND", rel, err)
		}
		live, deadline, err := s.unbindHold(ctx, id, store.HoldLock, name, tok)
		if err != nil || !live {
			t.Fatalf("the hold leaving its live session = %v, %v; want live", live, err)
		}
		staleHolder(t, s, c, store.HoldLock, name, tok, clk.Now().Add(-5*time.Second).UnixMicro())
		facts := ""
		if withWord {
			facts = fact(tok, live, deadline)
		}
		if released, err = s.release(ctx, store.HoldLock, name, tok, true, "", "", facts); err != nil {
			t.Fatal(err)
		}
		contender, err = s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), Owner: "c", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return released, contender
	}
	if rel, g := run(true); rel.code != codeOK || !g.Acquired {
		t.Errorf("released past the recorded deadline, with the session's word: %+v, then a contender %+v; want released, then granted", rel, g)
	}
	if rel, _ := run(false); rel.code != codeNo {
		t.Errorf("without the session's word: %+v; want not released (what the word prevents)", rel)
	}
}
