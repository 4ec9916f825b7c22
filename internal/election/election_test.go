package election_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/election"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = "ns"

type harness struct {
	svc    *election.Service
	mem    *memory.Store
	faulty *storetest.Faulty
	clock  *clock.Fake
	drain  chan struct{}
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c})
	f := storetest.NewFaulty(mem)
	drain := make(chan struct{})
	queues := hold.NewWaiters(f, f, drain)
	svc := election.New(f, queues, c, election.DefaultConfig(), drain)
	h := &harness{svc: svc, mem: mem, faulty: f, clock: c, drain: drain}
	t.Cleanup(func() {
		select {
		case <-drain:
		default:
			close(drain)
		}
		queues.Close()
		svc.Wait()
		_ = f.Close()
	})
	return h
}

func (h *harness) session(t *testing.T, ttl time.Duration) string {
	t.Helper()
	id := token.New()
	if _, err := h.mem.CreateSession(t.Context(), store.Scope(ns, id), ttl, 0, 0); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestCampaignProclaimResign(t *testing.T) {
	h := newHarness(t)
	s1, s2 := h.session(t, time.Minute), h.session(t, time.Minute)
	c1, err := h.svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: s1, Value: []byte("one")})
	if err != nil || !c1.Elected || !token.Valid(c1.Token) || c1.Fence == 0 {
		t.Fatalf("first campaign: %+v, %v", c1, err)
	}
	again, err := h.svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: s1, Value: []byte("one")})
	if err != nil || !again.AlreadyLeader || again.Token != c1.Token {
		t.Fatalf("the leader's session again: %+v, %v; want its term back", again, err)
	}
	c2, err := h.svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: s2, Value: []byte("two")})
	if err != nil || c2.Elected || c2.Token != "" || !c2.Leader.HasLeader || string(c2.Leader.Value) != "one" || c2.Leader.Fence != c1.Fence {
		t.Fatalf("second campaign: %+v, %v; want not elected, leader one", c2, err)
	}
	if err := h.svc.Proclaim(t.Context(), ns, "e", c1.Token, []byte("uno")); err != nil {
		t.Fatalf("Proclaim: %v", err)
	}
	if err := h.svc.Proclaim(t.Context(), ns, "e", token.New(), []byte("x")); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("Proclaim by another token = %v, want ErrNotLeader", err)
	}
	l, err := h.svc.Leader(t.Context(), ns, "e")
	if err != nil || !l.HasLeader || string(l.Value) != "uno" || l.Fence != c1.Fence {
		t.Fatalf("Leader: %+v, %v", l, err)
	}
	waiting := make(chan store.Campaigned, 1)
	go func() {
		c, err := h.svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: s2, Value: []byte("two"), Wait: 30 * time.Second})
		if err != nil {
			t.Error(err)
		}
		waiting <- c
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := h.mem.GetHolds(t.Context(), store.HoldElection, store.Scope(ns, "e"))
		if info.Waiters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiting campaign never queued")
		}
		time.Sleep(time.Millisecond)
	}
	if ok, _, err := h.svc.Resign(t.Context(), ns, "e", c1.Token); err != nil || !ok {
		t.Fatalf("Resign: %v, %v", ok, err)
	}
	c := <-waiting
	if !c.Elected || c.Fence <= c1.Fence || !token.Valid(c.Token) {
		t.Fatalf("waiting campaign: %+v; want elected with a greater fence", c)
	}
	if ok, _, err := h.svc.Resign(t.Context(), ns, "e", c1.Token); err != nil || ok {
		t.Errorf("second Resign: %v, %v; want false", ok, err)
	}
}

type seen struct {
	c      store.ElectionChange
	missed uint64
}

// observe runs Observe in the background; changes arrive on the channel.
func (h *harness) observe(t *testing.T, ctx context.Context, name string, gate chan struct{}) (<-chan seen, <-chan error) {
	out := make(chan seen, 256)
	done := make(chan error, 1)
	first := true
	go func() {
		done <- h.svc.Observe(ctx, ns, name, func(c store.ElectionChange, missed uint64) error {
			if first && gate != nil {
				<-gate
			}
			first = false
			out <- seen{c, missed}
			return nil
		})
	}()
	return out, done
}

func next(t *testing.T, ch <-chan seen) seen {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no change observed within 10s")
		return seen{}
	}
}

