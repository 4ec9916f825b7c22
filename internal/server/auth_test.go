package server_test

// Authentication, namespace isolation and the limits against abuse, through
// real gRPC: every call carries "authorization: Bearer <key>" as a client
// would send it.

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
)

const (
	nsA  = "tenant-a"
	nsB  = "tenant-b"
	keyA = "key-of-tenant-a-0123456789"
	keyB = "key-of-tenant-b-0123456789"
)

// twoTenants is an Authenticator with auth on and a key for each of nsA and
// nsB.
func twoTenants(t testing.TB) *server.Authenticator {
	t.Helper()
	a, err := server.NewAuthenticator(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{
		{Namespace: nsA, Key: keyA},
		{Namespace: nsB, Key: keyB},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func withAuth(a *server.Authenticator) func(*config) { return func(c *config) { c.auth = a } }

func withLimits(l server.Limits) func(*config) { return func(c *config) { c.limits = l } }

// withMetrics wires domain metrics on a fresh registry, returned in *reg.
func withMetrics(reg **prometheus.Registry) func(*config) {
	return func(c *config) {
		*reg = prometheus.NewRegistry()
		c.metrics = metrics.New(*reg)
	}
}

// as returns a context whose calls carry key as a bearer API key.
func as(t testing.TB, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer "+key)
}

// openAs opens a KeepAlive stream with ctx c and sends a first heartbeat.
// It returns the stream and the answer or the stream's error.
func (h *harness) openAs(t testing.TB, c context.Context, id string, ttl time.Duration) (*keepAlive, *coordv1.KeepAliveResponse, error) {
	t.Helper()
	c, cancel := context.WithCancel(c)
	t.Cleanup(cancel)
	stream, err := h.sessions.KeepAlive(c)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	k := &keepAlive{t: t, stream: stream, cancel: cancel}
	req := &coordv1.KeepAliveRequest{SessionId: id}
	if ttl > 0 {
		req.Ttl = dur(ttl)
	}
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return k, nil, err
	}
	resp, err := stream.Recv()
	return k, resp, err
}

// close half-closes the stream and waits for its end.
func (k *keepAlive) close() {
	k.t.Helper()
	if err := k.stream.CloseSend(); err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.stream.Recv(); !errors.Is(err, io.EOF) {
		k.t.Fatalf("KeepAlive after half-close: %v, want EOF", err)
	}
	k.cancel()
}

// TestAuthRefusesCallsWithoutValidKey: with auth on, a call of any service
// without a key, or with a key nobody configured, is UNAUTHENTICATED with
// reason UNAUTHENTICATED, and counted; health and reflection need no key.
func TestAuthRefusesCallsWithoutValidKey(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withAuth(twoTenants(t)), withMetrics(&reg))

	calls := []struct {
		name string
		call func(c context.Context) error
	}{
		{"Lock", func(c context.Context) error {
			_, err := h.locks.Lock(c, &coordv1.LockRequest{Name: "x", Ttl: dur(time.Minute)})
			return err
		}},
		{"GetLock", func(c context.Context) error {
			_, err := h.locks.GetLock(c, &coordv1.GetLockRequest{Name: "x"})
			return err
		}},
		{"Allow", func(c context.Context) error {
			_, err := h.limits.Allow(c, &coordv1.AllowRequest{Key: "k", Limit: inline(coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, 1, time.Minute, 0)})
			return err
		}},
		{"BeginIdempotent", func(c context.Context) error {
			_, err := h.idem.BeginIdempotent(c, &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "f"})
			return err
		}},
		{"Enqueue", func(c context.Context) error {
			_, err := h.queues.Enqueue(c, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("p")})
			return err
		}},
		{"Claim/wait", func(c context.Context) error {
			_, err := h.queues.Claim(c, &coordv1.ClaimRequest{Queue: "q", Wait: dur(5 * time.Second)})
			return err
		}},
		{"KeepAlive", func(c context.Context) error {
			_, _, err := h.openAs(t, c, "", time.Minute)
			return err
		}},
		{"CheckFence", func(c context.Context) error {
			_, err := h.locks.CheckFence(c, &coordv1.CheckFenceRequest{Name: "x", Fence: 1})
			return err
		}},
		{"Acquire/wait", func(c context.Context) error {
			_, err := h.semaphores.Acquire(c, &coordv1.AcquireRequest{Name: "x", Limit: 1, Ttl: dur(time.Minute), Wait: dur(5 * time.Second)})
			return err
		}},
		{"Leader", func(c context.Context) error {
			_, err := h.elections.Leader(c, &coordv1.LeaderRequest{Name: "x"})
			return err
		}},
		{"Observe", func(c context.Context) error {
			o, err := h.elections.Observe(c, &coordv1.ObserveRequest{Name: "x"})
			if err != nil {
				return err
			}
			_, err = o.Recv()
			return err
		}},
	}
	contexts := []struct {
		name string
		ctx  func() context.Context
	}{
		{"no key", func() context.Context { return ctx(t) }},
		{"unknown key", func() context.Context { return as(t, "key-of-nobody-0123456789") }},
		{"empty bearer", func() context.Context {
			return metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer ")
		}},
		{"not a bearer", func() context.Context {
			return metadata.AppendToOutgoingContext(ctx(t), "authorization", "Basic "+keyA)
		}},
		{"key in another header", func() context.Context {
			return metadata.AppendToOutgoingContext(ctx(t), "x-api-key", keyA)
		}},
	}
	refused := 0
	for _, c := range contexts {
		for _, call := range calls {
			t.Run(c.name+"/"+call.name, func(t *testing.T) {
				start := time.Now()
				err := call.call(c.ctx())
				wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
				if took := time.Since(start); took > 2*time.Second {
					t.Errorf("refused after %v; a refused waiting call must not wait", took)
				}
			})
			refused++
		}
	}
	if got := counterValue(t, reg, "coordd_auth_failures_total", "reason", "UNAUTHENTICATED"); got != float64(refused) {
		t.Errorf("coordd_auth_failures_total{reason=UNAUTHENTICATED} = %v, want %d", got, refused)
	}

	// Nothing a refused call asked for happened, in any namespace.
	for _, ns := range []string{server.DefaultNamespace, nsA, nsB} {
		if s, err := h.st.GetHolds(ctx(t), store.HoldSemaphore, store.Scope(ns, "x")); err != nil || len(s.Holders) != 0 || s.Waiters != 0 {
			t.Errorf("store semaphore %s:x = %+v, %v; want empty", ns, s, err)
		}
	}
	for _, key := range []string{keyA, keyB} {
		info, err := h.locks.GetLock(as(t, key), &coordv1.GetLockRequest{Name: "x"})
		if err != nil || info.GetHeld() {
			t.Errorf("GetLock(x) with a valid key = %v, %v; want free: refused calls must change nothing", info, err)
		}
	}
	// The default namespace (auth off) is not where refused calls went either.
	for _, ns := range []string{server.DefaultNamespace, nsA, nsB} {
		if l, err := h.st.GetHolds(ctx(t), store.HoldLock, store.Scope(ns, "x")); err != nil || l.Held {
			t.Errorf("store lock %s:x = %+v, %v; want free", ns, l, err)
		}
		if s, err := h.st.Stats(ctx(t), store.Scope(ns, "q")); err != nil || s != (store.QueueStats{}) {
			t.Errorf("store queue %s:q = %+v, %v; want empty", ns, s, err)
		}
	}

	t.Run("health without key", func(t *testing.T) {
		resp, err := healthpb.NewHealthClient(h.conn).Check(ctx(t), &healthpb.HealthCheckRequest{Service: "coord.v1.LockService"})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health Check without a key = %v, %v; want SERVING", resp, err)
		}
		// An invalid key does not break health either.
		resp, err = healthpb.NewHealthClient(h.conn).Check(as(t, "key-of-nobody-0123456789"), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health Check with an unknown key = %v, %v; want SERVING", resp, err)
		}
	})
	t.Run("reflection without key", func(t *testing.T) {
		stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
		}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("reflection without a key: %v", err)
		}
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		if !strings.Contains(strings.Join(names, ","), "coord.v1.LockService") {
			t.Errorf("reflection lists %v, want coord.v1.LockService among them", names)
		}
		_ = stream.CloseSend()
		if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
			t.Errorf("reflection after CloseSend: %v, want EOF", err)
		}
	})
	t.Run("valid key", func(t *testing.T) {
		if _, err := h.locks.GetLock(as(t, keyA), &coordv1.GetLockRequest{Name: "x"}); err != nil {
			t.Fatalf("GetLock with a valid key: %v", err)
		}
	})
}

