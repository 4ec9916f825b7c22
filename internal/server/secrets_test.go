package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/store/storetest"
)

// The tests of sessions' secrets and reports, through the gRPC API: a session
// ID never leaves its stream, a resume supersedes the old stream, loss
// reports are at least once and pushed when they happen, and a session that
// asks again for its own lock is answered at once.

// TestGetLockHidesTheSessionID: GetLock says a lock is session-bound but
// never names the session, whose ID is a bearer capability; neither does a
// contended Lock, nor any log line. (Before, GetLock returned session_id:
// anyone in the namespace could resume and half-close the victim's session.)
func TestGetLockHidesTheSessionID(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, withLog(&logs))
	_, first := h.openSession(t, "", 10*time.Second)
	id := first.GetSessionId()
	h.lock(t, &coordv1.LockRequest{Name: "secret", SessionId: id, Owner: "victim"})
	info := h.held(t, "secret")
	if !info.GetHeld() || !info.GetSessionBound() || info.GetOwner() != "victim" {
		t.Fatalf("GetLock = %v, want held by victim, session-bound", info)
	}
	contended, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "secret", Ttl: dur(time.Second)})
	if err != nil || contended.GetAcquired() {
		t.Fatalf("contended Lock = %v, %v", contended, err)
	}
	for _, m := range []proto.Message{info, contended} {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(id)) {
			t.Errorf("%T carries the holder's session ID", m)
		}
	}
	if bytes.Contains([]byte(logs.String()), []byte(id)) {
		t.Errorf("the log contains the session ID:\n%s", logs.String())
	}
}

// TestResumeSupersedesTheOldStream: a resume on a new stream supersedes the
// old one: it gets a final superseded response at once and ends
// SESSION_SUPERSEDED; its half-close does not end the session. (Before, the
// old stream went on renewing, and its half-close released the locks.)
func TestResumeSupersedesTheOldStream(t *testing.T) {
	h := newHarness(t)
	k1, first := h.openSession(t, "", 10*time.Second)
	id := first.GetSessionId()
	h.lock(t, &coordv1.LockRequest{Name: "a", SessionId: id})

	k2, resumed := h.openSession(t, id, 0)
	if resumed.GetSessionId() != id || resumed.GetSuperseded() {
		t.Fatalf("resume = %v", resumed)
	}
	// The old stream is told at once, without a heartbeat of its own.
	if r, err := k1.stream.Recv(); err != nil || !r.GetSuperseded() || r.GetSessionId() != "" {
		t.Fatalf("the superseded stream got %v, %v; want a final superseded response", r, err)
	}
	_, err := k1.stream.Recv()
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_SUPERSEDED")

	// A stream superseded before it does anything: its half-close changes
	// nothing.
	k3, _ := h.openSession(t, id, 0)
	if err := k2.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if r, err := k2.stream.Recv(); err != nil || !r.GetSuperseded() {
		t.Fatalf("half-close of a superseded stream = %v, %v; want a superseded response", r, err)
	}
	_, err = k2.stream.Recv()
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_SUPERSEDED")
	if info := h.held(t, "a"); !info.GetHeld() {
		t.Fatal("the superseded stream's half-close released the session's lock")
	}
	if r := k3.beat("", 0); r.GetSessionId() != id || r.GetExpired() || r.GetSuperseded() {
		t.Fatalf("heartbeat on the current stream = %v", r)
	}
	// The current stream still ends the session.
	if err := k3.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := k3.stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the half-close: %v, want io.EOF", err)
	}
	if info := h.held(t, "a"); info.GetHeld() {
		t.Fatal("the current stream's half-close left the lock held")
	}
}

