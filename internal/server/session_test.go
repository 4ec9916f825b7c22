package server_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store/storetest"
)

// keepAlive is one KeepAlive stream.
type keepAlive struct {
	t      testing.TB
	stream coordv1.SessionService_KeepAliveClient
	cancel context.CancelFunc
}

func (h *harness) openSession(t testing.TB, id string, ttl time.Duration) (*keepAlive, *coordv1.KeepAliveResponse) {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	stream, err := h.sessions.KeepAlive(c)
	if err != nil {
		t.Fatal(err)
	}
	k := &keepAlive{t: t, stream: stream, cancel: cancel}
	t.Cleanup(cancel)
	return k, k.beat(id, ttl)
}

// beat sends a heartbeat and returns the answer.
func (k *keepAlive) beat(id string, ttl time.Duration) *coordv1.KeepAliveResponse {
	k.t.Helper()
	req := &coordv1.KeepAliveRequest{SessionId: id}
	if ttl > 0 {
		req.Ttl = dur(ttl)
	}
	if err := k.stream.Send(req); err != nil {
		k.t.Fatal(err)
	}
	resp, err := k.stream.Recv()
	if err != nil {
		k.t.Fatalf("KeepAlive Recv: %v", err)
	}
	return resp
}

func (h *harness) held(t testing.TB, name string) *coordv1.GetLockResponse {
	t.Helper()
	info, err := h.locks.GetLock(ctx(t), &coordv1.GetLockRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestSessionHalfCloseReleasesLocksAtOnce(t *testing.T) {
	h := newHarness(t)
	k, first := h.openSession(t, "", 30*time.Second)
	id := first.GetSessionId()
	if len(id) != 32 || first.GetTtl().AsDuration() != 30*time.Second {
		t.Fatalf("first response = %v, want a new session with a 30s ttl", first)
	}
	for _, name := range []string{"a", "b"} {
		if g := h.lock(t, &coordv1.LockRequest{Name: name, SessionId: id, Owner: "s"}); !g.GetAcquired() {
			t.Fatalf("Lock(%s) = %v", name, g)
		}
		if info := h.held(t, name); !info.GetHeld() || !info.GetSessionBound() {
			t.Fatalf("GetLock(%s) = %v, want held by session %s", name, info, id)
		}
	}
	// A waiter on "a" is granted it as soon as the session ends.
	waiter := make(chan *coordv1.LockResponse, 1)
	go func() {
		resp, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "a", Ttl: dur(time.Minute), Wait: dur(20 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		waiter <- resp
	}()
	if err := k.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after half-close Recv = %v, want the stream to end with OK", err)
	}
	if info := h.held(t, "b"); info.GetHeld() {
		t.Fatalf("GetLock(b) after half-close = %v, want released", info)
	}
	if resp := <-waiter; !resp.GetAcquired() {
		t.Fatalf("waiter got %v, want the lock the session released", resp)
	}
	_, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "c", SessionId: id})
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
}

// TestSessionHalfCloseOutlivesTheClient: a client that half-closes and then
// goes away at once (its stream's context ends while the store is still
// releasing) still gets its session ended and its locks released, not left
// until the session's TTL.
func TestSessionHalfCloseOutlivesTheClient(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withFaulty(&f))
	k, first := h.openSession(t, "", time.Minute)
	id := first.GetSessionId()
	if g := h.lock(t, &coordv1.LockRequest{Name: "a", SessionId: id}); !g.GetAcquired() {
		t.Fatalf("Lock(a) = %v", g)
	}
	f.Set("CloseSession", storetest.Fault{Delay: 300 * time.Millisecond, Times: 1})
	if err := k.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, f, "CloseSession", 1)
	k.cancel() // the client is gone before the release is done
	for end := time.Now().Add(5 * time.Second); h.held(t, "a").GetHeld(); {
		if time.Now().After(end) {
			t.Fatal("lock a still held 5s after its session was half-closed; want it released")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "b", SessionId: id})
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
}

