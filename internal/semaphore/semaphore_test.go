package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/semaphore"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = "ns"

type harness struct {
	svc    *semaphore.Service
	mem    *memory.Store
	faulty *storetest.Faulty
	clock  *clock.Fake
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c})
	f := storetest.NewFaulty(mem)
	drain := make(chan struct{})
	queues := hold.NewWaiters(f, f, drain)
	svc := semaphore.New(f, queues, c, semaphore.DefaultConfig(), drain)
	t.Cleanup(func() { close(drain); queues.Close(); svc.Wait(); _ = f.Close() })
	return &harness{svc: svc, mem: mem, faulty: f, clock: c}
}

func (h *harness) info(t *testing.T, name string) store.HoldInfo {
	t.Helper()
	info, err := h.mem.GetHolds(t.Context(), store.HoldSemaphore, store.Scope(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSemaphorePermits: at most limit holders, each with its own token and
// a greater fence; a release lets the next one in.
func TestSemaphorePermits(t *testing.T) {
	h := newHarness(t)
	var grants []hold.Grant
	for i := range 3 {
		g, err := h.svc.Acquire(t.Context(), semaphore.Request{NS: ns, Name: "s", Owner: "o", Limit: 3, TTL: time.Minute})
		if err != nil || !g.Acquired || !token.Valid(g.Token) || g.Holders != i+1 || g.Limit != 3 {
			t.Fatalf("permit %d: %+v, %v", i, g, err)
		}
		if i > 0 && g.Fence <= grants[i-1].Fence {
			t.Errorf("fence %d after %d", g.Fence, grants[i-1].Fence)
		}
		grants = append(grants, g)
	}
	g, err := h.svc.Acquire(t.Context(), semaphore.Request{NS: ns, Name: "s", Owner: "o", Limit: 3, TTL: time.Minute})
	if err != nil || g.Acquired || g.Token != "" || g.Holders != 3 {
		t.Fatalf("fourth: %+v, %v; want not acquired, 3 holders", g, err)
	}
	info, err := h.svc.Get(t.Context(), ns, "s")
	if err != nil || len(info.Holders) != 3 || info.Limit != 3 {
		t.Fatalf("Get: %+v, %v", info, err)
	}
	if _, err := h.svc.Renew(t.Context(), ns, "s", grants[0].Token, 2*time.Minute); err != nil {
		t.Errorf("Renew: %v", err)
	}
	done := make(chan hold.Grant, 1)
	go func() {
		g, err := h.svc.Acquire(t.Context(), semaphore.Request{NS: ns, Name: "s", Limit: 3, TTL: time.Minute, Wait: 30 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- g
	}()
	waitFor(t, "the waiter's ticket", func() bool { return h.info(t, "s").Waiters == 1 })
	if ok, _, err := h.svc.Release(t.Context(), ns, "s", grants[1].Token); err != nil || !ok {
		t.Fatalf("Release: %v, %v", ok, err)
	}
	if g := <-done; !g.Acquired || !g.Contended {
		t.Fatalf("waiter: %+v; want acquired after the release, contended", g)
	}
}

// TestSemaphoreLimitMismatch: another limit while the semaphore has holders
// is the store's ErrLimitMismatch, and nothing is cleaned up for it.
func TestSemaphoreLimitMismatch(t *testing.T) {
	h := newHarness(t)
	if g, err := h.svc.Acquire(t.Context(), semaphore.Request{NS: ns, Name: "s", Limit: 2, TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	for _, wait := range []time.Duration{0, time.Second} {
		if _, err := h.svc.Acquire(t.Context(), semaphore.Request{NS: ns, Name: "s", Limit: 3, TTL: time.Minute, Wait: wait}); !errors.Is(err, store.ErrLimitMismatch) {
			t.Errorf("wait %v: err = %v, want ErrLimitMismatch", wait, err)
		}
	}
	if n := h.faulty.Calls("AbandonHold"); n != 0 {
		t.Errorf("AbandonHold called %d times after a mismatch, want 0", n)
	}
}

// TestSemaphoreNeverOverLimit: many concurrent waiters; at no moment more
// than limit hold a permit.
func TestSemaphoreNeverOverLimit(t *testing.T) {
	h := newHarness(t)
	const limit, n = 3, 24
	var holding, most atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := h.svc.Acquire(t.Context(), semaphore.Request{NS: ns, Name: "s", Limit: limit, TTL: time.Minute, Wait: 30 * time.Second})
			if err != nil || !g.Acquired {
				t.Errorf("%+v, %v", g, err)
				return
			}
			c := holding.Add(1)
			for m := most.Load(); c > m && !most.CompareAndSwap(m, c); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			holding.Add(-1)
			if _, _, err := h.svc.Release(context.Background(), ns, "s", g.Token); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Errorf("%d held at once, limit %d", m, limit)
	}
}

// TestSemaphoreUncertainGrantCleanedUp: a grant whose answer was lost is
// abandoned by its token (the clean-up shared with locks).
func TestSemaphoreUncertainGrantCleanedUp(t *testing.T) {
	h := newHarness(t)
	h.faulty.FailAfter("AcquireHold")
	if _, err := h.svc.Acquire(t.Context(), semaphore.Request{NS: ns, Name: "s", Limit: 2, TTL: time.Minute}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := h.faulty.Calls("AbandonHold"); n != 1 {
		t.Errorf("AbandonHold called %d times, want 1", n)
	}
	if info := h.info(t, "s"); len(info.Holders) != 0 {
		t.Errorf("holders after the clean-up: %+v", info.Holders)
	}
}

// TestBadRequests: every bad field is INVALID_ARGUMENT naming it, before
// any store call.
func TestBadRequests(t *testing.T) {
	h := newHarness(t)
	max := semaphore.DefaultConfig().MaxLimit
	long := strings.Repeat("x", semaphore.DefaultConfig().MaxNameBytes+1)
	ok := semaphore.Request{NS: ns, Name: "s", Limit: 1}
	with := func(f func(*semaphore.Request)) semaphore.Request { r := ok; f(&r); return r }
	for _, tc := range []struct {
		field string
		req   semaphore.Request
	}{
		{"name", with(func(r *semaphore.Request) { r.Name = "" })},
		{"name", with(func(r *semaphore.Request) { r.Name = long })},
		{"limit", with(func(r *semaphore.Request) { r.Limit = 0 })},
		{"limit", with(func(r *semaphore.Request) { r.Limit = -1 })},
		{"limit", with(func(r *semaphore.Request) { r.Limit = max + 1 })},
		{"owner", with(func(r *semaphore.Request) { r.Owner = "a\x00" })},
		{"session_id", with(func(r *semaphore.Request) { r.SessionID = "x" })},
		{"ttl", with(func(r *semaphore.Request) { r.SessionID, r.TTL = token.New(), time.Second })},
		{"ttl", with(func(r *semaphore.Request) { r.TTL = 2 * time.Hour })},
		{"max_hold", with(func(r *semaphore.Request) { r.MaxHold = time.Microsecond })},
		{"wait", with(func(r *semaphore.Request) { r.Wait = -time.Second })},
	} {
		before := h.faulty.CallCounts()
		_, err := h.svc.Acquire(t.Context(), tc.req)
		var fe *validate.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: err = %v, want a FieldError for %q", tc.req, err, tc.field)
		}
		if made := h.faulty.CallsSince(before); len(made) != 0 {
			t.Errorf("%s: store calls %v before the check", tc.field, made)
		}
	}
	if g, err := h.svc.Acquire(t.Context(), with(func(r *semaphore.Request) { r.Limit = max })); err != nil || !g.Acquired {
		t.Errorf("limit = max_limit: %+v, %v; want acquired", g, err)
	}
	for _, call := range []func() error{
		func() error { _, err := h.svc.Renew(t.Context(), ns, "s", "x", time.Second); return err },
		func() error { _, _, err := h.svc.Release(t.Context(), ns, "", token.New()); return err },
		func() error { _, err := h.svc.Get(t.Context(), ns, long); return err },
	} {
		if err := call(); !validate.IsFieldError(err) {
			t.Errorf("err = %v, want a FieldError", err)
		}
	}
}
