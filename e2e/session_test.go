package e2e

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// sessionTTL is short so that the tests can outlive it.
const sessionTTL = 2 * time.Second

// keepAlive is a client's KeepAlive stream on one instance.
type keepAlive struct {
	t      *testing.T
	on     *instance
	stream coordv1.SessionService_KeepAliveClient
	cancel context.CancelFunc // breaks the stream without a half-close
}

// openSession opens a KeepAlive stream on in and sends its first request:
// id "" creates a session, another resumes that one.
func openSession(t *testing.T, ctx context.Context, in *instance, id string) (*keepAlive, *coordv1.KeepAliveResponse) {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	stream, err := in.sessions.KeepAlive(sctx)
	if err != nil {
		t.Fatalf("KeepAlive on %s: %v", in.Name, err)
	}
	k := &keepAlive{t: t, on: in, stream: stream, cancel: cancel}
	return k, k.beat(id)
}

// beat sends one heartbeat with ttl sessionTTL and returns the response.
func (k *keepAlive) beat(id string) *coordv1.KeepAliveResponse {
	k.t.Helper()
	if err := k.stream.Send(&coordv1.KeepAliveRequest{SessionId: id, Ttl: durationpb.New(sessionTTL)}); err != nil {
		k.t.Fatalf("KeepAlive Send on %s: %v", k.on.Name, err)
	}
	resp, err := k.stream.Recv()
	if err != nil {
		k.t.Fatalf("KeepAlive Recv on %s: %v", k.on.Name, err)
	}
	if resp.GetExpired() || len(resp.GetLostLocks()) != 0 {
		k.t.Fatalf("heartbeat on %s: %v; want the session alive with no lost lock", k.on.Name, resp)
	}
	return resp
}

// wantHeld checks GetLock on in: name held by session id with fence.
func wantHeld(t *testing.T, ctx context.Context, in *instance, name, id string, fence uint64) {
	t.Helper()
	got, err := in.locks.GetLock(ctx, &coordv1.GetLockRequest{Name: name})
	if err != nil {
		t.Fatalf("GetLock(%s) on %s: %v", name, in.Name, err)
	}
	if !got.GetHeld() || !got.GetSessionBound() || got.GetFence() != fence || got.GetTtl().AsDuration() <= 0 {
		t.Fatalf("GetLock(%s) on %s = held %v, session-bound %v, fence %d, ttl %v; want held by session %s with fence %d",
			name, in.Name, got.GetHeld(), got.GetSessionBound(), got.GetFence(), got.GetTtl().AsDuration(), id, fence)
	}
}

// wantFree checks GetLock on in: name not held.
func wantFree(t *testing.T, ctx context.Context, in *instance, name string) {
	t.Helper()
	got, err := in.locks.GetLock(ctx, &coordv1.GetLockRequest{Name: name})
	if err != nil {
		t.Fatalf("GetLock(%s) on %s: %v", name, in.Name, err)
	}
	if got.GetHeld() {
		t.Fatalf("GetLock(%s) on %s = held by %q, session-bound %v, fence %d, ttl %v; want free",
			name, in.Name, got.GetOwner(), got.GetSessionBound(), got.GetFence(), got.GetTtl().AsDuration())
	}
}

// wantSessionNotFound checks that a Lock on in naming session id is
// FAILED_PRECONDITION reason SESSION_NOT_FOUND.
func wantSessionNotFound(t *testing.T, ctx context.Context, in *instance, name, id string) {
	t.Helper()
	got, err := in.locks.Lock(ctx, &coordv1.LockRequest{Name: name, SessionId: id, Owner: "late"})
	if status.Code(err) != codes.FailedPrecondition || errorReason(err) != "SESSION_NOT_FOUND" {
		t.Fatalf("Lock(%s, session %s) on %s = %v, %v (reason %q); want FAILED_PRECONDITION SESSION_NOT_FOUND",
			name, id, in.Name, got, err, errorReason(err))
	}
}

