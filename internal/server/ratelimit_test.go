package server_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
)

func (h *harness) allow(t testing.TB, req *coordv1.AllowRequest) *coordv1.AllowResponse {
	t.Helper()
	resp, err := h.limits.Allow(ctx(t), req)
	if err != nil {
		t.Fatalf("Allow(%v): %v", req, err)
	}
	return resp
}

func inline(alg coordv1.Algorithm, limit int64, period time.Duration, burst int64) *coordv1.Limit {
	return &coordv1.Limit{Algorithm: alg, Limit: limit, Period: dur(period), Burst: burst}
}

// admitted counts how many of n calls are allowed at the current instant.
func (h *harness) admitted(t testing.TB, key string, l *coordv1.Limit, n int) int {
	t.Helper()
	got := 0
	for i := 0; i < n; i++ {
		if h.allow(t, &coordv1.AllowRequest{Key: key, Limit: l}).GetAllowed() {
			got++
		}
	}
	return got
}

func TestFixedWindowBoundaryBurst(t *testing.T) {
	h := newHarness(t, withFakeClock)
	l := inline(coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, 5, time.Second, 0)
	h.clock.Advance(999 * time.Millisecond) // the last millisecond of a window
	if n := h.admitted(t, "fw", l, 10); n != 5 {
		t.Fatalf("admitted %d at the end of a window, want 5", n)
	}
	h.clock.Advance(time.Millisecond) // the next window
	if n := h.admitted(t, "fw", l, 10); n != 5 {
		t.Fatalf("admitted %d at the start of the next window, want 5", n)
	}
	// 10 admissions within 1ms: 2x the limit across the boundary, as documented.
}

// TestSlidingLogNeverExceedsLimit drives a dense random schedule and checks
// every window of one period.
func TestSlidingLogNeverExceedsLimit(t *testing.T) {
	h := newHarness(t, withFakeClock)
	const limit, period = 10, time.Second
	l := inline(coordv1.Algorithm_ALGORITHM_SLIDING_LOG, limit, period, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	var admitted []time.Time
	for i := 0; i < 2000; i++ {
		h.clock.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
		if h.allow(t, &coordv1.AllowRequest{Key: "log", Limit: l}).GetAllowed() {
			admitted = append(admitted, h.clock.Now())
		}
	}
	for i := range admitted {
		n := 0
		for j := i; j < len(admitted) && admitted[j].Sub(admitted[i]) < period; j++ {
			n++
		}
		if n > limit {
			t.Fatalf("%d admissions in the period from %v", n, admitted[i])
		}
	}
	if len(admitted) < 2000*15/1000*limit/2 {
		t.Fatalf("only %d admissions: the log is too strict", len(admitted))
	}
}

func TestTokenBucketBurstThenRefill(t *testing.T) {
	h := newHarness(t, withFakeClock)
	l := inline(coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, 10, time.Second, 5) // 10/s, bucket of 5
	if n := h.admitted(t, "tb", l, 20); n != 5 {
		t.Fatalf("admitted %d from a full bucket, want its burst 5", n)
	}
	for i := 0; i < 10; i++ {
		h.clock.Advance(100 * time.Millisecond) // one token per 100ms
		if n := h.admitted(t, "tb", l, 3); n != 1 {
			t.Fatalf("refill %d: admitted %d, want 1", i, n)
		}
	}
	h.clock.Advance(time.Second) // refills to the burst, not beyond
	if n := h.admitted(t, "tb", l, 20); n != 5 {
		t.Fatalf("admitted %d after a long idle, want 5", n)
	}
}

func TestLeakyBucketSpacesAdmissions(t *testing.T) {
	h := newHarness(t, withFakeClock)
	l := inline(coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET, 10, time.Second, 0) // one per 100ms
	var at []time.Duration
	for step := 0; step < 1000; step++ { // try every millisecond for a second
		if h.allow(t, &coordv1.AllowRequest{Key: "lb", Limit: l}).GetAllowed() {
			at = append(at, h.clock.Now().Sub(epoch))
		}
		h.clock.Advance(time.Millisecond)
	}
	if len(at) != 10 {
		t.Fatalf("admitted at %v, want 10 admissions", at)
	}
	for i := range at {
		if want := time.Duration(i) * 100 * time.Millisecond; at[i] != want {
			t.Fatalf("admitted at %v, want every 100ms", at)
		}
	}
}

// TestRetryAfterIsExact: for every algorithm, a denied call retried exactly
// retry_after later succeeds, and one microsecond earlier fails.
func TestRetryAfterIsExact(t *testing.T) {
	algs := []coordv1.Algorithm{
		coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, coordv1.Algorithm_ALGORITHM_SLIDING_WINDOW,
		coordv1.Algorithm_ALGORITHM_SLIDING_LOG, coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET,
		coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET,
	}
	for _, alg := range algs {
		for _, cost := range []int64{1, 2} {
			t.Run(fmt.Sprintf("%v/cost%d", alg, cost), func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, withFakeClock)
				burst, period := int64(0), time.Second
				if alg == coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET {
					burst = 2
				}
				if alg == coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET || alg == coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET {
					period = 999_999 * time.Microsecond // a bucket's 3 must divide its period: 333,333µs a unit
				}
				l := inline(alg, 3, period, burst)
				rng := rand.New(rand.NewPCG(uint64(alg), uint64(cost)))
				for round := 0; round < 30; round++ {
					h.clock.Advance(time.Duration(rng.IntN(700_000)) * time.Microsecond)
					req := &coordv1.AllowRequest{Key: "k", Limit: l, Cost: cost}
					var d *coordv1.AllowResponse
					for d = h.allow(t, req); d.GetAllowed(); d = h.allow(t, req) {
					}
					retry := d.GetRetryAfter().AsDuration()
					if retry <= 0 {
						t.Fatalf("round %d: denied with retry_after %v", round, retry)
					}
					h.clock.Advance(retry - time.Microsecond)
					if again := h.allow(t, req); again.GetAllowed() {
						t.Fatalf("round %d: allowed 1µs before retry_after %v", round, retry)
					}
					h.clock.Advance(time.Microsecond)
					if again := h.allow(t, req); !again.GetAllowed() {
						t.Fatalf("round %d: denied at retry_after %v: %v", round, retry, again)
					}
				}
			})
		}
	}
}

