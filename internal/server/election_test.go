package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
)

func (h *harness) campaign(t testing.TB, c context.Context, req *coordv1.CampaignRequest) *coordv1.CampaignResponse {
	t.Helper()
	resp, err := h.elections.Campaign(c, req)
	if err != nil {
		t.Fatalf("Campaign(%s): %v", req.GetName(), err)
	}
	return resp
}

func (h *harness) leader(t testing.TB, c context.Context, name string) *coordv1.LeaderResponse {
	t.Helper()
	resp, err := h.elections.Leader(c, &coordv1.LeaderRequest{Name: name})
	if err != nil {
		t.Fatalf("Leader(%s): %v", name, err)
	}
	return resp
}

// TestElectionTerms: one leader at a time, told to the others with its
// value and fence; Proclaim changes the value (NOT_LEADER for a token that
// does not lead); Resign ends the term, once; the next term's fence is
// greater.
func TestElectionTerms(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	_, s1 := h.openSession(t, "", 30*time.Second)
	_, s2 := h.openSession(t, "", 30*time.Second)

	if l := h.leader(t, c, "e"); l.GetHasLeader() || l.GetLeader() != nil || l.GetRev() != 0 {
		t.Fatalf("Leader of a new election = %v, want none, rev 0", l)
	}
	first := h.campaign(t, c, &coordv1.CampaignRequest{Name: "e", Value: []byte("v1"), SessionId: s1.GetSessionId()})
	if !first.GetElected() || len(first.GetToken()) != 32 || first.GetFence() == 0 || first.GetAlreadyLeader() || first.GetExpireTime() == nil {
		t.Fatalf("first Campaign = %v, want elected with a token, a fence and an expire time", first)
	}
	l := h.leader(t, c, "e")
	if !l.GetHasLeader() || string(l.GetLeader().GetValue()) != "v1" || l.GetLeader().GetFence() != first.GetFence() || l.GetLeader().GetElectTime() == nil || l.GetRev() == 0 {
		t.Fatalf("Leader = %v, want v1 with fence %d, an elect time and a revision", l, first.GetFence())
	}
	again := h.campaign(t, c, &coordv1.CampaignRequest{Name: "e", Value: []byte("other"), SessionId: s1.GetSessionId(), Wait: dur(time.Second)})
	if !again.GetElected() || !again.GetAlreadyLeader() || again.GetToken() != first.GetToken() || again.GetFence() != first.GetFence() {
		t.Fatalf("Campaign by the leader's session = %v, want its term back (already_leader)", again)
	}
	other := h.campaign(t, c, &coordv1.CampaignRequest{Name: "e", Value: []byte("v-other"), SessionId: s2.GetSessionId()})
	if other.GetElected() || other.GetToken() != "" || other.GetFence() != 0 || !other.GetHasLeader() ||
		string(other.GetLeader().GetValue()) != "v1" || other.GetLeader().GetFence() != first.GetFence() {
		t.Fatalf("Campaign by another session = %v, want not elected, told the leader v1", other)
	}

	if _, err := h.elections.Proclaim(c, &coordv1.ProclaimRequest{Name: "e", Token: first.GetToken(), Value: []byte("v2")}); err != nil {
		t.Fatalf("Proclaim: %v", err)
	}
	if l2 := h.leader(t, c, "e"); string(l2.GetLeader().GetValue()) != "v2" || l2.GetLeader().GetFence() != first.GetFence() || l2.GetRev() <= l.GetRev() {
		t.Fatalf("Leader after Proclaim = %v, want v2, the same fence, a later revision than %d", l2, l.GetRev())
	}
	stranger := "0123456789abcdef0123456789abcdef"
	_, err := h.elections.Proclaim(c, &coordv1.ProclaimRequest{Name: "e", Token: stranger, Value: []byte("usurper")})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_LEADER")
	if r, err := h.elections.Resign(c, &coordv1.ResignRequest{Name: "e", Token: stranger}); err != nil || r.GetResigned() {
		t.Fatalf("Resign with a token that does not lead = %v, %v; want resigned=false", r, err)
	}

	if r, err := h.elections.Resign(c, &coordv1.ResignRequest{Name: "e", Token: first.GetToken()}); err != nil || !r.GetResigned() {
		t.Fatalf("Resign = %v, %v", r, err)
	}
	if r, err := h.elections.Resign(c, &coordv1.ResignRequest{Name: "e", Token: first.GetToken()}); err != nil || r.GetResigned() {
		t.Fatalf("Resign again = %v, %v; want resigned=false", r, err)
	}
	_, err = h.elections.Proclaim(c, &coordv1.ProclaimRequest{Name: "e", Token: first.GetToken(), Value: []byte("late")})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_LEADER")
	if l := h.leader(t, c, "e"); l.GetHasLeader() || l.GetLeader() != nil {
		t.Fatalf("Leader after Resign = %v, want none", l)
	}
	next := h.campaign(t, c, &coordv1.CampaignRequest{Name: "e", Value: []byte("v3"), SessionId: s2.GetSessionId()})
	if !next.GetElected() || next.GetFence() <= first.GetFence() {
		t.Fatalf("Campaign after the resignation = %v, want elected with a fence above %d", next, first.GetFence())
	}
	// An election's name is apart from a lock's.
	if g := h.lock(t, &coordv1.LockRequest{Name: "e", Ttl: dur(time.Minute)}); !g.GetAcquired() {
		t.Fatalf("Lock(e) = %v, want acquired", g)
	}
}

