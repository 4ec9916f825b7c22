package server_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/server"
)

func withLocal(l *server.Local) func(*config) { return func(c *config) { c.local = l } }

// TestLocalNamespaces: a Local conn works in its namespace only, as a gRPC
// caller of that namespace does; its queues are listed for it alone.
func TestLocalNamespaces(t *testing.T) {
	l := &server.Local{}
	h := newHarness(t, withLocal(l))
	a, b := coordv1.NewQueueServiceClient(l.Conn("team-a")), coordv1.NewQueueServiceClient(l.Conn("team-b"))
	if _, err := a.Enqueue(ctx(t), &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		q    coordv1.QueueServiceClient
		want int64
	}{{"team-a", a, 1}, {"team-b", b, 0}, {"default over gRPC", h.queues, 0}} {
		st, err := c.q.Stats(ctx(t), &coordv1.StatsRequest{Queue: "jobs"})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetReady() != c.want {
			t.Errorf("%s: ready %d, want %d", c.name, st.GetReady(), c.want)
		}
	}
	if got := l.Queues("team-a"); len(got) != 1 || got[0] != "jobs" {
		t.Errorf("Queues(team-a) = %v, want [jobs]", got)
	}
	if got := l.Queues("team-c"); len(got) != 0 {
		t.Errorf("Queues(team-c) = %v, want none", got)
	}
	// A lock taken in one namespace is invisible from another.
	locks := coordv1.NewLockServiceClient(l.Conn("team-a"))
	if g, err := locks.Lock(ctx(t), &coordv1.LockRequest{Name: "m", Ttl: dur(time.Minute), Owner: "o"}); err != nil || !g.GetAcquired() {
		t.Fatalf("Lock = %v, %v", g, err)
	}
	info, err := coordv1.NewLockServiceClient(l.Conn("team-b")).GetLock(ctx(t), &coordv1.GetLockRequest{Name: "m"})
	if err != nil || info.GetHeld() {
		t.Errorf("GetLock from team-b = %v, %v; want not held", info, err)
	}
}

// TestLocalErrors: bad input is the API's INVALID_ARGUMENT naming the
// field; a stream is Unimplemented; an unknown method too.
func TestLocalErrors(t *testing.T) {
	l := &server.Local{}
	newHarness(t, withLocal(l))
	_, err := coordv1.NewLockServiceClient(l.Conn("default")).Lock(ctx(t), &coordv1.LockRequest{Name: "", Ttl: dur(time.Minute)})
	st := wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	if !strings.HasPrefix(st.Message(), "name") {
		t.Errorf("message %q does not name the field", st.Message())
	}
	_, err = coordv1.NewQueueServiceClient(l.Conn("default")).Claim(ctx(t), &coordv1.ClaimRequest{Queue: "q", MaxMessages: 1, Wait: dur(-time.Second)})
	st = wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	if !strings.HasPrefix(st.Message(), "wait") {
		t.Errorf("message %q does not name the field", st.Message())
	}
	if _, err := coordv1.NewSessionServiceClient(l.Conn("default")).KeepAlive(ctx(t)); status.Code(err) != codes.Unimplemented {
		t.Errorf("KeepAlive: %v, want Unimplemented", err)
	}
	if err := l.Conn("default").Invoke(ctx(t), "/coord.v1.LockService/Nope", &coordv1.GetLockRequest{}, &coordv1.GetLockResponse{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: %v, want Unimplemented", err)
	}
}

// TestLocalPanic: a panic in a handler called locally is the API's
// INTERNAL with nothing of the panic, and the next call works.
func TestLocalPanic(t *testing.T) {
	var p *panicky
	l := &server.Local{}
	newHarness(t, withPanicky(&p), withLocal(l))
	p.getLock.Store(1)
	locks := coordv1.NewLockServiceClient(l.Conn("default"))
	_, err := locks.GetLock(ctx(t), &coordv1.GetLockRequest{Name: "x"})
	st := wantStatus(t, err, codes.Internal, "INTERNAL")
	if strings.Contains(st.Message(), "hunter2") {
		t.Errorf("the panic reached the caller: %q", st.Message())
	}
	if _, err := locks.GetLock(ctx(t), &coordv1.GetLockRequest{Name: "x"}); err != nil {
		t.Errorf("GetLock after the panic: %v", err)
	}
}

// TestNamespaceOfKey: the console's key check is the gRPC API's: each key
// its namespace, an unknown or empty key UNAUTHENTICATED, a revoked key
// refused at once; with auth off, everything is the default namespace.
func TestNamespaceOfKey(t *testing.T) {
	a := twoTenants(t)
	for key, want := range map[string]string{keyA: nsA, keyB: nsB} {
		if ns, err := a.NamespaceOfKey(key); err != nil || ns != want {
			t.Errorf("NamespaceOfKey = %q, %v; want %q", ns, err, want)
		}
	}
	for _, key := range []string{"", "not-a-key-of-anyone-at-all"} {
		_, err := a.NamespaceOfKey(key)
		wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	}
	if err := a.Set(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{{Namespace: nsB, Key: keyB}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NamespaceOfKey(keyA); err == nil {
		t.Error("a revoked key still gives its namespace")
	}
	off, err := server.NewAuthenticator(server.AuthConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range []*server.Authenticator{nil, off} {
		if ns, err := auth.NamespaceOfKey(""); err != nil || ns != server.DefaultNamespace {
			t.Errorf("auth off: %q, %v", ns, err)
		}
	}
}