func TestDenialAndPeekConsumeNothing(t *testing.T) {
	h := newHarness(t, withFakeClock)
	l := inline(coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, 3, 999_999*time.Microsecond, 0) // 333,333µs a token
	peek := h.allow(t, &coordv1.AllowRequest{Key: "p", Limit: l, Peek: true})
	if !peek.GetAllowed() || peek.GetRemaining() != 2 || peek.GetLimit() != 3 {
		t.Fatalf("peek = %v, want allowed with 2 remaining", peek)
	}
	if n := h.admitted(t, "p", l, 3); n != 3 {
		t.Fatalf("admitted %d after a peek, want all 3", n)
	}
	denied := h.allow(t, &coordv1.AllowRequest{Key: "p", Limit: l, Cost: 1})
	if denied.GetAllowed() || denied.GetRemaining() != 0 {
		t.Fatalf("Allow on an empty bucket = %v", denied)
	}
	h.clock.Advance(denied.GetRetryAfter().AsDuration())
	for i := 0; i < 5; i++ { // denials and peeks in between take nothing
		h.allow(t, &coordv1.AllowRequest{Key: "p", Limit: l, Cost: 2})
		h.allow(t, &coordv1.AllowRequest{Key: "p", Limit: l, Peek: true})
	}
	if !h.allow(t, &coordv1.AllowRequest{Key: "p", Limit: l}).GetAllowed() {
		t.Fatal("the token refilled by retry_after was taken by a denial or a peek")
	}
}

func withPolicies(p map[string]limiter.Policy) func(*config) {
	return func(c *config) { c.services.Policies = p }
}

func TestPolicyShadowAndNamedLimit(t *testing.T) {
	h := newHarness(t, withFakeClock, withPolicies(map[string]limiter.Policy{
		"api":    {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 2, Period: time.Minute}},
		"shadow": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Minute}, Shadow: true},
	}))
	var got []bool
	for i := 0; i < 3; i++ {
		got = append(got, h.allow(t, &coordv1.AllowRequest{Key: "u", Policy: "api"}).GetAllowed())
	}
	if fmt.Sprint(got) != "[true true false]" {
		t.Fatalf("policy api admitted %v, want [true true false]", got)
	}
	first := h.allow(t, &coordv1.AllowRequest{Key: "u", Policy: "shadow"})
	second := h.allow(t, &coordv1.AllowRequest{Key: "u", Policy: "shadow"})
	if !first.GetAllowed() || first.GetShadowDenied() || !second.GetAllowed() || !second.GetShadowDenied() {
		t.Fatalf("shadow policy answered %v then %v, want allowed twice, the second a shadow denial", first, second)
	}
}

// TestTokenBucketBurstAboveLimit: a bucket larger than one period's worth
// lets a quiet key take it all at once, then refills at limit/period.
func TestTokenBucketBurstAboveLimit(t *testing.T) {
	h := newHarness(t, withFakeClock)
	l := inline(coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, 10, time.Second, 25) // 10/s, bucket of 25
	if n := h.admitted(t, "big", l, 40); n != 25 {
		t.Fatalf("admitted %d from a full bucket, want its burst 25", n)
	}
	h.clock.Advance(time.Second)
	if n := h.admitted(t, "big", l, 40); n != 10 {
		t.Fatalf("admitted %d after a second, want the refill of 10", n)
	}
}