// TestElectionWaitingCandidates: candidates that wait are elected in
// arrival order as each term ends (a resignation, the end of the leader's
// session).
func TestElectionWaitingCandidates(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	k1, s1 := h.openSession(t, "", 30*time.Second)
	_, s2 := h.openSession(t, "", 30*time.Second)
	_, s3 := h.openSession(t, "", 30*time.Second)
	first := h.campaign(t, c, &coordv1.CampaignRequest{Name: "e", Value: []byte("1"), SessionId: s1.GetSessionId()})
	if !first.GetElected() {
		t.Fatalf("Campaign = %v", first)
	}
	type result struct {
		resp *coordv1.CampaignResponse
		err  error
	}
	second, third := make(chan result, 1), make(chan result, 1)
	go func() {
		r, err := h.elections.Campaign(c, &coordv1.CampaignRequest{Name: "e", Value: []byte("2"), SessionId: s2.GetSessionId(), Wait: dur(30 * time.Second)})
		second <- result{r, err}
	}()
	h.awaitCandidateQueued(t, c, "e", 1)
	go func() {
		r, err := h.elections.Campaign(c, &coordv1.CampaignRequest{Name: "e", Value: []byte("3"), SessionId: s3.GetSessionId(), Wait: dur(30 * time.Second)})
		third <- result{r, err}
	}()
	h.awaitCandidateQueued(t, c, "e", 2)

	k1.close() // the leader's session ends: the first in line is elected
	r := <-second
	if r.err != nil || !r.resp.GetElected() || r.resp.GetFence() <= first.GetFence() {
		t.Fatalf("second candidate = %v, %v; want elected with a greater fence", r.resp, r.err)
	}
	select {
	case r := <-third:
		t.Fatalf("the third candidate answered before its turn: %v, %v", r.resp, r.err)
	default:
	}
	if l := h.leader(t, c, "e"); string(l.GetLeader().GetValue()) != "2" {
		t.Fatalf("Leader = %v, want 2", l)
	}
	if _, err := h.elections.Resign(c, &coordv1.ResignRequest{Name: "e", Token: r.resp.GetToken()}); err != nil {
		t.Fatal(err)
	}
	r3 := <-third
	if r3.err != nil || !r3.resp.GetElected() || r3.resp.GetFence() <= r.resp.GetFence() {
		t.Fatalf("third candidate = %v, %v; want elected with a greater fence", r3.resp, r3.err)
	}
}

// awaitCandidateQueued waits until n candidates of election name wait. The
// API tells no count of candidates, so it watches the store.
func (h *harness) awaitCandidateQueued(t testing.TB, c context.Context, name string, n int) {
	t.Helper()
	awaitWaiters(t, "election "+name, uint32(n), func() uint32 {
		info, err := h.st.GetHolds(c, store.HoldElection, store.Scope(server.DefaultNamespace, name))
		if err != nil {
			t.Fatalf("GetHolds: %v", err)
		}
		return uint32(info.Waiters)
	})
}

