// Package tracing holds coordd's OpenTelemetry spans: one span per RPC (the
// gRPC stats handler, ServerOption) and, inside it, one child span per store
// round trip (Store.Start), so that a slow call shows where its time went.
//
// What becomes a span name or attribute is fixed by coordd, never by a
// client: an RPC's span is named by its method (coord.v1.LockService/Lock)
// and a store span by the store operation (AcquireHold, Allow…), with the
// backend as an attribute. Lock names, keys, queue names, tokens, receipts,
// session IDs and payloads never reach a span, and neither does an error's
// text: a failed store span says only whether the store was unreachable.
//
// Tracing is off unless cmd/coordd is given a TracerProvider (the OTEL_*
// environment variables, see README: Traces). Off, there is no stats handler
// and every Store method is a nil check: no OTel work on the hot path.
package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/coordd/coordd/internal/store"
)

// Scope is the instrumentation scope of coordd's own spans (the store's).
const Scope = "github.com/coordd/coordd"

// Propagator is how a client's trace continues into coordd: W3C trace
// context and baggage, read from the call's metadata.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// ServerOption returns the gRPC server option that gives every call of a
// method in traced a server span, named by the method, with the gRPC code
// as its rpc.response.status_code (and an error status for the codes
// OpenTelemetry's conventions call server errors: UNKNOWN, DEADLINE_EXCEEDED,
// UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS). traced is asked per
// call with the full method (/coord.v1.LockService/Lock); it lets through
// only methods the server has, so that a client cannot name a span by
// calling a method that does not exist. Message events are off (they would
// carry only sizes, but one event per stream message adds up on
// KeepAlive). Metrics stay Prometheus's: the handler gets a no-op meter.
func ServerOption(tp trace.TracerProvider, traced func(fullMethod string) bool) grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(Propagator()),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool { return traced(info.FullMethodName) }),
	))
}

// Store starts the spans of one backend's store operations. A nil *Store
// starts none, at the cost of a nil check.
type Store struct {
	tracer  trace.Tracer
	backend attribute.KeyValue
}

// BackendKey is the attribute naming a store span's backend (memory, redis).
const BackendKey = attribute.Key("coordd.store.backend")

// NewStore returns the store spans of backend from tp; nil if tp is nil.
func NewStore(tp trace.TracerProvider, backend string) *Store {
	if tp == nil {
		return nil
	}
	return &Store{tracer: tp.Tracer(Scope), backend: BackendKey.String(backend)}
}

// Start starts the span of one store operation, a child of ctx's span, named
// "store " + op. op must be one of the store's operation names (a constant),
// never a user's value.
func (s *Store) Start(ctx context.Context, op string) (context.Context, trace.Span) {
	if s == nil {
		return ctx, nil
	}
	return s.tracer.Start(ctx, "store "+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(s.backend))
}

// End ends a span from Start. failed, if not nil, is the store's failure
// (not an answer about state, not the caller giving up; see Failure): the
// span's status is then Error, described only as "store unavailable" or
// "store error", never by the error's text, which may name a key.
func (s *Store) End(span trace.Span, failed error) {
	if span == nil {
		return
	}
	if failed != nil {
		desc := "store error"
		if errors.Is(failed, store.ErrUnavailable) {
			desc = "store unavailable"
		}
		span.SetStatus(codes.Error, desc)
	}
	span.End()
}

// Failure is err if it is a failure of the store, and nil if the store
// answered (an answer about state such as store.ErrNotHeld) or the
// caller gave up (a context error).
func Failure(err error) error {
	if err == nil || store.IsState(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