// TestNamedPoliciesKeepSeparateCounters: two named policies with equal
// parameters each have their own state, for every algorithm, apart from
// each other and from an inline limit with the same parameters.
func TestNamedPoliciesKeepSeparateCounters(t *testing.T) {
	algs := map[string]store.Algorithm{
		"fixed": store.FixedWindow, "sliding": store.SlidingWindow, "log": store.SlidingLog,
		"token": store.TokenBucket, "leaky": store.LeakyBucket,
	}
	ps := map[string]limiter.Policy{}
	for name, a := range algs {
		l := store.Limit{Algorithm: a, Limit: 2, Period: time.Minute}
		ps[name+"-a"], ps[name+"-b"] = limiter.Policy{Limit: l}, limiter.Policy{Limit: l}
	}
	h := newHarness(t, withFakeClock, withPolicies(ps))
	for name, a := range algs {
		l := ps[name+"-a"].Limit
		capacity := l.Capacity()
		var n int64
		for h.allow(t, &coordv1.AllowRequest{Key: "u", Policy: name + "-a"}).GetAllowed() {
			if n++; n > capacity {
				t.Fatalf("policy %s-a admitted more than its capacity %d", name, capacity)
			}
		}
		for _, req := range []*coordv1.AllowRequest{
			{Key: "u", Policy: name + "-b"},
			{Key: "u", Limit: inline(coordv1.Algorithm(a), l.Limit, l.Period, 0)},
		} {
			if resp := h.allow(t, req); !resp.GetAllowed() || resp.GetRemaining() != capacity-1 {
				t.Errorf("%v after policy %s-a took all %d: %v, want its own first admission (%d remaining)", req, name, n, resp, capacity-1)
			}
		}
		if resp := h.allow(t, &coordv1.AllowRequest{Key: "u", Policy: name + "-a"}); resp.GetAllowed() {
			t.Errorf("policy %s-a after the others: %v, want still denied", name, resp)
		}
	}
}

// TestPolicyOfSeveralLimits: through the API, a policy of several limits
// allows a call only if all allow it; a denial names the limit (denied_by)
// and takes from none.
func TestPolicyOfSeveralLimits(t *testing.T) {
	h := newHarness(t, withFakeClock, withPolicies(map[string]limiter.Policy{
		"tiered": {Limits: []limiter.NamedLimit{
			{Name: "burst", Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 600, Period: time.Minute, Burst: 3}},
			{Name: "per-hour", Limit: store.Limit{Algorithm: store.SlidingLog, Limit: 4, Period: time.Hour}},
		}},
	}))
	req := &coordv1.AllowRequest{Key: "u", Policy: "tiered"}
	var got []string
	for range 5 {
		r := h.allow(t, req)
		got = append(got, fmt.Sprintf("%v/%s/%d", r.GetAllowed(), r.GetDeniedBy(), r.GetLimit()))
	}
	if want := "[true//600 true//600 true//600 false/burst/600 false/burst/600]"; fmt.Sprint(got) != want {
		t.Fatalf("answers %v, want %s", got, want)
	}
	h.clock.Advance(time.Second) // the bucket refills 10: the log has one left
	r := h.allow(t, req)
	if !r.GetAllowed() || r.GetRemaining() != 0 || r.GetLimit() != 4 {
		t.Fatalf("a second later: %v, want allowed, the log's limit (4) at 0", r)
	}
	r = h.allow(t, req)
	if r.GetAllowed() || r.GetDeniedBy() != "per-hour" || r.GetRetryAfter().AsDuration() != time.Hour-time.Second {
		t.Fatalf("then: %v, want denied by per-hour until the first entry leaves (59m59s)", r)
	}
}

// TestAllowWait: through the API, a denied Allow with wait is allowed at
// its retry_after, and one that cannot be within its wait is answered at
// once.
func TestAllowWait(t *testing.T) {
	h := newHarness(t)
	l := inline(coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET, 1, 200*time.Millisecond, 0)
	if !h.allow(t, &coordv1.AllowRequest{Key: "w", Limit: l}).GetAllowed() {
		t.Fatal("first call denied")
	}
	start := time.Now()
	r := h.allow(t, &coordv1.AllowRequest{Key: "w", Limit: l, Wait: dur(5 * time.Second)})
	if took := time.Since(start); !r.GetAllowed() || took < 150*time.Millisecond {
		t.Fatalf("a waiting call: %v after %v, want allowed at the retry_after (about 200ms)", r, took)
	}
	r = h.allow(t, &coordv1.AllowRequest{Key: "w", Limit: l, Wait: dur(50 * time.Millisecond)})
	if r.GetAllowed() || r.GetRetryAfter().AsDuration() <= 50*time.Millisecond {
		t.Fatalf("a call whose retry_after lies beyond its wait: %v, want denied", r)
	}
}
