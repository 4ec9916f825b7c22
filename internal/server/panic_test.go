package server_test

// A handler that panics: the client gets INTERNAL with nothing of the
// panic, the server lives on, the panic is logged and counted.

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
)

// panicSecret is what the panics carry: it must never reach a client.
const panicSecret = "redis://admin:hunter2-S3CR3T-7f3a@10.0.0.7:6379"

// panicky is a store whose chosen methods panic, for the next n calls each.
type panicky struct {
	store.Store
	getLock, acquireLock, createSession, checkSession atomic.Int32
}

func (p *panicky) trip(n *atomic.Int32) {
	for {
		left := n.Load()
		if left <= 0 {
			return
		}
		if n.CompareAndSwap(left, left-1) {
			panic("store exploded while talking to " + panicSecret)
		}
	}
}

func (p *panicky) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	p.trip(&p.getLock)
	return p.Store.GetHolds(ctx, kind, name)
}

func (p *panicky) AcquireHold(ctx context.Context, req store.HoldRequest) (store.Grant, error) {
	p.trip(&p.acquireLock)
	return p.Store.AcquireHold(ctx, req)
}

func (p *panicky) CreateSession(ctx context.Context, id string, ttl time.Duration, max int, lockDelay time.Duration) (store.SessionState, error) {
	p.trip(&p.createSession)
	return p.Store.CreateSession(ctx, id, ttl, max, lockDelay)
}

func (p *panicky) CheckSession(ctx context.Context, ref store.SessionRef) (store.SessionState, error) {
	p.trip(&p.checkSession)
	return p.Store.CheckSession(ctx, ref)
}

func withPanicky(p **panicky) func(*config) {
	return func(c *config) {
		c.wrap = func(s store.Store) store.Store {
			*p = &panicky{Store: s}
			return *p
		}
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func withLog(w *syncBuffer) func(*config) {
	return func(c *config) {
		c.log = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// wantInternal checks that err is the generic INTERNAL, with nothing of the
// panic in its message, details, headers or trailers.
func wantInternal(t *testing.T, err error, header, trailer metadata.MD) {
	t.Helper()
	st := wantStatus(t, err, codes.Internal, "INTERNAL")
	if st.Message() != "internal error" {
		t.Errorf("message %q, want the generic %q", st.Message(), "internal error")
	}
	var everything []string
	everything = append(everything, err.Error(), st.Message())
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			everything = append(everything, info.String())
		} else {
			t.Errorf("unexpected detail %T: %v", d, d)
		}
	}
	for _, md := range []metadata.MD{header, trailer} {
		for k, vs := range md {
			everything = append(everything, k+"="+strings.Join(vs, ","))
		}
	}
	for _, s := range everything {
		for _, leak := range []string{"hunter2", "S3CR3T", "exploded", "panic", "goroutine", ".go:"} {
			if strings.Contains(s, leak) {
				t.Errorf("the client got %q, which contains %q from the panic", s, leak)
			}
		}
	}
}

// TestPanicBecomesInternal: GetLock's store call panics once; the client
// gets a bare INTERNAL, the connection and server go on, and the panic is
// logged and counted once.
func TestPanicBecomesInternal(t *testing.T) {
	var p *panicky
	var reg *prometheus.Registry
	var log syncBuffer
	h := newHarness(t, withPanicky(&p), withMetrics(&reg), withLog(&log))
	p.getLock.Store(1)

	var header, trailer metadata.MD
	_, err := h.locks.GetLock(ctx(t), &coordv1.GetLockRequest{Name: "x"}, grpc.Header(&header), grpc.Trailer(&trailer))
	wantInternal(t, err, header, trailer)

	// The same connection serves everything after it.
	g := h.lock(t, &coordv1.LockRequest{Name: "x", Ttl: dur(time.Minute), Owner: "after"})
	if !g.GetAcquired() {
		t.Fatalf("Lock after the panic = %v", g)
	}
	if info := h.held(t, "x"); !info.GetHeld() || info.GetOwner() != "after" {
		t.Fatalf("GetLock after the one-shot panic = %v; want held by after", info)
	}
	h.allow(t, &coordv1.AllowRequest{Key: "k", Limit: inline(coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, 1, time.Minute, 0)})
	k, _ := h.openSession(t, "", 10*time.Second)
	k.cancel()

	// (prometheus/testutil would need github.com/kylelemons/godebug added to
	// go.mod; the registry's Gather tells the same.)
	if got := counterValue(t, reg, "coordd_panics_total"); got != 1 {
		t.Errorf("coordd_panics_total = %v, want 1", got)
	}

	out := log.String()
	if !strings.Contains(out, "handler panicked") || !strings.Contains(out, "hunter2") {
		t.Errorf("the panic was not logged with its value:\n%s", out)
	}
	if !strings.Contains(out, `"grpc.code":"Internal"`) {
		t.Errorf("no call log line with grpc.code Internal:\n%s", out)
	}
}

// TestPanicEveryTime: a handler that panics on every call answers INTERNAL
// every time, counting each, and never takes the server down.
func TestPanicEveryTime(t *testing.T) {
	var p *panicky
	var reg *prometheus.Registry
	h := newHarness(t, withPanicky(&p), withMetrics(&reg))
	p.getLock.Store(1 << 30)
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var header, trailer metadata.MD
			_, err := h.locks.GetLock(ctx(t), &coordv1.GetLockRequest{Name: "x"}, grpc.Header(&header), grpc.Trailer(&trailer))
			wantInternal(t, err, header, trailer)
		})
	}
	wg.Wait()
	if got := counterValue(t, reg, "coordd_panics_total"); got != n {
		t.Errorf("coordd_panics_total = %v, want %d", got, n)
	}
	if g := h.lock(t, &coordv1.LockRequest{Name: "x", Ttl: dur(time.Minute)}); !g.GetAcquired() {
		t.Errorf("Lock among the panics = %v", g)
	}
}

