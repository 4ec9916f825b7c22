package server_test

// The statuses that are not domain errors — a call cancelled or past its
// deadline, a message over the size limit — and the bearer scheme in
// another case, through real gRPC.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
)

// TestMessageTooLarge: a request over the server's message size limit is
// RESOURCE_EXHAUSTED, for a unary call and on a stream, and changes
// nothing. gRPC makes this status itself and sends it before coordd sees
// the error, so it has no ErrorInfo (errors.go, toStatus); the domain's
// own size limits, below it, are INVALID_ARGUMENT naming the field.
func TestMessageTooLarge(t *testing.T) {
	const max = 4096
	h := newHarness(t, func(c *config) { c.serverOpts = []grpc.ServerOption{grpc.MaxRecvMsgSize(max)} })
	big := []byte(strings.Repeat("x", 2*max))

	_, err := h.queues.Enqueue(ctx(t), &coordv1.EnqueueRequest{Queue: "q", Payload: big})
	wantStatus(t, err, codes.ResourceExhausted, "")
	if s, err := h.st.Stats(ctx(t), store.Scope("default", "q")); err != nil || s != (store.QueueStats{}) {
		t.Errorf("queue q after the refused Enqueue = %+v, %v; want empty", s, err)
	}
	// A request under the limit still works on the same connection.
	if _, err := h.queues.Enqueue(ctx(t), &coordv1.EnqueueRequest{Queue: "q", Payload: big[:max/2]}); err != nil {
		t.Fatalf("Enqueue under the limit: %v", err)
	}

	k, first, err := h.openAs(t, ctx(t), "", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.stream.Send(&coordv1.KeepAliveRequest{SessionId: string(big)}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	_, err = k.stream.Recv()
	wantStatus(t, err, codes.ResourceExhausted, "")
	// The broken stream left its session alive, as any broken stream does.
	k2, r, err := h.openAs(t, ctx(t), first.GetSessionId(), 0)
	if err != nil || r.GetSessionId() != first.GetSessionId() || r.GetExpired() {
		t.Fatalf("resuming the session after the over-size heartbeat = %v, %v", r, err)
	}
	k2.close()
}

// TestContextErrorsHaveErrorInfo: a call that ends because a store call
// was cancelled or ran out of time is CANCELLED or DEADLINE_EXCEEDED with
// the reason of the same name.
func TestContextErrorsHaveErrorInfo(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, func(c *config) {
		c.wrap = func(st store.Store) store.Store { f = storetest.NewFaulty(st); return f }
	})
	for _, tc := range []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{context.Canceled, codes.Canceled, "CANCELLED"},
		{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
	} {
		f.FailWith("GetHolds", fmt.Errorf("store GetLock: %w", tc.err))
		_, err := h.locks.GetLock(ctx(t), &coordv1.GetLockRequest{Name: "x"})
		wantStatus(t, err, tc.code, tc.reason)
	}
}

// TestBearerSchemeIsCaseInsensitive: the "Bearer" auth scheme is matched
// without regard to case (RFC 7235 §2.1), with one or more spaces before
// the key; a scheme glued to the key, or another scheme, is no bearer.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)))
	g, err := h.locks.Lock(as(t, keyA), &coordv1.LockRequest{Name: "a-lock", Ttl: dur(time.Minute), Owner: "a"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock = %v, %v", g, err)
	}
	with := func(v string) context.Context { return metadata.AppendToOutgoingContext(ctx(t), "authorization", v) }
	for _, v := range []string{"bearer " + keyA, "BEARER " + keyA, "bEaReR " + keyA, "Bearer   " + keyA, " Bearer " + keyA + " "} {
		info, err := h.locks.GetLock(with(v), &coordv1.GetLockRequest{Name: "a-lock"})
		if err != nil || !info.GetHeld() || info.GetOwner() != "a" {
			t.Errorf("GetLock with authorization %q = %v, %v; want A's lock", v, info, err)
		}
	}
	for _, v := range []string{"Bearer" + keyA, "Bearerx " + keyA, "Basic " + keyA, "bearer"} {
		_, err := h.locks.GetLock(with(v), &coordv1.GetLockRequest{Name: "a-lock"})
		wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	}
}