// TestAuthIsolatesLocks: a key of namespace A cannot see, release or renew
// namespace B's lock, even with B's name and token.
func TestAuthIsolatesLocks(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)))
	a, b := as(t, keyA), as(t, keyB)

	gb, err := h.locks.Lock(b, &coordv1.LockRequest{Name: "shared", Ttl: dur(time.Minute), Owner: "owner-b"})
	if err != nil || !gb.GetAcquired() {
		t.Fatalf("B: Lock(shared) = %v, %v", gb, err)
	}

	info, err := h.locks.GetLock(a, &coordv1.GetLockRequest{Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetHeld() || info.GetOwner() != "" || info.GetFence() != 0 {
		t.Errorf("A: GetLock(shared) = %v; want it free (B's lock is invisible to A)", info)
	}

	rel, err := h.locks.Release(a, &coordv1.ReleaseRequest{Name: "shared", Token: gb.GetToken()})
	if err != nil || rel.GetReleased() {
		t.Errorf("A: Release(shared, B's token) = %v, %v; want released=false", rel, err)
	}

	_, err = h.locks.Renew(a, &coordv1.RenewRequest{Name: "shared", Token: gb.GetToken(), Ttl: dur(time.Hour)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_NOT_HELD")

	info, err = h.locks.GetLock(b, &coordv1.GetLockRequest{Name: "shared"})
	if err != nil || !info.GetHeld() || info.GetOwner() != "owner-b" || info.GetFence() != gb.GetFence() {
		t.Fatalf("B: GetLock(shared) = %v, %v; want still held by owner-b with fence %d", info, err, gb.GetFence())
	}
	if ttl := info.GetTtl().AsDuration(); ttl > time.Minute {
		t.Errorf("B's lock has ttl %v after A's Renew with its token; want at most its own 1m", ttl)
	}

	// A's "shared" is another lock: A gets it at once, B keeps its own.
	ga, err := h.locks.Lock(a, &coordv1.LockRequest{Name: "shared", Ttl: dur(time.Minute), Owner: "owner-a"})
	if err != nil || !ga.GetAcquired() || ga.GetHolder() != "" {
		t.Fatalf("A: Lock(shared) = %v, %v; want acquired at once", ga, err)
	}
	if ga.GetToken() == gb.GetToken() {
		t.Fatalf("A and B got the same token")
	}
	// B's token does not release A's lock either, and A's own does.
	if rel, err := h.locks.Release(b, &coordv1.ReleaseRequest{Name: "shared", Token: ga.GetToken()}); err != nil || rel.GetReleased() {
		t.Errorf("B: Release(shared, A's token) = %v, %v; want released=false", rel, err)
	}
	if rel, err := h.locks.Release(a, &coordv1.ReleaseRequest{Name: "shared", Token: ga.GetToken()}); err != nil || !rel.GetReleased() {
		t.Errorf("A: Release(shared, A's token) = %v, %v; want released", rel, err)
	}
	if info, err := h.locks.GetLock(b, &coordv1.GetLockRequest{Name: "shared"}); err != nil || !info.GetHeld() || info.GetOwner() != "owner-b" {
		t.Errorf("B: GetLock(shared) after A released its own = %v, %v; want still held by owner-b", info, err)
	}
	if rel, err := h.locks.Release(b, &coordv1.ReleaseRequest{Name: "shared", Token: gb.GetToken()}); err != nil || !rel.GetReleased() {
		t.Errorf("B: Release(shared, B's token) = %v, %v; want released", rel, err)
	}
}

// TestAuthIsolatesSessions: A cannot resume B's session by its ID, nor bind
// a lock to it; B's session is unaffected.
func TestAuthIsolatesSessions(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)))
	a, b := as(t, keyA), as(t, keyB)

	kb, first, err := h.openAs(t, b, "", 30*time.Second)
	if err != nil {
		t.Fatalf("B: KeepAlive: %v", err)
	}
	idB := first.GetSessionId()

	_, resp, err := h.openAs(t, a, idB, 30*time.Second)
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
	if resp != nil {
		t.Errorf("A resuming B's session got %v", resp)
	}

	_, err = h.locks.Lock(a, &coordv1.LockRequest{Name: "bound", SessionId: idB})
	wantStatus(t, err, codes.FailedPrecondition, "SESSION_NOT_FOUND")
	if info, err := h.locks.GetLock(a, &coordv1.GetLockRequest{Name: "bound"}); err != nil || info.GetHeld() {
		t.Errorf("A: GetLock(bound) = %v, %v; want free", info, err)
	}

	// B's session lives on and takes locks as before.
	if r := kb.beat(idB, 0); r.GetSessionId() != idB || r.GetExpired() || len(r.GetLostLocks()) != 0 {
		t.Fatalf("B's heartbeat after A's attempts = %v", r)
	}
	g, err := h.locks.Lock(b, &coordv1.LockRequest{Name: "bound", SessionId: idB})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("B: Lock(bound, its session) = %v, %v", g, err)
	}
	if info, err := h.locks.GetLock(a, &coordv1.GetLockRequest{Name: "bound"}); err != nil || info.GetHeld() {
		t.Errorf("A: GetLock(bound) = %v, %v; want free (B's bound lock is B's)", info, err)
	}
	kb.close()
	if info, err := h.locks.GetLock(b, &coordv1.GetLockRequest{Name: "bound"}); err != nil || info.GetHeld() {
		t.Errorf("B: GetLock(bound) after its session ended = %v, %v; want free", info, err)
	}
}

