package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/tracing"
)

// tracedHarness is a harness whose server and store record their spans in
// the returned recorder.
func tracedHarness(t *testing.T) (*harness, *tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return newHarness(t, func(c *config) { c.tracer = tp }), rec, tp
}

// endedSpans waits until want(spans) holds for the spans ended so far (a
// server span ends after the client has its answer) and returns them.
func endedSpans(t *testing.T, rec *tracetest.SpanRecorder, want func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans := rec.Ended()
		if want(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans ended: %v", spanNames(spans))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	return names
}

func spanNamed(spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// childrenOf are the spans whose parent is s.
func childrenOf(spans []sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var c []sdktrace.ReadOnlySpan
	for _, x := range spans {
		if x.Parent().SpanID() == s.SpanContext().SpanID() && x.SpanContext().TraceID() == s.SpanContext().TraceID() {
			c = append(c, x)
		}
	}
	return c
}

// TestTraces: with a tracer, every call of coordd's services has a server
// span named by its method, in the client's trace (W3C trace context), with
// the gRPC code as rpc.response.status_code, and each store round trip a
// child span named by the store operation, with the backend; health calls
// have none; and no span carries a lock name, owner or token.
func TestTraces(t *testing.T) {
	h, rec, tp := tracedHarness(t)
	const name, owner, badToken = "secret-lock-name-q7x", "secret-owner-k2p", "5ec7e75ec7e75ec7e75ec7e75ec7e7ab"

	// The client's trace, sent as a traceparent header.
	cctx, client := tp.Tracer("client").Start(ctx(t), "client")
	carrier := propagation.MapCarrier{}
	tracing.Propagator().Inject(cctx, carrier)
	if carrier["traceparent"] == "" {
		t.Fatal("no traceparent injected")
	}
	callCtx := metadata.NewOutgoingContext(ctx(t), metadata.New(carrier))

	g, err := h.locks.Lock(callCtx, &coordv1.LockRequest{Name: name, Owner: owner, Ttl: dur(time.Minute)})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock: %v, %v", g, err)
	}
	_, err = h.locks.Renew(callCtx, &coordv1.RenewRequest{Name: name, Token: badToken, Ttl: dur(time.Minute)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_NOT_HELD")
	if _, err := healthpb.NewHealthClient(h.conn).Check(callCtx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	client.End()

	spans := endedSpans(t, rec, func(s []sdktrace.ReadOnlySpan) bool {
		return spanNamed(s, "coord.v1.LockService/Lock") != nil && spanNamed(s, "coord.v1.LockService/Renew") != nil && spanNamed(s, "client") != nil
	})
	wantBackend := "memory"
	if *backend != "memory" {
		wantBackend = "redis"
	}
	for _, c := range []struct {
		method, code string
	}{
		{"coord.v1.LockService/Lock", "OK"},
		{"coord.v1.LockService/Renew", "FAILED_PRECONDITION"},
	} {
		s := spanNamed(spans, c.method)
		if s.SpanKind() != trace.SpanKindServer {
			t.Errorf("%s: kind %v", c.method, s.SpanKind())
		}
		if s.Parent().SpanID() != client.SpanContext().SpanID() || s.SpanContext().TraceID() != client.SpanContext().TraceID() {
			t.Errorf("%s: parent %v, want the client's span %v", c.method, s.Parent(), client.SpanContext())
		}
		if got := attr(s, "rpc.response.status_code"); got != c.code {
			t.Errorf("%s: rpc.response.status_code %q, want %q", c.method, got, c.code)
		}
		stores := childrenOf(spans, s)
		if len(stores) == 0 {
			t.Errorf("%s: no store span among %v", c.method, spanNames(spans))
		}
		for _, st := range stores {
			if !strings.HasPrefix(st.Name(), "store ") || attr(st, string(tracing.BackendKey)) != wantBackend {
				t.Errorf("%s: child %q with backend %q, want a store span on %s", c.method, st.Name(), attr(st, string(tracing.BackendKey)), wantBackend)
			}
			if st.Status().Code.String() != "Unset" { // an answer about state is no failure of the store
				t.Errorf("%s: %s has status %v", c.method, st.Name(), st.Status())
			}
		}
	}
	for _, s := range spans {
		if strings.Contains(s.Name(), "Health") {
			t.Errorf("a health call has a span %q", s.Name())
		}
	}
	noSecrets(t, spans, name, owner, badToken, g.GetToken())
}

// noSecrets fails if a span's name, attributes, events, links or status
// contain any of secrets.
func noSecrets(t *testing.T, spans []sdktrace.ReadOnlySpan, secrets ...string) {
	t.Helper()
	for _, s := range spans {
		text := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			text = append(text, string(kv.Key), kv.Value.String())
		}
		for _, e := range s.Events() {
			text = append(text, e.Name)
			for _, kv := range e.Attributes {
				text = append(text, string(kv.Key), kv.Value.String())
			}
		}
		for _, kv := range s.Resource().Attributes() {
			text = append(text, kv.Value.String())
		}
		for _, x := range text {
			for _, secret := range secrets {
				if secret != "" && strings.Contains(x, secret) {
					t.Errorf("span %q carries %q: %q", s.Name(), secret, x)
				}
			}
		}
	}
}