// TestObserve: the current leader first, then every change in order: a new
// value, a resignation, a new leader, and the end of a leader whose
// session expired (no event: the observer re-reads at its expire time).
func TestObserve(t *testing.T) {
	h := newHarness(t)
	s1 := h.session(t, time.Minute)
	c1, err := h.svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: s1, Value: []byte("a")})
	if err != nil || !c1.Elected {
		t.Fatal(c1, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ch, done := h.observe(t, ctx, "e", nil)
	first := next(t, ch)
	if !first.c.Leader.HasLeader || string(first.c.Leader.Value) != "a" || first.c.Rev == 0 || first.missed != 0 {
		t.Fatalf("first: %+v; want the leader a", first)
	}
	rev := first.c.Rev
	want := func(what string, leader bool, value string) {
		t.Helper()
		s := next(t, ch)
		rev++
		if s.c.Rev != rev || s.c.Leader.HasLeader != leader || string(s.c.Leader.Value) != value || s.missed != 0 {
			t.Fatalf("%s: %+v; want rev %d, leader %v %q", what, s, rev, leader, value)
		}
	}
	if err := h.svc.Proclaim(t.Context(), ns, "e", c1.Token, []byte("b")); err != nil {
		t.Fatal(err)
	}
	want("proclaim", true, "b")
	if _, _, err := h.svc.Resign(t.Context(), ns, "e", c1.Token); err != nil {
		t.Fatal(err)
	}
	want("resign", false, "")
	s2 := h.session(t, 50*time.Millisecond)
	if c, err := h.svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: s2, Value: []byte("c")}); err != nil || !c.Elected {
		t.Fatal(c, err)
	}
	want("new leader", true, "c")
	h.clock.Advance(time.Second) // s2 expires: nobody calls the store
	want("expiry", false, "")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Observe after cancel = %v, want context.Canceled", err)
	}
}

// TestObserveMissed: an observer that falls further behind than the
// store's log is told how many changes it missed, then gets the rest in
// order.
func TestObserveMissed(t *testing.T) {
	h := newHarness(t)
	s1 := h.session(t, time.Minute)
	c1, err := h.svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: s1, Value: []byte("v")})
	if err != nil || !c1.Elected {
		t.Fatal(c1, err)
	}
	gate := make(chan struct{})
	ch, done := h.observe(t, t.Context(), "e", gate)
	const n = store.ElectionLogSize + 6
	for i := range n {
		// The first send is held until these are done: the observer lags.
		for h.faulty.Calls("Leader") == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := h.svc.Proclaim(t.Context(), ns, "e", c1.Token, fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	first := next(t, ch)
	s := next(t, ch)
	if s.missed != n-store.ElectionLogSize || s.c.Rev != first.c.Rev+s.missed+1 {
		t.Fatalf("after falling behind: %+v; want %d missed, rev %d", s, n-store.ElectionLogSize, first.c.Rev+n-store.ElectionLogSize+1)
	}
	for i := 1; i < store.ElectionLogSize; i++ {
		r := next(t, ch)
		if r.missed != 0 || r.c.Rev != s.c.Rev+uint64(i) {
			t.Fatalf("change %d: %+v", i, r)
		}
		if i == store.ElectionLogSize-1 && !bytes.Equal(r.c.Leader.Value, fmt.Appendf(nil, "%d", n-1)) {
			t.Errorf("last value %q, want %d", r.c.Leader.Value, n-1)
		}
	}
	close(h.drain)
	if err := <-done; err != nil {
		t.Errorf("Observe after the drain = %v, want nil", err)
	}
}

// TestCampaignUncertainCleanedUp: a campaign whose answer was lost is
// abandoned by its token.
func TestCampaignUncertainCleanedUp(t *testing.T) {
	h := newHarness(t)
	s1 := h.session(t, time.Minute)
	h.faulty.FailAfter("Campaign")
	if _, err := h.svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: s1, Value: []byte("v")}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := h.faulty.Calls("AbandonHold"); n != 1 {
		t.Errorf("AbandonHold called %d times, want 1", n)
	}
	if l, err := h.mem.Leader(t.Context(), store.Scope(ns, "e")); err != nil || l.HasLeader {
		t.Errorf("Leader after the clean-up: %+v, %v; want none", l, err)
	}
}