// TestMaxHoldIsPushedWhenItHappens: a lock that reaches its max_hold is
// reported on the stream at once, not at the next heartbeat. (Before, the
// report waited for a heartbeat, up to ttl/3 later, or here the expiry.)
func TestMaxHoldIsPushedWhenItHappens(t *testing.T) {
	h := newHarness(t)
	k, first := h.openSession(t, "", 30*time.Second)
	g := h.lock(t, &coordv1.LockRequest{Name: "capped", SessionId: first.GetSessionId(), MaxHold: dur(200 * time.Millisecond)})
	start := time.Now()
	got := make(chan *coordv1.KeepAliveResponse, 1)
	go func() {
		r, err := k.stream.Recv()
		if err == nil {
			got <- r
		}
	}()
	select {
	case r := <-got:
		lost := r.GetLostLocks()
		if len(lost) != 1 || lost[0].GetName() != "capped" || lost[0].GetFence() != g.GetFence() ||
			lost[0].GetReason() != coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD {
			t.Fatalf("pushed response = %v, want capped lost (max hold)", r)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("pushed after %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no report 5s after the lock's max_hold, with a 30s session and no heartbeat")
	}
}

// TestLossReportSurvivesALostStoreReply: the keepalive whose store call
// found the loss lost its reply; the report is not gone with it: the
// stream that resumes the session gets it, and keeps getting it until a
// later heartbeat acknowledges it. (Before, the store forgot the loss as it
// reported it: every later heartbeat said lost_locks: [] while the lock was
// gone.)
func TestLossReportSurvivesALostStoreReply(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withFaulty(&f), withFakeClock)
	k, first := h.openSession(t, "", 10*time.Second)
	id := first.GetSessionId()
	g := h.lock(t, &coordv1.LockRequest{Name: "capped", SessionId: id, MaxHold: dur(5 * time.Second)})
	h.clock.Advance(6 * time.Second)
	f.Set("KeepAliveSession", storetest.Fault{FailAfter: true})
	if err := k.stream.Send(&coordv1.KeepAliveRequest{}); err != nil {
		t.Fatal(err)
	}
	// A report the stream pushed meanwhile (the binding's wake-up makes it
	// look) may come first; the heartbeat's answer is the failure.
	var err error
	for err == nil {
		_, err = k.stream.Recv()
	}
	wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
	f.Clear()

	wantCapped := func(what string, r *coordv1.KeepAliveResponse) {
		t.Helper()
		lost := r.GetLostLocks()
		if len(lost) != 1 || lost[0].GetName() != "capped" || lost[0].GetFence() != g.GetFence() {
			t.Fatalf("%s = %v, want capped reported", what, r)
		}
	}
	k2, resumed := h.openSession(t, id, 0)
	wantCapped("resume after the lost reply", resumed)
	// The resume's response may not have reached the client: a third stream
	// gets the report again.
	k2.cancel()
	k3, again := h.openSession(t, id, 0)
	wantCapped("second resume", again)
	wantCapped("the heartbeat after the resume", k3.beat("", 0))
	if r := k3.beat("", 0); len(r.GetLostLocks()) != 0 {
		t.Fatalf("a heartbeat after another was answered after the report = %v, want it acknowledged", r)
	}
}

// TestLockAgainInItsSessionAnswersAtOnce: a session that asks, with wait,
// for a lock it already holds gets its existing grant (already_held, the
// same token and fence) at once instead of waiting for itself; it is how a
// client whose Lock answer was lost finds its token. (Before, it waited the
// whole wait, for itself, and was told the lock was held.)
func TestLockAgainInItsSessionAnswersAtOnce(t *testing.T) {
	h := newHarness(t)
	_, first := h.openSession(t, "", 30*time.Second)
	id := first.GetSessionId()
	g := h.lock(t, &coordv1.LockRequest{Name: "mine", SessionId: id})
	c, cancel := context.WithTimeout(ctx(t), 5*time.Second)
	defer cancel()
	start := time.Now()
	again, err := h.locks.Lock(c, &coordv1.LockRequest{Name: "mine", SessionId: id, Wait: dur(20 * time.Second)})
	if err != nil || !again.GetAcquired() || !again.GetAlreadyHeld() || again.GetToken() != g.GetToken() || again.GetFence() != g.GetFence() {
		t.Fatalf("Lock again by its session = %v, %v; want its grant %v, already held", again, err, g)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %v, want at once", d)
	}
	// Another session still waits, and is told who holds it.
	_, other := h.openSession(t, "", 30*time.Second)
	r, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "mine", SessionId: other.GetSessionId(), Wait: dur(50 * time.Millisecond)})
	if err != nil || r.GetAcquired() || r.GetAlreadyHeld() || r.GetToken() != "" {
		t.Fatalf("Lock by another session = %v, %v; want not acquired", r, err)
	}
}

// TestSessionCloseCountsHoldTime: the locks a half-close releases are
// counted in coordd_hold_duration_seconds with how long they were held, like
// released ones. (Before, they were counted with a hold of 0.)
func TestSessionCloseCountsHoldTime(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withMetrics(&reg))
	k, first := h.openSession(t, "", 30*time.Second)
	h.lock(t, &coordv1.LockRequest{Name: "a", SessionId: first.GetSessionId()})
	h.lock(t, &coordv1.LockRequest{Name: "b", SessionId: first.GetSessionId()})
	time.Sleep(200 * time.Millisecond)
	if err := k.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the half-close: %v, want io.EOF", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "coordd_hold_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelOf(m, "kind") != "lock" {
				continue
			}
			hist := m.GetHistogram()
			if hist.GetSampleCount() != 2 || hist.GetSampleSum() < 0.4 {
				t.Fatalf("coordd_hold_duration_seconds{lock} count %d sum %v; want 2 locks held 0.2s or more each", hist.GetSampleCount(), hist.GetSampleSum())
			}
			return
		}
	}
	t.Fatal(`no coordd_hold_duration_seconds{kind="lock"}`)
}