// TestSessionAcrossInstances holds sessions' streams on one instance and
// their locks through the other.
func TestSessionAcrossInstances(t *testing.T) {
	a, b := startPair(t)
	ctx := testContext(t, 45*time.Second)

	// A Lock on B binds to a session whose stream is on A; A's heartbeats
	// keep it; A's half-close releases it at once, as B sees.
	t.Run("HalfCloseOnA", func(t *testing.T) {
		k, first := openSession(t, ctx, a, "")
		id := first.GetSessionId()
		if id == "" || first.GetTtl().AsDuration() != sessionTTL {
			t.Fatalf("first KeepAlive response on A = %v; want a session id and ttl %v", first, sessionTTL)
		}
		opened := time.Now()

		g, err := b.locks.Lock(ctx, &coordv1.LockRequest{Name: "bound", SessionId: id, Owner: "e2e"})
		if err != nil || !g.GetAcquired() || g.GetFence() == 0 {
			t.Fatalf("Lock(bound, session %s) on B = %v, %v; want acquired", id, g, err)
		}
		got, err := b.locks.GetLock(ctx, &coordv1.GetLockRequest{Name: "bound"})
		if err != nil || !got.GetHeld() || !got.GetSessionBound() || got.GetOwner() != "e2e" || got.GetFence() != g.GetFence() {
			t.Fatalf("GetLock(bound) on B = %v, %v; want held by e2e in session %s with fence %d", got, err, id, g.GetFence())
		}

		// Heartbeats on A for 5s keep a 2s session, and its lock, alive.
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for time.Since(opened) < 5*time.Second {
			<-tick.C
			if r := k.beat(""); r.GetSessionId() != id || r.GetTtl().AsDuration() <= 0 || r.GetTtl().AsDuration() > sessionTTL {
				t.Fatalf("heartbeat on A = %v; want session %s with a ttl up to %v", r, id, sessionTTL)
			}
			wantHeld(t, ctx, b, "bound", id, g.GetFence())
		}
		t.Logf("session %s and its lock alive on B %v after opening on A (ttl %v)", id, time.Since(opened).Round(time.Millisecond), sessionTTL)

		// Half-close on A: the session ends, and B sees the lock free at once.
		if err := k.stream.CloseSend(); err != nil {
			t.Fatalf("CloseSend on A: %v", err)
		}
		if r, err := k.stream.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("KeepAlive Recv on A after CloseSend = %v, %v; want io.EOF", r, err)
		}
		wantFree(t, ctx, b, "bound")
		wantSessionNotFound(t, ctx, b, "bound", id)
	})

	// A stream broken on A is resumed on B, which keeps A's lock until the
	// session expires, and then reports the lock lost.
	t.Run("BrokenOnAResumedOnB", func(t *testing.T) {
		ka, first := openSession(t, ctx, a, "")
		id := first.GetSessionId()
		g, err := a.locks.Lock(ctx, &coordv1.LockRequest{Name: "resumed", SessionId: id, Owner: "e2e"})
		if err != nil || !g.GetAcquired() {
			t.Fatalf("Lock(resumed, session %s) on A = %v, %v; want acquired", id, g, err)
		}

		ka.cancel() // no half-close
		if r, err := ka.stream.Recv(); status.Code(err) != codes.Canceled {
			t.Fatalf("KeepAlive Recv on A after cancel = %v, %v; want CANCELED", r, err)
		}
		time.Sleep(200 * time.Millisecond) // A sees the break; it must not end the session
		wantHeld(t, ctx, b, "resumed", id, g.GetFence())

		kb, resumed := openSession(t, ctx, b, id)
		if resumed.GetSessionId() != id || resumed.GetTtl().AsDuration() <= 0 {
			t.Fatalf("resuming session %s on B = %v; want it alive", id, resumed)
		}
		wantHeld(t, ctx, a, "resumed", id, g.GetFence())
		wantHeld(t, ctx, b, "resumed", id, g.GetFence())

		// B's heartbeats keep A's lock past the session's TTL.
		for range 5 {
			time.Sleep(500 * time.Millisecond)
			kb.beat("")
		}
		wantHeld(t, ctx, a, "resumed", id, g.GetFence())

		// No more heartbeats: B reports the session expired and the lock lost.
		silent := time.Now()
		var last *coordv1.KeepAliveResponse
		for {
			r, err := kb.stream.Recv()
			if err != nil {
				t.Fatalf("KeepAlive Recv on B %v after the last heartbeat: %v; want a response with expired=true first",
					time.Since(silent).Round(time.Millisecond), err)
			}
			if r.GetExpired() {
				last = r
				break
			}
			if len(r.GetLostLocks()) != 0 {
				t.Fatalf("KeepAlive response on B before expiry = %v; want no lost lock yet", r)
			}
		}
		after := time.Since(silent)
		t.Logf("B reported session %s expired %v after its last heartbeat (ttl %v): %v", id, after.Round(time.Millisecond), sessionTTL, last)
		if after < sessionTTL-100*time.Millisecond || after > sessionTTL+2*time.Second {
			t.Errorf("expiry reported %v after the last heartbeat; want about the ttl, %v", after, sessionTTL)
		}
		lost := last.GetLostLocks()
		if last.GetSessionId() != id || len(lost) != 1 || lost[0].GetName() != "resumed" ||
			lost[0].GetReason() != coordv1.LockLossReason_LOCK_LOSS_REASON_SESSION_EXPIRED || lost[0].GetFence() != g.GetFence() {
			t.Errorf("expiry response on B = %v; want session %s losing resumed (SESSION_EXPIRED, fence %d)", last, id, g.GetFence())
		}
		_, err = kb.stream.Recv()
		if status.Code(err) != codes.FailedPrecondition || errorReason(err) != "SESSION_NOT_FOUND" {
			t.Errorf("KeepAlive stream on B after the expiry response ended with %v (reason %q); want FAILED_PRECONDITION SESSION_NOT_FOUND",
				err, errorReason(err))
		}
		wantFree(t, ctx, a, "resumed")
		wantSessionNotFound(t, ctx, a, "resumed", id)
	})
}