// TestBadRequests: every bad field is INVALID_ARGUMENT naming it, before
// any store call.
func TestBadRequests(t *testing.T) {
	h := newHarness(t)
	cfg := election.DefaultConfig()
	sid := token.New()
	big := bytes.Repeat([]byte("x"), cfg.MaxValueBytes+1)
	long := strings.Repeat("x", cfg.MaxNameBytes+1)
	campaign := func(r election.CampaignRequest) func() error {
		return func() error { _, err := h.svc.Campaign(t.Context(), r); return err }
	}
	for _, tc := range []struct {
		field string
		call  func() error
	}{
		{"name", campaign(election.CampaignRequest{NS: ns, SessionID: sid, Value: []byte("v")})},
		{"name", campaign(election.CampaignRequest{NS: ns, Name: long, SessionID: sid, Value: []byte("v")})},
		{"session_id", campaign(election.CampaignRequest{NS: ns, Name: "e", Value: []byte("v")})},
		{"session_id", campaign(election.CampaignRequest{NS: ns, Name: "e", SessionID: "x", Value: []byte("v")})},
		{"value", campaign(election.CampaignRequest{NS: ns, Name: "e", SessionID: sid})},
		{"value", campaign(election.CampaignRequest{NS: ns, Name: "e", SessionID: sid, Value: big})},
		{"wait", campaign(election.CampaignRequest{NS: ns, Name: "e", SessionID: sid, Value: []byte("v"), Wait: -1})},
		{"wait", campaign(election.CampaignRequest{NS: ns, Name: "e", SessionID: sid, Value: []byte("v"), Wait: time.Hour})},
		{"token", func() error { return h.svc.Proclaim(t.Context(), ns, "e", "", []byte("v")) }},
		{"value", func() error { return h.svc.Proclaim(t.Context(), ns, "e", token.New(), nil) }},
		{"value", func() error { return h.svc.Proclaim(t.Context(), ns, "e", token.New(), big) }},
		{"name", func() error { return h.svc.Proclaim(t.Context(), ns, "", token.New(), []byte("v")) }},
		{"token", func() error { _, _, err := h.svc.Resign(t.Context(), ns, "e", "x"); return err }},
		{"name", func() error { _, err := h.svc.Leader(t.Context(), ns, ""); return err }},
		{"name", func() error {
			return h.svc.Observe(t.Context(), ns, "", func(store.ElectionChange, uint64) error { return nil })
		}},
	} {
		before := h.faulty.CallCounts()
		err := tc.call()
		var fe *validate.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("err = %v, want a FieldError for %q", err, tc.field)
		}
		if made := h.faulty.CallsSince(before); len(made) != 0 {
			t.Errorf("%s: store calls %v before the check", tc.field, made)
		}
	}
}

// TestObserveAfterTheElectionWasForgotten: an election idle long enough
// (no leader, no candidate) is forgotten by the store and its revisions
// start again from 1; an observer that was there before still gets the
// changes that come after.
func TestObserveAfterTheElectionWasForgotten(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c, SweepInterval: 5 * time.Millisecond})
	drain := make(chan struct{})
	queues := hold.NewWaiters(mem, mem, drain)
	svc := election.New(mem, queues, c, election.DefaultConfig(), drain)
	h := &harness{svc: svc, mem: mem, clock: c, drain: drain}
	t.Cleanup(func() { close(drain); queues.Close(); svc.Wait(); _ = mem.Close() })
	for _, v := range []string{"a", "b"} {
		id := h.session(t, time.Minute)
		g, err := svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: id, Value: []byte(v)})
		if err != nil || !g.Elected {
			t.Fatal(g, err)
		}
		if _, _, err := svc.Resign(t.Context(), ns, "e", g.Token); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, _ := h.observe(t, ctx, "e", nil)
	if first := next(t, ch); first.c.Rev != 4 || first.c.Leader.HasLeader {
		t.Fatalf("first: %+v; want revision 4, no leader", first)
	}
	c.Advance(48 * time.Hour)
	deadline := time.Now().Add(5 * time.Second)
	for mem.Len() > 0 { // the sweep forgets the idle election
		if time.Now().After(deadline) {
			t.Fatalf("the idle election is still there (Len %d)", mem.Len())
		}
		time.Sleep(5 * time.Millisecond)
	}
	id := h.session(t, time.Minute)
	if g, err := svc.Campaign(t.Context(), election.CampaignRequest{NS: ns, Name: "e", SessionID: id, Value: []byte("c")}); err != nil || !g.Elected {
		t.Fatal(g, err)
	}
	if s := next(t, ch); !s.c.Leader.HasLeader || string(s.c.Leader.Value) != "c" || s.c.Rev != 1 {
		t.Fatalf("after the restart: %+v; want leader c at revision 1", s)
	}
}