// TestElectionObserve: an observer gets the current state first, then every
// change in order (a new leader, a new value, no leader), each with the
// next revision and nothing missed; a leadership whose session expires is
// streamed as its end when the lease passes.
func TestElectionObserve(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	oc, cancel := context.WithCancel(c)
	defer cancel()
	obs, err := h.elections.Observe(oc, &coordv1.ObserveRequest{Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	recv := func(what string) *coordv1.ObserveResponse {
		t.Helper()
		r, err := obs.Recv()
		if err != nil {
			t.Fatalf("Observe, waiting for %s: %v", what, err)
		}
		if r.GetMissed() != 0 {
			t.Errorf("Observe %s: missed %d, want 0", what, r.GetMissed())
		}
		return r
	}
	if r := recv("the current state"); r.GetHasLeader() || r.GetLeader() != nil || r.GetRev() != 0 {
		t.Fatalf("first Observe response = %v, want no leader, rev 0", r)
	}

	_, s1 := h.openSession(t, "", 30*time.Second)
	first := h.campaign(t, c, &coordv1.CampaignRequest{Name: "e", Value: []byte("v1"), SessionId: s1.GetSessionId()})
	r := recv("the first leader")
	if !r.GetHasLeader() || string(r.GetLeader().GetValue()) != "v1" || r.GetLeader().GetFence() != first.GetFence() || r.GetRev() == 0 {
		t.Fatalf("Observe = %v, want leader v1 with fence %d", r, first.GetFence())
	}
	rev := r.GetRev()
	if _, err := h.elections.Proclaim(c, &coordv1.ProclaimRequest{Name: "e", Token: first.GetToken(), Value: []byte("v2")}); err != nil {
		t.Fatal(err)
	}
	if r := recv("the new value"); !r.GetHasLeader() || string(r.GetLeader().GetValue()) != "v2" || r.GetRev() != rev+1 {
		t.Fatalf("Observe = %v, want v2 at rev %d", r, rev+1)
	}
	if _, err := h.elections.Resign(c, &coordv1.ResignRequest{Name: "e", Token: first.GetToken()}); err != nil {
		t.Fatal(err)
	}
	if r := recv("the resignation"); r.GetHasLeader() || r.GetRev() != rev+2 {
		t.Fatalf("Observe = %v, want no leader at rev %d", r, rev+2)
	}

	// A leader whose session is never renewed: its end comes by itself.
	k, s2 := h.openSession(t, "", 200*time.Millisecond)
	second := h.campaign(t, c, &coordv1.CampaignRequest{Name: "e", Value: []byte("short"), SessionId: s2.GetSessionId()})
	if r := recv("the second leader"); string(r.GetLeader().GetValue()) != "short" || r.GetLeader().GetFence() != second.GetFence() || r.GetRev() != rev+3 {
		t.Fatalf("Observe = %v, want leader short at rev %d", r, rev+3)
	}
	if r := recv("the expiry"); r.GetHasLeader() || r.GetRev() != rev+4 {
		t.Fatalf("Observe = %v, want no leader at rev %d (the session expired)", r, rev+4)
	}
	k.cancel()

	// Every observer sees the same history: a new one starts from now.
	o2, err := h.elections.Observe(oc, &coordv1.ObserveRequest{Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := o2.Recv(); err != nil || r.GetHasLeader() || r.GetRev() != rev+4 {
		t.Fatalf("a new observer's first response = %v, %v; want no leader at rev %d", r, err, rev+4)
	}
}

// TestElectionSession: Campaign needs a live session; a leadership ends
// when its session ends (a half-close), as a resignation.
func TestElectionSession(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withMetrics(&reg))
	c := ctx(t)
	_, err := h.elections.Campaign(c, &coordv1.CampaignRequest{Name: "e", Value: []byte("v"), SessionId: "0123456789abcdef0123456789abcdef"})
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")

	k, s := h.openSession(t, "", 30*time.Second)
	el := h.campaign(t, c, &coordv1.CampaignRequest{Name: "e", Value: []byte("v"), SessionId: s.GetSessionId()})
	if !el.GetElected() {
		t.Fatalf("Campaign = %v", el)
	}
	k.close()
	if l := h.leader(t, c, "e"); l.GetHasLeader() {
		t.Fatalf("Leader after the leader's session ended = %v, want none", l)
	}
	if _, err := h.elections.Proclaim(c, &coordv1.ProclaimRequest{Name: "e", Token: el.GetToken(), Value: []byte("late")}); err == nil {
		t.Fatal("Proclaim after the session ended: no error, want NOT_LEADER")
	} else {
		wantStatus(t, err, codes.FailedPrecondition, "NOT_LEADER")
	}
	// Resigned by the half-close: released after its hold, not lost.
	if got := metricValue(t, reg, "coordd_hold_duration_seconds", "kind", "election"); got != 1 {
		t.Errorf("coordd_hold_duration_seconds{election} count = %v, want 1", got)
	}
	for _, reason := range []string{"max_hold", "session_expired", "gone"} {
		if got := counterValue(t, reg, "coordd_holds_lost_total", "kind", "election", "reason", reason); got != 0 {
			t.Errorf("coordd_holds_lost_total{election,%s} = %v, want 0", reason, got)
		}
	}
	if got := counterValue(t, reg, "coordd_holds_granted_total", "kind", "election", "mode", "exclusive"); got != 1 {
		t.Errorf("coordd_holds_granted_total{election,exclusive} = %v, want 1", got)
	}
}

// TestAuthIsolatesElections: a key of namespace A cannot see, proclaim in,
// resign or observe namespace B's election, even with B's name and token;
// A's election of that name is another one.
func TestAuthIsolatesElections(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)))
	a, b := as(t, keyA), as(t, keyB)
	_, sb, err := h.openAs(t, b, "", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	eb := h.campaign(t, b, &coordv1.CampaignRequest{Name: "e", Value: []byte("b"), SessionId: sb.GetSessionId()})
	if !eb.GetElected() {
		t.Fatalf("B: Campaign = %v", eb)
	}
	if l := h.leader(t, a, "e"); l.GetHasLeader() {
		t.Errorf("A: Leader(e) = %v, want none", l)
	}
	_, err = h.elections.Proclaim(a, &coordv1.ProclaimRequest{Name: "e", Token: eb.GetToken(), Value: []byte("a")})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_LEADER")
	if r, err := h.elections.Resign(a, &coordv1.ResignRequest{Name: "e", Token: eb.GetToken()}); err != nil || r.GetResigned() {
		t.Errorf("A: Resign(B's token) = %v, %v; want resigned=false", r, err)
	}
	// B's session is not A's to campaign with.
	_, err = h.elections.Campaign(a, &coordv1.CampaignRequest{Name: "e", Value: []byte("a"), SessionId: sb.GetSessionId()})
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
	oc, cancel := context.WithCancel(a)
	defer cancel()
	obs, err := h.elections.Observe(oc, &coordv1.ObserveRequest{Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := obs.Recv(); err != nil || r.GetHasLeader() {
		t.Errorf("A: Observe(e) = %v, %v; want no leader", r, err)
	}
	_, sa, err := h.openAs(t, a, "", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ea := h.campaign(t, a, &coordv1.CampaignRequest{Name: "e", Value: []byte("a"), SessionId: sa.GetSessionId()}); !ea.GetElected() {
		t.Errorf("A: Campaign(e) = %v, want elected in its own election", ea)
	}
	if l := h.leader(t, b, "e"); string(l.GetLeader().GetValue()) != "b" || l.GetLeader().GetFence() != eb.GetFence() {
		t.Errorf("B: Leader(e) = %v, want b's term", l)
	}
}

// TestLimitWaitersCountObservers: an Observe stream is a long wait: it
// counts among its namespace's waiting calls (limits.max_waiters_*), and
// gives its place back when it ends.
func TestLimitWaitersCountObservers(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)), withLimits(server.Limits{MaxWaitersPerNamespace: 1}))
	oc, cancel := context.WithCancel(as(t, keyA))
	obs, err := h.elections.Observe(oc, &coordv1.ObserveRequest{Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Recv(); err != nil {
		t.Fatalf("the first Observe: %v", err)
	}
	second, err := h.elections.Observe(as(t, keyA), &coordv1.ObserveRequest{Name: "other"})
	if err == nil {
		_, err = second.Recv()
	}
	wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_WAITERS")
	_, err = h.locks.Lock(as(t, keyA), &coordv1.LockRequest{Name: "l", Ttl: dur(time.Minute), Wait: dur(time.Second)})
	wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_WAITERS")
	// Another namespace may still observe.
	ob, err := h.elections.Observe(as(t, keyB), &coordv1.ObserveRequest{Name: "e"})
	if err == nil {
		_, err = ob.Recv()
	}
	if err != nil {
		t.Fatalf("B's Observe while A's observer is open: %v", err)
	}
	cancel()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, stop := context.WithCancel(as(t, keyA))
		o, err := h.elections.Observe(c, &coordv1.ObserveRequest{Name: "e"})
		if err == nil {
			_, err = o.Recv()
		}
		stop()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Observe 10s after A's observer ended: %v", err)
		}
	}
}