// TestAuthIsolatesRateLimits: A exhausting key "k" leaves B's "k" whole,
// with an inline limit and with a named policy.
func TestAuthIsolatesRateLimits(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)), withPolicies(map[string]limiter.Policy{
		"p": {Limit: store.Limit{Algorithm: store.SlidingLog, Limit: 2, Period: time.Hour}},
	}))
	a, b := as(t, keyA), as(t, keyB)
	for _, tc := range []struct {
		name string
		req  func() *coordv1.AllowRequest
	}{
		{"inline", func() *coordv1.AllowRequest {
			return &coordv1.AllowRequest{Key: "k", Limit: inline(coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, 2, time.Hour, 0)}
		}},
		{"policy", func() *coordv1.AllowRequest { return &coordv1.AllowRequest{Key: "k", Policy: "p"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 1; i <= 3; i++ {
				r, err := h.limits.Allow(a, tc.req())
				if err != nil {
					t.Fatal(err)
				}
				if want := i <= 2; r.GetAllowed() != want {
					t.Fatalf("A: Allow #%d(k) = %v; want allowed=%v", i, r, want)
				}
			}
			peek := tc.req()
			peek.Peek = true
			r, err := h.limits.Allow(b, peek)
			// peek answers what the call would get: allowed, 1 left after it.
			if err != nil || !r.GetAllowed() || r.GetRemaining() != 1 {
				t.Fatalf("B: Allow(k, peek) after A exhausted its k = %v, %v; want allowed with remaining 1", r, err)
			}
			for i := 1; i <= 2; i++ {
				r, err := h.limits.Allow(b, tc.req())
				if err != nil || !r.GetAllowed() || r.GetRemaining() != int64(2-i) {
					t.Fatalf("B: Allow #%d(k) = %v, %v; want allowed with remaining %d", i, r, err, 2-i)
				}
			}
		})
	}
}