// TestPanicInStream: a panic in KeepAlive ends that stream with INTERNAL,
// leaves the gauge of open streams right, and the next stream works.
func TestPanicInStream(t *testing.T) {
	var p *panicky
	var reg *prometheus.Registry
	h := newHarness(t, withPanicky(&p), withMetrics(&reg), withLimits(server.Limits{MaxStreamsPerConnection: 1}))
	p.createSession.Store(1)

	var header, trailer metadata.MD
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	stream, err := h.sessions.KeepAlive(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&coordv1.KeepAliveRequest{Ttl: dur(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	header, _ = stream.Header()
	trailer = stream.Trailer()
	wantInternal(t, err, header, trailer)
	if got := gaugeValue(t, reg, "coordd_session_streams"); got != 0 {
		t.Errorf("coordd_session_streams after the panicked stream = %v, want 0", got)
	}
	// The panicked stream left the connection's only stream slot.
	k, first := h.openSession(t, "", 10*time.Second)
	if first.GetSessionId() == "" {
		t.Fatalf("a stream after the panic = %v", first)
	}
	k.cancel()
	if got := counterValue(t, reg, "coordd_panics_total"); got != 1 {
		t.Errorf("coordd_panics_total = %v, want 1", got)
	}
}

// TestPanicInStreamCheck: a panic in a check a KeepAlive stream makes
// unasked (on its timer's goroutine, not the stream's: the one after it
// subscribed to its session's topic, or at the expiry) ends that stream with INTERNAL and is counted, like a panic
// in a heartbeat; it does not take the process down.
func TestPanicInStreamCheck(t *testing.T) {
	var p *panicky
	var reg *prometheus.Registry
	h := newHarness(t, withPanicky(&p), withMetrics(&reg))
	p.checkSession.Store(1)
	k, first := h.openSession(t, "", 200*time.Millisecond)
	if first.GetSessionId() == "" {
		t.Fatalf("first response = %v", first)
	}
	_, err := k.stream.Recv() // no heartbeat: a check panics
	header, _ := k.stream.Header()
	wantInternal(t, err, header, k.stream.Trailer())
	// The stream's final status is written before the panic is counted
	// (one goroutine per stream: the status ends the Recv), so the client
	// may see the end first: wait up to a second for the count.
	got := counterValue(t, reg, "coordd_panics_total")
	for end := time.Now().Add(time.Second); got != 1 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		got = counterValue(t, reg, "coordd_panics_total")
	}
	if got != 1 {
		t.Errorf("coordd_panics_total = %v, want 1", got)
	}
	if got := gaugeValue(t, reg, "coordd_session_streams"); got != 0 {
		t.Errorf("coordd_session_streams after the panicked stream = %v, want 0", got)
	}
}

// TestPanicWhileWaitingLeavesTheGate: a waiting Lock that panics gives its
// place among the namespace's waiters back.
func TestPanicWhileWaitingLeavesTheGate(t *testing.T) {
	var p *panicky
	h := newHarness(t, withPanicky(&p), withLimits(server.Limits{MaxWaitersPerNamespace: 1, MaxWaitersPerConnection: 1}))
	p.acquireLock.Store(3)
	for range 3 {
		_, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "w", Ttl: dur(time.Minute), Wait: dur(time.Second)})
		wantInternal(t, err, nil, nil)
	}
	g, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "w", Ttl: dur(time.Minute), Wait: dur(time.Second)})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("a waiting Lock after 3 that panicked = %v, %v; want acquired (the panics must leave the waiter gate)", g, err)
	}
}

// metricValue returns the value of the series of name in reg whose labels
// include labelPairs (name, value, ...); 0 if there is none.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labelPairs ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labelPairs); i += 2 {
				if labelOf(m, labelPairs[i]) != labelPairs[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func counterValue(t testing.TB, reg *prometheus.Registry, name string, labelPairs ...string) float64 {
	t.Helper()
	return metricValue(t, reg, name, labelPairs...)
}

func gaugeValue(t testing.TB, reg *prometheus.Registry, name string, labelPairs ...string) float64 {
	t.Helper()
	return metricValue(t, reg, name, labelPairs...)
}
