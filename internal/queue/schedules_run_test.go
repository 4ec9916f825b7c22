package queue_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
)

// TestSchedulePasses: three services on one store, each missing passes at
// random (a slow or dead instance), running their passes at once: every
// tick of @every 1s over 100 ticks has exactly one message; after 30s with
// no pass, one message for the latest tick, the 29 before counted missed.
func TestSchedulePasses(t *testing.T) {
	start := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	st := memory.New(memory.Options{Clock: clk})
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	svcs := make([]*queue.Service, 3)
	for i := range svcs {
		svcs[i] = queue.New(st, st, clk, queue.DefaultConfig(), nil)
	}
	if _, err := svcs[0].PutSchedule(ctx, queue.ScheduleRequest{NS: "ns", Queue: "q", Name: "s", Spec: "@every 1s"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ticked, missed := 0, 0
	hooks := queue.ScheduleHooks{
		Ticked: func() { mu.Lock(); ticked++; mu.Unlock() },
		Missed: func(n int) { mu.Lock(); missed += n; mu.Unlock() },
		Failed: func(ns, q, name string, err error) { t.Errorf("%s/%s/%s: %v", ns, q, name, err) },
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		clk.Advance(time.Second)
		var wg sync.WaitGroup
		ran := false
		for i, svc := range svcs {
			if r.IntN(3) == 0 && (ran || i < 2) { // this one missed its pass (not all three)
				continue
			}
			ran = true
			wg.Go(func() { svc.SchedulePass(ctx, hooks) })
		}
		wg.Wait()
	}
	q := store.Scope("ns", "q")
	if st, err := st.Stats(ctx, q); err != nil || st.Ready != 100 {
		t.Fatalf("after 100 ticks: %+v, %v; want 100 ready", st, err)
	}
	if ticked != 100 || missed != 0 {
		t.Fatalf("hooks: %d ticked, %d missed; want 100, 0", ticked, missed)
	}
	clk.Advance(30 * time.Second) // every instance down
	svcs[1].SchedulePass(ctx, hooks)
	svcs[2].SchedulePass(ctx, hooks)
	if st, err := st.Stats(ctx, q); err != nil || st.Ready != 101 {
		t.Fatalf("after a 30s outage: %+v, %v; want one more", st, err)
	}
	if missed != 29 {
		t.Fatalf("missed %d, want 29", missed)
	}
}