// TestAuthIsolatesIdempotency: A's Begin on B's key is a key of A's own
// (EXECUTE), and B's owner token does not finish or extend anything for A.
func TestAuthIsolatesIdempotency(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)))
	a, b := as(t, keyA), as(t, keyB)

	bb, err := h.idem.BeginIdempotent(b, &coordv1.BeginIdempotentRequest{Key: "charge-7", Fingerprint: "fp-b"})
	if err != nil || bb.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
		t.Fatalf("B: Begin(charge-7) = %v, %v", bb, err)
	}
	ownerB := bb.GetOwnerToken()

	// With B's owner token, before A ever used the key.
	_, err = h.idem.Finish(a, &coordv1.FinishRequest{Key: "charge-7", OwnerToken: ownerB, Result: []byte("stolen")})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_OWNER")
	_, err = h.idem.ExtendIdempotent(a, &coordv1.ExtendIdempotentRequest{Key: "charge-7", OwnerToken: ownerB, ProcessingTtl: dur(time.Hour)})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_OWNER")

	// A's Begin with another fingerprint is neither IN_PROGRESS nor a
	// mismatch: it is a separate key.
	ba, err := h.idem.BeginIdempotent(a, &coordv1.BeginIdempotentRequest{Key: "charge-7", Fingerprint: "fp-a"})
	if err != nil || ba.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE || ba.GetOwnerToken() == ownerB {
		t.Fatalf("A: Begin(charge-7) = %v, %v; want EXECUTE with an owner token of its own", ba, err)
	}
	// And now that A's key exists, B's token still does not own it.
	_, err = h.idem.Finish(a, &coordv1.FinishRequest{Key: "charge-7", OwnerToken: ownerB, Result: []byte("stolen")})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_OWNER")

	// B's key is as B left it: in progress, then finished by B only.
	if r, err := h.idem.BeginIdempotent(b, &coordv1.BeginIdempotentRequest{Key: "charge-7", Fingerprint: "fp-b"}); err != nil || r.GetOutcome() != coordv1.Outcome_OUTCOME_IN_PROGRESS {
		t.Fatalf("B: Begin(charge-7) again = %v, %v; want IN_PROGRESS", r, err)
	}
	if r, err := h.idem.Finish(b, &coordv1.FinishRequest{Key: "charge-7", OwnerToken: ownerB, Result: []byte("b-result")}); err != nil || !r.GetStored() {
		t.Fatalf("B: Finish(charge-7) = %v, %v", r, err)
	}
	if r, err := h.idem.BeginIdempotent(b, &coordv1.BeginIdempotentRequest{Key: "charge-7", Fingerprint: "fp-b"}); err != nil ||
		r.GetOutcome() != coordv1.Outcome_OUTCOME_COMPLETED || string(r.GetResult()) != "b-result" {
		t.Fatalf("B: Begin(charge-7) after Finish = %v, %v; want COMPLETED with b-result", r, err)
	}
	// A's key is still A's, in progress, and sees nothing of B's result.
	if r, err := h.idem.BeginIdempotent(a, &coordv1.BeginIdempotentRequest{Key: "charge-7", Fingerprint: "fp-a"}); err != nil ||
		r.GetOutcome() != coordv1.Outcome_OUTCOME_IN_PROGRESS || len(r.GetResult()) != 0 {
		t.Fatalf("A: Begin(charge-7) again = %v, %v; want IN_PROGRESS", r, err)
	}
}