func TestSessionSurvivesBrokenStreamAndResumes(t *testing.T) {
	h := newHarness(t, withFakeClock)
	k, first := h.openSession(t, "", 10*time.Second)
	id := first.GetSessionId()
	h.lock(t, &coordv1.LockRequest{Name: "job", SessionId: id})
	k.cancel() // the stream breaks without a half-close

	h.clock.Advance(9 * time.Second)
	if info := h.held(t, "job"); !info.GetHeld() {
		t.Fatal("lock lost 9s into a 10s session after a broken stream")
	}
	// Resume on a new stream, and keep the session alive past its first TTL.
	k2, resumed := h.openSession(t, id, 0)
	if resumed.GetSessionId() != id || resumed.GetTtl().AsDuration() != 10*time.Second || resumed.GetExpired() {
		t.Fatalf("resume = %v, want session %s renewed for 10s", resumed, id)
	}
	for i := 0; i < 3; i++ {
		h.clock.Advance(8 * time.Second)
		if r := k2.beat("", 0); r.GetExpired() || len(r.GetLostLocks()) != 0 {
			t.Fatalf("heartbeat %d = %v", i, r)
		}
	}
	if info := h.held(t, "job"); !info.GetHeld() || !info.GetSessionBound() {
		t.Fatalf("GetLock = %v, want still held by the resumed session", info)
	}
	// Break it again and let the TTL run out: the lock goes with it.
	k2.cancel()
	h.clock.Advance(10 * time.Second)
	if info := h.held(t, "job"); info.GetHeld() {
		t.Fatalf("GetLock after the session's TTL = %v, want free", info)
	}
	// Resuming now reports the expiry, and the lock lost with it, once.
	k3, err := h.sessions.KeepAlive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := k3.Send(&coordv1.KeepAliveRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	r, err := k3.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !r.GetExpired() || len(r.GetLostLocks()) != 1 || r.GetLostLocks()[0].GetName() != "job" ||
		r.GetLostLocks()[0].GetReason() != coordv1.LockLossReason_LOCK_LOSS_REASON_SESSION_EXPIRED ||
		r.GetLostLocks()[0].GetKind() != coordv1.HoldKind_HOLD_KIND_LOCK {
		t.Fatalf("resume after expiry = %v, want expired with job lost", r)
	}
	_, err = k3.Recv()
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
	// A keepalive never revives it: another resume gets the same report
	// again (reports are at least once: no later heartbeat on k3
	// acknowledged it), and the stream ends.
	k4, err := h.sessions.KeepAlive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := k4.Send(&coordv1.KeepAliveRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	if r, err := k4.Recv(); err != nil || !r.GetExpired() || len(r.GetLostLocks()) != 1 || r.GetLostLocks()[0].GetName() != "job" {
		t.Fatalf("second resume after expiry = %v, %v; want expired with job lost, again", r, err)
	}
	_, err = k4.Recv()
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
}

func TestSessionReportsLostLocks(t *testing.T) {
	h := newHarness(t, withFakeClock)
	k, first := h.openSession(t, "", 10*time.Second)
	id := first.GetSessionId()
	capped := h.lock(t, &coordv1.LockRequest{Name: "capped", SessionId: id, MaxHold: dur(5 * time.Second)})
	h.lock(t, &coordv1.LockRequest{Name: "kept", SessionId: id})
	released := h.lock(t, &coordv1.LockRequest{Name: "released", SessionId: id})
	if _, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: "released", Token: released.GetToken()}); err != nil {
		t.Fatal(err)
	}
	_, err := h.locks.Renew(ctx(t), &coordv1.RenewRequest{Name: "kept", Token: capped.GetToken(), Ttl: dur(time.Second)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_NOT_HELD")

	h.clock.Advance(4 * time.Second)
	if r := k.beat("", 0); len(r.GetLostLocks()) != 0 {
		t.Fatalf("heartbeat at 4s lost %v", r.GetLostLocks())
	}
	if info := h.held(t, "capped"); info.GetTtl().AsDuration() != time.Second {
		t.Fatalf("capped lock ttl = %v, want 1s left before max_hold", info.GetTtl().AsDuration())
	}
	h.clock.Advance(2 * time.Second)
	r := k.beat("", 0)
	if len(r.GetLostLocks()) != 1 || r.GetLostLocks()[0].GetName() != "capped" ||
		r.GetLostLocks()[0].GetReason() != coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD ||
		r.GetLostLocks()[0].GetFence() != capped.GetFence() ||
		r.GetLostLocks()[0].GetKind() != coordv1.HoldKind_HOLD_KIND_LOCK {
		t.Fatalf("heartbeat at 6s lost %v, want capped (max_hold) only; the released lock is not a loss", r.GetLostLocks())
	}
	// At least once: the answer to the next heartbeat repeats the report;
	// once that answer was sent, the report is acknowledged.
	if r := k.beat("", 0); len(r.GetLostLocks()) != 1 || r.GetLostLocks()[0].GetName() != "capped" {
		t.Fatalf("the heartbeat after the report lost %v, want capped again", r.GetLostLocks())
	}
	if r := k.beat("", 0); len(r.GetLostLocks()) != 0 {
		t.Fatalf("a loss was reported after a heartbeat's answer followed it: %v", r.GetLostLocks())
	}
	if info := h.held(t, "kept"); !info.GetHeld() {
		t.Fatal("kept lock lost")
	}
}

// TestSessionExpiryIsPushed: a client that stops sending heartbeats is told
// on the open stream that its session expired, without asking.
func TestSessionExpiryIsPushed(t *testing.T) {
	h := newHarness(t)
	k, first := h.openSession(t, "", 100*time.Millisecond)
	h.lock(t, &coordv1.LockRequest{Name: "pushed", SessionId: first.GetSessionId()})
	r, err := k.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !r.GetExpired() || len(r.GetLostLocks()) != 1 || r.GetLostLocks()[0].GetName() != "pushed" ||
		r.GetLostLocks()[0].GetKind() != coordv1.HoldKind_HOLD_KIND_LOCK {
		t.Fatalf("pushed response = %v, want expired with the lock lost", r)
	}
	_, err = k.stream.Recv()
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
	if info := h.held(t, "pushed"); info.GetHeld() {
		t.Fatal("lock outlived its session")
	}
}

// TestSessionReportsLostPermits: a semaphore permit bound to a session is
// reported on the stream when it reaches its max_hold, with kind
// HOLD_KIND_SEMAPHORE, at least once like a lock; a lock of the same name
// held by the same session is another hold, and is kept.
func TestSessionReportsLostPermits(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withFakeClock, withMetrics(&reg))
	c := ctx(t)
	k, first := h.openSession(t, "", 10*time.Second)
	id := first.GetSessionId()
	p := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 2, SessionId: id, MaxHold: dur(5 * time.Second)})
	if !p.GetAcquired() {
		t.Fatalf("Acquire = %v", p)
	}
	if g := h.lock(t, &coordv1.LockRequest{Name: "pool", SessionId: id}); !g.GetAcquired() {
		t.Fatalf("Lock(pool) = %v", g)
	}

	h.clock.Advance(4 * time.Second)
	if r := k.beat("", 0); len(r.GetLostLocks()) != 0 {
		t.Fatalf("heartbeat at 4s lost %v", r.GetLostLocks())
	}
	h.clock.Advance(2 * time.Second)
	r := k.beat("", 0)
	want := &coordv1.LostLock{Name: "pool", Fence: p.GetFence(),
		Reason: coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD, Kind: coordv1.HoldKind_HOLD_KIND_SEMAPHORE}
	if len(r.GetLostLocks()) != 1 || !proto.Equal(r.GetLostLocks()[0], want) {
		t.Fatalf("heartbeat at 6s lost %v, want only %v", r.GetLostLocks(), want)
	}
	if r := k.beat("", 0); len(r.GetLostLocks()) != 1 || !proto.Equal(r.GetLostLocks()[0], want) {
		t.Fatalf("the heartbeat after the report lost %v, want %v again", r.GetLostLocks(), want)
	}
	if r := k.beat("", 0); len(r.GetLostLocks()) != 0 {
		t.Fatalf("a loss was reported after a heartbeat's answer followed it: %v", r.GetLostLocks())
	}
	if g := h.getSemaphore(t, c, "pool"); len(g.GetHolders()) != 0 {
		t.Fatalf("GetSemaphore after max_hold = %v, want no holder", g)
	}
	if info := h.held(t, "pool"); !info.GetHeld() {
		t.Fatal("lock pool lost with the semaphore pool's permit")
	}
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"coordd_holds_lost_total", []string{"kind", "semaphore", "reason", "max_hold"}, 1}, // once, however often repeated
		{"coordd_holds_lost_total", []string{"kind", "lock", "reason", "max_hold"}, 0},
	} {
		if got := counterValue(t, reg, w.name, w.labels...); got != w.want {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
}

// TestSessionPushesLostPermit: a permit that reaches its max_hold is
// reported when it does, without waiting for a heartbeat, as a lock is.
func TestSessionPushesLostPermit(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	k, first := h.openSession(t, "", time.Minute)
	p := h.acquire(t, c, &coordv1.AcquireRequest{Name: "pool", Limit: 1, SessionId: first.GetSessionId(), MaxHold: dur(100 * time.Millisecond)})
	r, err := k.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r.GetExpired() || len(r.GetLostLocks()) != 1 || r.GetLostLocks()[0].GetName() != "pool" ||
		r.GetLostLocks()[0].GetKind() != coordv1.HoldKind_HOLD_KIND_SEMAPHORE || r.GetLostLocks()[0].GetFence() != p.GetFence() {
		t.Fatalf("pushed response = %v, want the permit lost (max_hold)", r)
	}
}

// TestSessionReportsLostLeadership: a leadership bound to a session that
// expires is reported with the expiry, with kind HOLD_KIND_ELECTION and the
// term's fence, and counted once.
func TestSessionReportsLostLeadership(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withFakeClock, withMetrics(&reg))
	c := ctx(t)
	k, first := h.openSession(t, "", 10*time.Second)
	id := first.GetSessionId()
	el := h.campaign(t, c, &coordv1.CampaignRequest{Name: "sched", Value: []byte("v"), SessionId: id})
	if !el.GetElected() {
		t.Fatalf("Campaign = %v", el)
	}
	k.cancel() // the stream breaks; the session lapses at its TTL
	// Its server side ends before the clock moves on, so that only the
	// resumes below see (and count) the loss.
	for end := time.Now().Add(5 * time.Second); gaugeValue(t, reg, "coordd_session_streams") != 0; {
		if time.Now().After(end) {
			t.Fatal("the broken stream still open on the server after 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.clock.Advance(11 * time.Second)
	if l := h.leader(t, c, "sched"); l.GetHasLeader() {
		t.Fatalf("Leader after the session's TTL = %v, want none", l)
	}
	want := &coordv1.LostLock{Name: "sched", Fence: el.GetFence(),
		Reason: coordv1.LockLossReason_LOCK_LOSS_REASON_SESSION_EXPIRED, Kind: coordv1.HoldKind_HOLD_KIND_ELECTION}
	for i := range 2 { // not acknowledged: a second resume gets it again
		ks, err := h.sessions.KeepAlive(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := ks.Send(&coordv1.KeepAliveRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
		r, err := ks.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !r.GetExpired() || len(r.GetLostLocks()) != 1 || !proto.Equal(r.GetLostLocks()[0], want) {
			t.Fatalf("resume %d after expiry = %v, want expired with %v", i+1, r, want)
		}
		_, err = ks.Recv()
		wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
	}
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"coordd_holds_lost_total", []string{"kind", "election", "reason", "session_expired"}, 2}, // once per stream
		{"coordd_holds_lost_total", []string{"kind", "lock", "reason", "session_expired"}, 0},
	} {
		if got := counterValue(t, reg, w.name, w.labels...); got != w.want {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
}

func TestSessionBoundLockRejectsRenew(t *testing.T) {
	h := newHarness(t)
	_, first := h.openSession(t, "", 10*time.Second)
	g := h.lock(t, &coordv1.LockRequest{Name: "bound", SessionId: first.GetSessionId()})
	_, err := h.locks.Renew(ctx(t), &coordv1.RenewRequest{Name: "bound", Token: g.GetToken(), Ttl: dur(time.Second)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_SESSION_BOUND")
}

func TestSessionStreamRejectsAnotherSessionID(t *testing.T) {
	h := newHarness(t)
	k, _ := h.openSession(t, "", 10*time.Second)
	_, other := h.openSession(t, "", 10*time.Second)
	if err := k.stream.Send(&coordv1.KeepAliveRequest{SessionId: other.GetSessionId()}); err != nil {
		t.Fatal(err)
	}
	_, err := k.stream.Recv()
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
}

// TestMaxSessionsRefusesOnlyNewSessions: at limits.max_sessions streams,
// a stream that would open a new session is refused OVERLOADED with a
// retry_after, while the open sessions keep heartbeating, keep their
// locks, and one whose stream broke is resumed on a new stream however
// full the instance is.
func TestMaxSessionsRefusesOnlyNewSessions(t *testing.T) {
	h := newHarness(t, withFakeClock, withLimits(server.Limits{MaxSessions: 2}))
	a, ra := h.openSession(t, "", 10*time.Second)
	b, rb := h.openSession(t, "", 10*time.Second)
	h.lock(t, &coordv1.LockRequest{Name: "a", SessionId: ra.GetSessionId()})
	h.lock(t, &coordv1.LockRequest{Name: "b", SessionId: rb.GetSessionId()})

	refused := func() {
		t.Helper()
		st := newSessionRefused(t, h)
		var retry string
		var info *errdetails.RetryInfo
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.ErrorInfo:
				retry = d.GetMetadata()["retry_after"]
			case *errdetails.RetryInfo:
				info = d
			}
		}
		if d, err := time.ParseDuration(retry); err != nil || d <= 0 || info.GetRetryDelay().AsDuration() != d {
			t.Fatalf("retry_after %q (%v), RetryInfo %v: want the same positive duration in both", retry, err, info)
		}
	}
	refused()
	for range 3 {
		h.clock.Advance(5 * time.Second)
		if r := a.beat("", 0); r.GetExpired() || len(r.GetLostLocks()) != 0 {
			t.Fatalf("a's heartbeat at capacity = %v", r)
		}
		if r := b.beat("", 0); r.GetExpired() || len(r.GetLostLocks()) != 0 {
			t.Fatalf("b's heartbeat at capacity = %v", r)
		}
		refused()
	}
	// b resumed on a third stream, while a's and b's are still open: it
	// opens no new session, so capacity does not refuse it (b's old
	// stream is superseded).
	_, resumed := h.openSession(t, rb.GetSessionId(), 0)
	if resumed.GetSessionId() != rb.GetSessionId() || resumed.GetExpired() {
		t.Fatalf("b's resume at capacity = %v", resumed)
	}
	b.cancel()
	for _, name := range []string{"a", "b"} {
		if info := h.held(t, name); !info.GetHeld() || !info.GetSessionBound() {
			t.Fatalf("GetLock(%s) after the overload = %v, want still held by its session", name, info)
		}
	}
}

// newSessionRefused opens a stream for a new session and checks that it
// is refused RESOURCE_EXHAUSTED OVERLOADED; it returns the status.
func newSessionRefused(t *testing.T, h *harness) *status.Status {
	t.Helper()
	s, err := h.sessions.KeepAlive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&coordv1.KeepAliveRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	return wantStatus(t, err, codes.ResourceExhausted, "OVERLOADED")
}

// TestMaxSessionsCountsAtTheFirstRequest: a stream opened at capacity
// that sends its first request after another stream ended is admitted:
// the room is counted when the session would open, not when the stream
// did.
func TestMaxSessionsCountsAtTheFirstRequest(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withFakeClock, withLimits(server.Limits{MaxSessions: 2}), withMetrics(&reg))
	a, _ := h.openSession(t, "", 10*time.Second)
	h.openSession(t, "", 10*time.Second)
	c, err := h.sessions.KeepAlive(ctx(t)) // a third stream, silent for now
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gaugeValue(t, reg, "coordd_session_streams") != 3 { // its handler runs: the instance is over capacity
		if time.Now().After(deadline) {
			t.Fatal("the third stream never reached the server")
		}
		time.Sleep(time.Millisecond)
	}
	// a half-closes; its end (io.EOF) comes after the server's handler
	// returned, so its stream is no longer counted.
	if err := a.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("a's end = %v, want io.EOF", err)
	}
	if err := c.Send(&coordv1.KeepAliveRequest{}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Recv(); err != nil || r.GetSessionId() == "" {
		t.Fatalf("the third stream's first heartbeat after a ended = %v, %v; want a new session", r, err)
	}
}

// TestSlowStoreShedsOnlyNewWork: while the store's latency is above
// limits.shed_store_latency, a new session, a call that would wait and a
// new Observe stream are refused OVERLOADED (counted as store_latency),
// while open sessions heartbeat and keep their locks and calls that do not
// wait are served; once the latency has decayed, a new session is
// admitted again.
func TestSlowStoreShedsOnlyNewWork(t *testing.T) {
	var reg *prometheus.Registry
	latency := server.NewStoreLatency(100 * time.Millisecond)
	h := newHarness(t, withMetrics(&reg), func(c *config) { c.latency = latency })
	a, ra := h.openSession(t, "", 10*time.Second)
	h.lock(t, &coordv1.LockRequest{Name: "a", SessionId: ra.GetSessionId()})

	latency.Observe(2 * time.Second) // the store answered that slowly
	newSessionRefused(t, h)
	_, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "a", Ttl: durationpb.New(time.Minute), Wait: durationpb.New(time.Second)})
	wantStatus(t, err, codes.ResourceExhausted, "OVERLOADED")
	obs, err := h.elections.Observe(ctx(t), &coordv1.ObserveRequest{Name: "e"})
	if err == nil {
		_, err = obs.Recv()
	}
	wantStatus(t, err, codes.ResourceExhausted, "OVERLOADED")
	if r := a.beat("", 0); r.GetExpired() || len(r.GetLostLocks()) != 0 {
		t.Fatalf("a's heartbeat while shedding = %v", r)
	}
	if g := h.lock(t, &coordv1.LockRequest{Name: "b", Ttl: durationpb.New(time.Minute)}); !g.GetAcquired() {
		t.Fatalf("a Lock that does not wait, while shedding = %v", g)
	}
	if info := h.held(t, "a"); !info.GetHeld() || !info.GetSessionBound() {
		t.Fatalf("GetLock(a) while shedding = %v, want still held by its session", info)
	}
	if n := counterValue(t, reg, "coordd_rejected_total", "reason", "store_latency"); n != 3 {
		t.Fatalf("coordd_rejected_total{reason=store_latency} = %v, want 3", n)
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		if latency.Average() <= 100*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store's average latency is still %v, 15s after the last slow call", latency.Average())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, r := h.openSession(t, "", 10*time.Second); r.GetSessionId() == "" {
		t.Fatalf("a new session once the latency decayed = %v", r)
	}
}

// TestOneGoroutinePerStream: an open KeepAlive stream between heartbeats
// costs the server one goroutine, its handler's, blocked receiving: the
// check at the session's expiry waits on a timer, a wake-up of its topic
// calls back, a drain or a revoked credential is followed by
// context.AfterFunc. The streams still answer heartbeats, are told of a
// bound lock's loss and end as before (the other session tests).
func TestOneGoroutinePerStream(t *testing.T) {
	h := newHarness(t)
	const n = 50
	streams := make([]*keepAlive, n)
	for i := range streams {
		streams[i], _ = h.openSession(t, "", 10*time.Second)
	}
	// The subscriptions made in the background after each open end their
	// goroutines within a few store round trips.
	var got int
	var stacks string
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, stacks = sessionGoroutines()
		if got <= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got > n {
		t.Fatalf("%d goroutines of the session code with %d streams open, want at most one each:\n%s", got, n, stacks)
	}
	for _, k := range streams {
		if resp := k.beat("", 0); resp.GetSessionId() == "" {
			t.Fatalf("heartbeat after the count = %v", resp)
		}
	}
}

// sessionGoroutines counts this process's goroutines that run the server's
// session code, and returns their stacks.
func sessionGoroutines() (int, string) {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var b strings.Builder
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "coordd/internal/session.") || strings.Contains(g, "coordd/internal/server.(*sessionServer)") {
			n++
			if n <= 3 {
				b.WriteString(g + "\n\n")
			}
		}
	}
	return n, b.String()
}
