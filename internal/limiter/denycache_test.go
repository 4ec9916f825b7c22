package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
)

// denyHarness is a limiter on a memory store behind a Faulty (to count the
// store's calls), with one clock for both.
func denyHarness(t *testing.T, maxAge time.Duration) (*limiter.Service, *storetest.Faulty, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: clk})
	t.Cleanup(func() { _ = mem.Close() })
	f := storetest.NewFaulty(mem)
	cfg := limiter.DefaultConfig()
	cfg.DenyCacheMaxAge = maxAge
	s, err := limiter.New(f, cfg, map[string]limiter.Policy{
		"shadow": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Minute}, Shadow: true},
	}, limiter.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	return s, f, clk
}

// TestDenyCacheAnswersLikeTheStore: a key over its limit is denied from the
// cache, with the store's retry_after moved on, without asking the store;
// at retry_after (or maxAge) the store is asked again, and admits.
func TestDenyCacheAnswersLikeTheStore(t *testing.T) {
	s, f, clk := denyHarness(t, time.Hour)
	lim := &store.Limit{Algorithm: store.TokenBucket, Limit: 2, Period: time.Second} // one per 500ms, burst 2
	allow := func(cost int64) limiter.Result {
		t.Helper()
		r, err := s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "k", Limit: lim, Cost: cost})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	allow(1)
	allow(1)
	first := allow(1)
	if first.Allowed || first.Cached || first.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third call = %+v, want the store's denial, retry after 500ms", first)
	}
	calls := f.Calls("Allow")
	clk.Advance(200 * time.Millisecond)
	again := allow(1)
	if again.Allowed || !again.Cached || again.RetryAfter != 300*time.Millisecond || f.Calls("Allow") != calls {
		t.Fatalf("a call 200ms later = %+v (store calls %d→%d), want the cached denial, retry after 300ms", again, calls, f.Calls("Allow"))
	}
	// A larger cost is denied too, but needs longer than the cached
	// retry_after: the store answers it, exactly.
	if big := allow(2); big.Allowed || big.Cached || big.RetryAfter != 800*time.Millisecond {
		t.Fatalf("a larger cost = %+v, want the store's denial, retry after 800ms", big)
	}
	clk.Advance(300 * time.Millisecond)
	if ok := allow(1); !ok.Allowed || ok.Cached {
		t.Fatalf("a call at retry_after = %+v, want the store's admission", ok)
	}
}

// TestDenyCacheKeyedByLimit: a denial under one limit says nothing of
// another (a changed policy never meets a stale entry), nor of a smaller
// cost.
func TestDenyCacheKeyedByLimit(t *testing.T) {
	s, f, _ := denyHarness(t, time.Hour)
	small := &store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Minute}
	big := &store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Minute}
	for i := 0; i < 2; i++ {
		_, _ = s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "k", Limit: small})
	}
	calls := f.Calls("Allow")
	r, err := s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "k", Limit: big})
	if err != nil || !r.Allowed || r.Cached || f.Calls("Allow") != calls+1 {
		t.Fatalf("the same key under another limit = %+v, %v; want the store asked, and admitting", r, err)
	}
	bucket := &store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: time.Second, Burst: 5}
	_, _ = s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "b", Limit: bucket, Cost: 5})
	denied, _ := s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "b", Limit: bucket, Cost: 5})
	smaller, _ := s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "b", Limit: bucket, Cost: 1})
	if denied.Allowed || smaller.Cached {
		t.Fatalf("cost 5 then cost 1 = %+v, %+v; want a denial, then the store asked for the smaller cost", denied, smaller)
	}
}

// TestDenyCacheMaxAge: an entry is answered for at most maxAge, even when
// retry_after is further away.
func TestDenyCacheMaxAge(t *testing.T) {
	s, f, clk := denyHarness(t, 100*time.Millisecond)
	lim := &store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Hour}
	for i := 0; i < 2; i++ {
		_, _ = s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "k", Limit: lim})
	}
	clk.Advance(99 * time.Millisecond)
	if r, _ := s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "k", Limit: lim}); !r.Cached {
		t.Fatalf("99ms after the denial: %+v, want it cached", r)
	}
	calls := f.Calls("Allow")
	clk.Advance(time.Millisecond)
	if r, _ := s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "k", Limit: lim}); r.Cached || r.Allowed || f.Calls("Allow") != calls+1 {
		t.Fatalf("100ms after the denial: %+v, want the store asked again (and denying)", r)
	}
}

// TestDenyCacheShadow: a shadow policy's cached denial is still allowed and
// marked.
func TestDenyCacheShadow(t *testing.T) {
	s, _, _ := denyHarness(t, time.Hour)
	var last limiter.Result
	for i := 0; i < 3; i++ {
		last, _ = s.Allow(context.Background(), limiter.Request{NS: "ns", Key: "k", Policy: "shadow"})
	}
	if !last.Allowed || !last.ShadowDenied || !last.Cached {
		t.Fatalf("third shadow call = %+v, want allowed, shadow-denied, from the cache", last)
	}
}