// TestAuthIsolatesQueues: A cannot claim from B's queue, cannot ack, nack or
// extend B's receipts, and Stats, Redrive and dedup IDs of B's queue name
// are A's own queue's.
func TestAuthIsolatesQueues(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)))
	a, b := as(t, keyA), as(t, keyB)
	enqueue := func(c context.Context, req *coordv1.EnqueueRequest) *coordv1.EnqueueResponse {
		t.Helper()
		r, err := h.queues.Enqueue(c, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	stats := func(c context.Context) *coordv1.StatsResponse {
		t.Helper()
		s, err := h.queues.Stats(c, &coordv1.StatsRequest{Queue: "jobs"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// B: one dead letter, one in flight, one ready.
	enqueue(b, &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("doomed"), MaxAttempts: 1})
	enqueue(b, &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("b-1"), DedupId: "d1"})
	claimed, err := h.queues.Claim(b, &coordv1.ClaimRequest{Queue: "jobs", MaxMessages: 2, VisibilityTimeout: dur(time.Minute)})
	if err != nil || len(claimed.GetMessages()) != 2 {
		t.Fatalf("B: Claim = %v, %v; want 2 messages", claimed, err)
	}
	var receipt string
	for _, m := range claimed.GetMessages() {
		if m.GetMaxAttempts() == 1 {
			if r, err := h.queues.Nack(b, &coordv1.NackRequest{Queue: "jobs", Receipt: m.GetReceipt()}); err != nil || !r.GetDeadLettered() {
				t.Fatalf("B: Nack = %v, %v; want dead-lettered", r, err)
			}
		} else {
			receipt = m.GetReceipt()
		}
	}
	enqueue(b, &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("b-2")})
	wantB := "ready=1 delayed=0 in_flight=1 dead=1"
	statsString := func(s *coordv1.StatsResponse) string {
		return "ready=" + itoa(s.GetReady()) + " delayed=" + itoa(s.GetDelayed()) + " in_flight=" + itoa(s.GetInFlight()) + " dead=" + itoa(s.GetDead())
	}
	if s := statsString(stats(b)); s != wantB {
		t.Fatalf("B: Stats(jobs) = %s, want %s", s, wantB)
	}

	if s := statsString(stats(a)); s != "ready=0 delayed=0 in_flight=0 dead=0" {
		t.Errorf("A: Stats(jobs) = %s; want A's own empty queue", s)
	}
	if r, err := h.queues.Claim(a, &coordv1.ClaimRequest{Queue: "jobs", MaxMessages: 10}); err != nil || len(r.GetMessages()) != 0 {
		t.Errorf("A: Claim(jobs) = %v, %v; want nothing", r, err)
	}
	_, err = h.queues.Ack(a, &coordv1.AckRequest{Queue: "jobs", Receipt: receipt})
	wantStatus(t, err, codes.FailedPrecondition, "RECEIPT_EXPIRED")
	_, err = h.queues.Nack(a, &coordv1.NackRequest{Queue: "jobs", Receipt: receipt, Delay: dur(0)})
	wantStatus(t, err, codes.FailedPrecondition, "RECEIPT_EXPIRED")
	_, err = h.queues.Extend(a, &coordv1.ExtendRequest{Queue: "jobs", Receipt: receipt, VisibilityTimeout: dur(time.Hour)})
	wantStatus(t, err, codes.FailedPrecondition, "RECEIPT_EXPIRED")
	if r, err := h.queues.Redrive(a, &coordv1.RedriveRequest{Queue: "jobs"}); err != nil || r.GetMoved() != 0 {
		t.Errorf("A: Redrive(jobs) = %v, %v; want nothing moved", r, err)
	}
	// B's dead letters: not A's to list, redrive by ID or purge.
	bDead, err := h.queues.ListDeadLetters(b, &coordv1.ListDeadLettersRequest{Queue: "jobs", PageSize: 1})
	if err != nil || len(bDead.GetDeadLetters()) != 1 {
		t.Fatalf("B: ListDeadLetters = %v, %v; want its dead letter", bDead, err)
	}
	if r, err := h.queues.ListDeadLetters(a, &coordv1.ListDeadLettersRequest{Queue: "jobs"}); err != nil || len(r.GetDeadLetters()) != 0 {
		t.Errorf("A: ListDeadLetters(jobs) = %v, %v; want none", r, err)
	}
	if r, err := h.queues.Redrive(a, &coordv1.RedriveRequest{Queue: "jobs", MessageIds: []string{bDead.GetDeadLetters()[0].GetMessageId()}}); err != nil || r.GetMoved() != 0 {
		t.Errorf("A: Redrive(jobs, B's dead letter's ID) = %v, %v; want nothing moved", r, err)
	}
	if r, err := h.queues.PurgeDeadLetters(a, &coordv1.PurgeDeadLettersRequest{Queue: "jobs"}); err != nil || r.GetPurged() != 0 || r.GetRemaining() != 0 {
		t.Errorf("A: PurgeDeadLetters(jobs) = %v, %v; want nothing purged, none left", r, err)
	}
	// B's dedup ID is not A's.
	if r := enqueue(a, &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte("a-1"), DedupId: "d1"}); r.GetDuplicate() {
		t.Errorf("A: Enqueue(jobs, dedup d1) = %v; want not a duplicate of B's", r)
	}
	if r, err := h.queues.Claim(a, &coordv1.ClaimRequest{Queue: "jobs", MaxMessages: 10}); err != nil ||
		len(r.GetMessages()) != 1 || string(r.GetMessages()[0].GetPayload()) != "a-1" {
		t.Errorf("A: Claim(jobs) = %v, %v; want A's own a-1 only", r, err)
	}

	// B's queue is untouched, and its receipt still live.
	if s := statsString(stats(b)); s != wantB {
		t.Errorf("B: Stats(jobs) after A's calls = %s, want %s", s, wantB)
	}
	if r, err := h.queues.Ack(b, &coordv1.AckRequest{Queue: "jobs", Receipt: receipt}); err != nil || !r.GetAcked() {
		t.Errorf("B: Ack(its receipt) after A's attempts = %v, %v; want acked", r, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestAuthReload: Authenticator.Set takes effect on the next call of an
// existing connection: a removed key is refused, a new key works, in its
// namespace.
func TestAuthReload(t *testing.T) {
	auth := twoTenants(t)
	h := newHarness(t, withAuth(auth))
	g, err := h.locks.Lock(as(t, keyA), &coordv1.LockRequest{Name: "mine", Ttl: dur(time.Minute), Owner: "a"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("A: Lock(mine) = %v, %v", g, err)
	}
	// A stream authenticated before the reload with the key it removes.
	k, first, err := h.openAs(t, as(t, keyA), "", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	const keyA2 = "second-key-of-tenant-a-0123"
	if err := auth.Set(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{
		{Namespace: nsA, Key: keyA2},
		{Namespace: nsB, Key: keyB},
	}}); err != nil {
		t.Fatal(err)
	}

	_, err = h.locks.GetLock(as(t, keyA), &coordv1.GetLockRequest{Name: "mine"})
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	_, _, err = h.openAs(t, as(t, keyA), first.GetSessionId(), 0)
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")

	info, err := h.locks.GetLock(as(t, keyA2), &coordv1.GetLockRequest{Name: "mine"})
	if err != nil || !info.GetHeld() || info.GetOwner() != "a" {
		t.Fatalf("GetLock(mine) with the new key of %s = %v, %v; want A's lock, held", nsA, info, err)
	}
	if _, err := h.locks.GetLock(as(t, keyB), &coordv1.GetLockRequest{Name: "mine"}); err != nil {
		t.Errorf("the unchanged key of %s after the reload: %v", nsB, err)
	}
	// The new key resumes A's session on a new stream.
	k2, resumed, err := h.openAs(t, as(t, keyA2), first.GetSessionId(), 0)
	if err != nil || resumed.GetSessionId() != first.GetSessionId() {
		t.Fatalf("resuming A's session with the new key = %v, %v", resumed, err)
	}
	k2.cancel()
	// A stream authenticated with the removed key is ended by the reload
	// (TestAuthReloadEndsRevokedStreams).
	wantEnded(t, k, time.Second)
	k.cancel()

	// A table that does not check out changes nothing.
	if err := auth.Set(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{{Namespace: "bad namespace!", Key: keyA}}}); err == nil {
		t.Fatal("Set with an invalid namespace = nil error")
	}
	if _, err := h.locks.GetLock(as(t, keyA2), &coordv1.GetLockRequest{Name: "mine"}); err != nil {
		t.Errorf("after a refused Set, the running key: %v", err)
	}
	_, err = h.locks.GetLock(as(t, keyA), &coordv1.GetLockRequest{Name: "mine"})
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")

	// Auth turned off: every caller is in the default namespace, key or not.
	if err := auth.Set(server.AuthConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []context.Context{ctx(t), as(t, keyA2)} {
		info, err := h.locks.GetLock(c, &coordv1.GetLockRequest{Name: "mine"})
		if err != nil || info.GetHeld() {
			t.Errorf("with auth off, GetLock(mine) = %v, %v; want the default namespace's free lock", info, err)
		}
	}
}

// wantEnded checks that k's stream ends with UNAUTHENTICATED (reason
// UNAUTHENTICATED) within d, without any further response.
func wantEnded(t testing.TB, k *keepAlive, d time.Duration) {
	t.Helper()
	type result struct {
		resp *coordv1.KeepAliveResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		r, err := k.stream.Recv()
		got <- result{r, err}
	}()
	select {
	case r := <-got:
		if r.err == nil {
			t.Fatalf("the stream of a revoked credential answered %v; want it ended UNAUTHENTICATED", r.resp)
		}
		wantStatus(t, r.err, codes.Unauthenticated, "UNAUTHENTICATED")
	case <-time.After(d):
		k.cancel()
		<-got
		t.Fatalf("the stream of a revoked credential did not end within %v", d)
	}
}

// TestAuthReloadEndsRevokedStreams: a reload that removes an API key ends
// every open stream of that key with UNAUTHENTICATED within a second
// (DESIGN, Sessions are secrets), without a heartbeat to prompt it; the
// session is not closed — its lock stays held, and a valid key of the same
// namespace resumes it. Streams of the keys that stay go on; a key moved to
// another namespace, and a stream opened without a key before auth was
// turned on, end the same way.
func TestAuthReloadEndsRevokedStreams(t *testing.T) {
	const keyA2 = "second-key-of-tenant-a-0123"
	auth, err := server.NewAuthenticator(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{
		{Namespace: nsA, Key: keyA}, {Namespace: nsA, Key: keyA2}, {Namespace: nsB, Key: keyB},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var reg *prometheus.Registry
	h := newHarness(t, withAuth(auth), withMetrics(&reg))

	k, first, err := h.openAs(t, as(t, keyA), "", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetSessionId()
	g, err := h.locks.Lock(as(t, keyA), &coordv1.LockRequest{Name: "bound", SessionId: id, Owner: "a"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock bound to the session = %v, %v", g, err)
	}
	kA2, _, err := h.openAs(t, as(t, keyA2), "", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kB, _, err := h.openAs(t, as(t, keyB), "", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	if err := auth.Set(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{
		{Namespace: nsA, Key: keyA2}, {Namespace: nsB, Key: keyB},
	}}); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, k, time.Second)
	wantRevoked(t, reg, 1)
	// The session was not closed: its lock is held, and it resumes.
	info, err := h.locks.GetLock(as(t, keyA2), &coordv1.GetLockRequest{Name: "bound"})
	if err != nil || !info.GetHeld() || info.GetOwner() != "a" {
		t.Fatalf("GetLock(bound) after the revocation = %v, %v; want held by a", info, err)
	}
	resumed, r, err := h.openAs(t, as(t, keyA2), id, 0)
	if err != nil || r.GetSessionId() != id || r.GetExpired() {
		t.Fatalf("resuming the session with the other key of %s = %v, %v; want it alive", nsA, r, err)
	}
	// The streams of the keys that stayed go on.
	for name, s := range map[string]*keepAlive{"A's other key": kA2, "B": kB} {
		if err := s.stream.Send(&coordv1.KeepAliveRequest{}); err != nil {
			t.Fatalf("%s: Send after the reload: %v", name, err)
		}
		if r, err := s.stream.Recv(); err != nil || r.GetExpired() {
			t.Fatalf("%s: heartbeat after the reload = %v, %v; want alive", name, r, err)
		}
	}

	// keyA2 moves to namespace B: its streams were of A, and end.
	if err := auth.Set(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{
		{Namespace: nsB, Key: keyA2}, {Namespace: nsB, Key: keyB},
	}}); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, kA2, time.Second)
	wantEnded(t, resumed, time.Second)
	kB.close()

	// Auth off, then on: a stream opened without a key ends.
	if err := auth.Set(server.AuthConfig{}); err != nil {
		t.Fatal(err)
	}
	anon, _, err := h.openAs(t, ctx(t), "", 30*time.Second)
	if err != nil {
		t.Fatalf("a stream with auth off: %v", err)
	}
	if err := auth.Set(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{{Namespace: nsB, Key: keyB}}}); err != nil {
		t.Fatal(err)
	}
	wantEnded(t, anon, time.Second)
	wantRevoked(t, reg, 4)
}

// wantRevoked waits up to a second for coordd_auth_failures_total{reason=
// REVOKED} to be n: a KeepAlive stream's final status is written before
// its handler returns, and the revocation is counted when it has (a
// client may see its stream end first).
func wantRevoked(t *testing.T, reg *prometheus.Registry, n float64) {
	t.Helper()
	var got float64
	for end := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		if got = counterValue(t, reg, "coordd_auth_failures_total", "reason", "REVOKED"); got == n || time.Now().After(end) {
			break
		}
	}
	if got != n {
		t.Errorf("coordd_auth_failures_total{reason=REVOKED} = %v, want %v", got, n)
	}
}

// waitCalls polls until f has seen n calls of method.
func waitCalls(t testing.TB, f *storetest.Faulty, method string, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); f.Calls(method) < n; {
		if time.Now().After(end) {
			t.Fatalf("%s was called %d times in 5s, want %d", method, f.Calls(method), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLimitWaitersPerNamespace: over MaxWaitersPerNamespace, a waiting call
// is refused at once with TOO_MANY_WAITERS; other namespaces and calls that
// do not wait are not affected, and the room comes back when a waiter ends.
func TestLimitWaitersPerNamespace(t *testing.T) {
	var f *storetest.Faulty
	var reg *prometheus.Registry
	h := newHarness(t, withAuth(twoTenants(t)), withLimits(server.Limits{MaxWaitersPerNamespace: 2}), withFaulty(&f), withMetrics(&reg))

	waitCtx, cancelWaiters := context.WithCancel(as(t, keyA))
	defer cancelWaiters()
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := h.queues.Claim(waitCtx, &coordv1.ClaimRequest{Queue: "q", Wait: dur(5 * time.Second)})
			done <- err
		}()
	}
	waitCalls(t, f, "Claim", 2) // both are past the gate

	start := time.Now()
	_, err := h.queues.Claim(as(t, keyA), &coordv1.ClaimRequest{Queue: "q", Wait: dur(5 * time.Second)})
	wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_WAITERS")
	if took := time.Since(start); took > time.Second {
		t.Errorf("the third waiting Claim was refused after %v; want at once", took)
	}
	// Every kind of waiting call counts.
	_, err = h.locks.Lock(as(t, keyA), &coordv1.LockRequest{Name: "free", Ttl: dur(time.Minute), Wait: dur(5 * time.Second)})
	wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_WAITERS")
	_, err = h.idem.BeginIdempotent(as(t, keyA), &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "f", Wait: dur(5 * time.Second)})
	wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_WAITERS")
	if info, err := h.locks.GetLock(as(t, keyA), &coordv1.GetLockRequest{Name: "free"}); err != nil || info.GetHeld() {
		t.Errorf("the refused Lock took the lock: %v, %v", info, err)
	}
	// A call that does not wait is not limited.
	if r, err := h.queues.Claim(as(t, keyA), &coordv1.ClaimRequest{Queue: "q"}); err != nil || len(r.GetMessages()) != 0 {
		t.Errorf("A: Claim without wait at the limit = %v, %v; want OK, empty", r, err)
	}
	// Another namespace may still wait.
	start = time.Now()
	r, err := h.queues.Claim(as(t, keyB), &coordv1.ClaimRequest{Queue: "q", Wait: dur(300 * time.Millisecond)})
	if err != nil || len(r.GetMessages()) != 0 {
		t.Errorf("B: waiting Claim = %v, %v; want OK, empty", r, err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("B's Claim returned after %v; want it to have waited its 300ms", took)
	}
	if got := counterValue(t, reg, "coordd_rejected_total", "reason", "too_many_waiters"); got != 3 {
		t.Errorf("coordd_rejected_total{reason=too_many_waiters} = %v, want 3", got)
	}

	// The waiters end: the room comes back.
	cancelWaiters()
	for range 2 {
		if err := <-done; err == nil {
			t.Errorf("a cancelled waiting Claim returned OK")
		}
	}
	for end := time.Now().Add(5 * time.Second); ; {
		_, err := h.queues.Claim(as(t, keyA), &coordv1.ClaimRequest{Queue: "q", Wait: dur(10 * time.Millisecond)})
		if err == nil {
			break
		}
		wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_WAITERS")
		if time.Now().After(end) {
			t.Fatalf("A still over the waiter limit 5s after its waiters were cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLimitWaitersPerConnection: MaxWaitersPerConnection counts per
// connection, whatever the namespace.
func TestLimitWaitersPerConnection(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withAuth(twoTenants(t)), withLimits(server.Limits{MaxWaitersPerConnection: 1}), withFaulty(&f))
	waitCtx, cancelWaiter := context.WithCancel(as(t, keyA))
	done := make(chan error, 1)
	go func() {
		_, err := h.queues.Claim(waitCtx, &coordv1.ClaimRequest{Queue: "q", Wait: dur(5 * time.Second)})
		done <- err
	}()
	defer func() { cancelWaiter(); <-done }()
	waitCalls(t, f, "Claim", 1)

	_, err := h.queues.Claim(as(t, keyB), &coordv1.ClaimRequest{Queue: "q", Wait: dur(5 * time.Second)})
	wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_WAITERS")

	other, err := grpc.NewClient(h.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	r, err := coordv1.NewQueueServiceClient(other).Claim(as(t, keyA), &coordv1.ClaimRequest{Queue: "q", Wait: dur(50 * time.Millisecond)})
	if err != nil || len(r.GetMessages()) != 0 {
		t.Errorf("a waiting Claim on another connection = %v, %v; want OK, empty", r, err)
	}
}

// TestLimitStreamsPerNamespace: over MaxStreamsPerNamespace, a KeepAlive
// stream is refused with TOO_MANY_STREAMS; another namespace may open
// streams, and closing one makes room.
func TestLimitStreamsPerNamespace(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withAuth(twoTenants(t)), withLimits(server.Limits{MaxStreamsPerNamespace: 2}), withMetrics(&reg))
	var open []*keepAlive
	for i := range 2 {
		k, _, err := h.openAs(t, as(t, keyA), "", 30*time.Second)
		if err != nil {
			t.Fatalf("A: stream %d: %v", i+1, err)
		}
		open = append(open, k)
	}
	_, resp, err := h.openAs(t, as(t, keyA), "", 30*time.Second)
	wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_STREAMS")
	if resp != nil {
		t.Errorf("the refused stream answered %v", resp)
	}
	if kb, _, err := h.openAs(t, as(t, keyB), "", 30*time.Second); err != nil {
		t.Errorf("B: a stream while A is at its limit: %v", err)
	} else {
		kb.close()
	}
	if got := counterValue(t, reg, "coordd_rejected_total", "reason", "too_many_streams"); got != 1 {
		t.Errorf("coordd_rejected_total{reason=too_many_streams} = %v, want 1", got)
	}
	if got := gaugeValue(t, reg, "coordd_session_streams"); got != 2 {
		t.Errorf("coordd_session_streams = %v, want 2 (the refused stream is not one)", got)
	}
	open[0].close()
	k, _, err := h.openAs(t, as(t, keyA), "", 30*time.Second)
	if err != nil {
		t.Fatalf("A: a stream after one of its two ended: %v", err)
	}
	k.close()
	open[1].close()
}

// TestLimitStreamsCountOnlyKeepAlive: the stream limits are on KeepAlive
// streams (docs/configuration.md: limits.max_streams_per_namespace is "KeepAlive streams
// of one namespace open on this instance", max_streams_per_connection
// "KeepAlive streams per connection"); health Watch and reflection streams,
// which need no credentials, must not use them up.
func TestLimitStreamsCountOnlyKeepAlive(t *testing.T) {
	// openOthers opens a health Watch and a reflection stream on conn,
	// without credentials, and reports whether each was served.
	openOthers := func(t *testing.T, c context.Context, conn *grpc.ClientConn) {
		t.Helper()
		watch, err := healthpb.NewHealthClient(conn).Watch(c, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health Watch without credentials = %v, %v; want SERVING", r, err)
		}
		refl, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		if _, err := refl.Recv(); err != nil {
			t.Errorf("a reflection stream while a health Watch is open: %v; want it served", err)
		}
	}
	t.Run("per connection", func(t *testing.T) {
		h := newHarness(t, withAuth(twoTenants(t)), withLimits(server.Limits{MaxStreamsPerConnection: 1}))
		wctx, cancel := context.WithCancel(ctx(t))
		defer cancel()
		openOthers(t, wctx, h.conn)
		k, _, err := h.openAs(t, as(t, keyA), "", 30*time.Second)
		if err != nil {
			t.Errorf("the connection's first KeepAlive stream, while a health Watch and a reflection stream are open on it "+
				"(max_streams_per_connection 1): %v; want it served", err)
			return
		}
		k.close()
	})
	t.Run("per namespace", func(t *testing.T) {
		auth, err := server.NewAuthenticator(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{
			{Namespace: server.DefaultNamespace, Key: keyA}, // a tenant that happens to be called "default"
		}})
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, withAuth(auth), withLimits(server.Limits{MaxStreamsPerNamespace: 1}))
		// Anyone, without credentials, on a connection of their own.
		other, err := grpc.NewClient(h.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		wctx, cancel := context.WithCancel(ctx(t))
		defer cancel()
		openOthers(t, wctx, other)
		k, _, err := h.openAs(t, as(t, keyA), "", 30*time.Second)
		if err != nil {
			t.Errorf("the first KeepAlive stream of namespace %q (max_streams_per_namespace 1), while an unauthenticated "+
				"caller holds a health Watch and a reflection stream on another connection: %v; want it served",
				server.DefaultNamespace, err)
			return
		}
		k.close()
	})
}

// TestLimitStreamMessageRate: a KeepAlive stream sending faster than
// MaxStreamMessageRate (burst twice that) is ended with TOO_MANY_MESSAGES;
// its session and its locks live on, and a new stream resumes it.
func TestLimitStreamMessageRate(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withAuth(twoTenants(t)), withLimits(server.Limits{MaxStreamMessageRate: 5}), withMetrics(&reg))
	a := as(t, keyA)
	k, first, err := h.openAs(t, a, "", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetSessionId()
	g, err := h.locks.Lock(a, &coordv1.LockRequest{Name: "bound", SessionId: id, Owner: "a"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock(bound, session) = %v, %v", g, err)
	}

	const total = 30
	sent := 1
	for ; sent < total; sent++ {
		if err := k.stream.Send(&coordv1.KeepAliveRequest{}); err != nil {
			break // the server ended the stream
		}
	}
	answered := 1
	var end error
	for {
		r, err := k.stream.Recv()
		if err != nil {
			end = err
			break
		}
		if r.GetSessionId() != id {
			t.Errorf("heartbeat answered for session %q, want %q", r.GetSessionId(), id)
		}
		answered++
	}
	wantStatus(t, end, codes.ResourceExhausted, "TOO_MANY_MESSAGES")
	t.Logf("sent %d heartbeats, %d answered before TOO_MANY_MESSAGES", sent, answered)
	// The burst (10) is answered; the stream ends well before 30.
	if answered < 10 || answered >= total {
		t.Errorf("%d of %d heartbeats answered; want the burst of 10 (or a little more), not all", answered, total)
	}
	if got := counterValue(t, reg, "coordd_rejected_total", "reason", "too_many_messages"); got != 1 {
		t.Errorf("coordd_rejected_total{reason=too_many_messages} = %v, want 1", got)
	}

	// The session lives on: its lock is held, and a new stream resumes it.
	info, err := h.locks.GetLock(a, &coordv1.GetLockRequest{Name: "bound"})
	if err != nil || !info.GetHeld() || !info.GetSessionBound() {
		t.Fatalf("GetLock(bound) after the stream ended = %v, %v; want held by session %s", info, err, id)
	}
	k2, resumed, err := h.openAs(t, a, id, 0)
	if err != nil || resumed.GetSessionId() != id || resumed.GetExpired() || len(resumed.GetLostLocks()) != 0 {
		t.Fatalf("resuming the session on a new stream = %v, %v; want it alive with its lock", resumed, err)
	}
	// Heartbeats under the rate are fine for longer than the burst lasts.
	for i := range 12 {
		time.Sleep(250 * time.Millisecond) // 4/s < 5/s
		if err := k2.stream.Send(&coordv1.KeepAliveRequest{}); err != nil {
			t.Fatalf("heartbeat %d at 4/s: Send: %v", i, err)
		}
		if _, err := k2.stream.Recv(); err != nil {
			t.Fatalf("heartbeat %d at 4/s: %v; want answered", i, err)
		}
	}
	k2.close()
	if info, err := h.locks.GetLock(a, &coordv1.GetLockRequest{Name: "bound"}); err != nil || info.GetHeld() {
		t.Errorf("GetLock(bound) after the session's stream half-closed = %v, %v; want free", info, err)
	}
}
