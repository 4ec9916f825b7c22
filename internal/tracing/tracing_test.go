package tracing_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStoreSpanStatus: a store call that fails has an Error span described
// only by the kind of failure; an answer about state (ErrNotHeld) is no
// failure; and no tracer provider means no wrapper at all.
func TestStoreSpanStatus(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mem := memory.New(memory.Options{})
	defer mem.Close()
	faulty := storetest.NewFaulty(mem)
	st := tracing.WrapStore(faulty, tracing.NewStore(tp, "memory"))
	ctx := context.Background()

	faulty.Fail("AcquireHold")
	if _, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "default:n", Owner: "o", TTL: time.Minute}); err == nil {
		t.Fatal("AcquireHold: no error")
	}
	if _, err := st.RenewHold(ctx, store.HoldLock, "default:n", "5ec7e75ec7e75ec7e75ec7e75ec7e7ab", time.Minute); err == nil {
		t.Fatal("RenewHold: no error")
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if s := spans[0]; s.Name() != "store AcquireHold" || s.Status().Code != codes.Error || s.Status().Description != "store unavailable" {
		t.Errorf("failed call: span %q, status %v", s.Name(), s.Status())
	}
	if s := spans[1]; s.Name() != "store RenewHold" || s.Status().Code != codes.Unset {
		t.Errorf("ErrNotHeld: span %q, status %v", s.Name(), s.Status())
	}
	if got := tracing.WrapStore(mem, tracing.NewStore(nil, "memory")); got != store.Store(mem) {
		t.Errorf("tracing off: WrapStore returned %T, want the store itself", got)
	}
}
