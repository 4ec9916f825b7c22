package limiter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/validate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wantField checks that err is a *validate.FieldError naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *validate.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a *validate.FieldError for %q", err, field)
	}
	if fe.Field != field {
		t.Fatalf("err names %q (%v), want %q", fe.Field, err, field)
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, tc := range []struct {
		name string
		want store.Algorithm // 0: an error
	}{
		{"fixed_window", store.FixedWindow},
		{"sliding_window", store.SlidingWindow},
		{"sliding_log", store.SlidingLog},
		{"token_bucket", store.TokenBucket},
		{"leaky_bucket", store.LeakyBucket},
		{"TOKEN_BUCKET", store.TokenBucket},
		{"Leaky_Bucket", store.LeakyBucket},
		{"", 0},
		{"token-bucket", 0},
		{"tokenbucket", 0},
		{" token_bucket", 0},
		{"ALGORITHM_TOKEN_BUCKET", 0},
		{"gcra", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := limiter.ParseAlgorithm(tc.name)
			if tc.want == 0 {
				if err == nil {
					t.Fatalf("ParseAlgorithm(%q) = %v, want an error", tc.name, got)
				}
				if !strings.Contains(err.Error(), "token_bucket") {
					t.Errorf("error %q does not list the valid names", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseAlgorithm(%q) = %v, %v; want %v", tc.name, got, err, tc.want)
			}
		})
	}
}

func TestCheckLimit(t *testing.T) {
	cfg := limiter.Config{MaxLimit: 1000, MaxLogLimit: 10, MaxPeriod: time.Hour, MaxNameBytes: 64}
	s, err := limiter.New(nil, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := func(a store.Algorithm, limit int64, period time.Duration, burst int64) store.Limit {
		return store.Limit{Algorithm: a, Limit: limit, Period: period, Burst: burst}
	}
	const sec = time.Second
	for _, tc := range []struct {
		name  string
		l     store.Limit
		field string // "": valid
	}{
		{"fixed window", lim(store.FixedWindow, 10, sec, 0), ""},
		{"sliding window", lim(store.SlidingWindow, 10, sec, 0), ""},
		{"sliding log", lim(store.SlidingLog, 10, sec, 0), ""},
		{"token bucket", lim(store.TokenBucket, 10, sec, 0), ""},
		{"leaky bucket", lim(store.LeakyBucket, 10, sec, 0), ""},

		{"algorithm unset", lim(0, 10, sec, 0), "limit.algorithm"},
		{"algorithm negative", lim(-1, 10, sec, 0), "limit.algorithm"},
		{"algorithm past the last", lim(store.LeakyBucket+1, 10, sec, 0), "limit.algorithm"},
		{"algorithm checked first", lim(0, 0, 0, -1), "limit.algorithm"},

		{"limit 0", lim(store.FixedWindow, 0, sec, 0), "limit.limit"},
		{"limit negative", lim(store.TokenBucket, -5, sec, 0), "limit.limit"},
		{"limit 1", lim(store.FixedWindow, 1, sec, 0), ""},
		{"limit at max", lim(store.FixedWindow, 1000, sec, 0), ""},
		{"limit max+1", lim(store.FixedWindow, 1001, sec, 0), "limit.limit"},
		{"sliding log at its cap", lim(store.SlidingLog, 10, sec, 0), ""},
		{"sliding log over its cap", lim(store.SlidingLog, 11, sec, 0), "limit.limit"},
		{"sliding window past the log cap", lim(store.SlidingWindow, 11, sec, 0), ""},
		{"token bucket past the log cap", lim(store.TokenBucket, 1000, sec, 0), ""},

		{"period 0", lim(store.FixedWindow, 10, 0, 0), "limit.period"},
		{"period negative", lim(store.FixedWindow, 10, -sec, 0), "limit.period"},
		{"period under 1ms", lim(store.FixedWindow, 10, validate.MinDuration-1, 0), "limit.period"},
		{"period 1ms", lim(store.FixedWindow, 10, validate.MinDuration, 0), ""},
		{"period at max", lim(store.FixedWindow, 10, time.Hour, 0), ""},
		{"period max+1", lim(store.FixedWindow, 10, time.Hour+1, 0), "limit.period"},

		{"burst negative", lim(store.TokenBucket, 10, sec, -1), "limit.burst"},
		{"burst on fixed window", lim(store.FixedWindow, 10, sec, 1), "limit.burst"},
		{"burst on sliding window", lim(store.SlidingWindow, 10, sec, 5), "limit.burst"},
		{"burst on sliding log", lim(store.SlidingLog, 10, sec, 5), "limit.burst"},
		{"token bucket burst 1", lim(store.TokenBucket, 10, sec, 1), ""},
		{"token bucket burst = limit", lim(store.TokenBucket, 10, sec, 10), ""},
		{"token bucket burst > limit", lim(store.TokenBucket, 10, sec, 11), ""},
		{"token bucket burst > max_limit", lim(store.TokenBucket, 10, sec, 1_000_000_001), "limit.burst"},
		{"leaky bucket burst = limit", lim(store.LeakyBucket, 10, sec, 10), ""},
		{"leaky bucket burst > limit", lim(store.LeakyBucket, 10, sec, 11), ""},
		{"leaky bucket burst > max_limit", lim(store.LeakyBucket, 10, sec, 1_000_000_001), "limit.burst"},
		// A bucket at max_period refills within it; only a burst above the
		// limit must refill within max_period.
		{"token bucket period at max, limit 6", lim(store.TokenBucket, 6, time.Hour, 0), ""},
		{"leaky bucket period at max, limit 6, burst 6", lim(store.LeakyBucket, 6, time.Hour, 6), ""},
		{"token bucket burst refilling past max_period", lim(store.TokenBucket, 6, time.Hour, 7), "limit.burst"},
		// 1m / 6 = 10s a token; 360 of them take 1h.
		{"token bucket burst refilling within max_period", lim(store.TokenBucket, 6, time.Minute, 360), ""},
		{"token bucket burst refilling just past max_period", lim(store.TokenBucket, 6, time.Minute, 361), "limit.burst"},

		// Rates the store cannot represent exactly are refused, never
		// rounded: a period of a fraction of a µs, a bucket whose emission
		// interval period/limit is not a whole number of µs.
		{"period not whole µs", lim(store.FixedWindow, 10, sec+time.Nanosecond, 0), "limit.period"},
		{"period not whole µs, token bucket", lim(store.TokenBucket, 10, sec+999*time.Nanosecond, 0), "limit.period"},
		{"token bucket limit not dividing the period", lim(store.TokenBucket, 3, sec, 0), "limit.limit"},
		{"leaky bucket limit not dividing the period", lim(store.LeakyBucket, 7, time.Hour, 7), "limit.limit"},
		{"token bucket interval 1µs", lim(store.TokenBucket, 1000, time.Millisecond, 0), ""},
		{"token bucket interval 3µs", lim(store.TokenBucket, 1000, 3*time.Millisecond, 0), ""},
		{"leaky bucket, 999 in 1ms", lim(store.LeakyBucket, 999, time.Millisecond, 0), "limit.limit"},
		{"fixed window, limit not dividing the period", lim(store.FixedWindow, 3, sec, 0), ""},
		{"sliding window, limit not dividing the period", lim(store.SlidingWindow, 7, time.Hour, 0), ""},
		{"sliding log, limit not dividing the period", lim(store.SlidingLog, 7, sec, 0), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.CheckLimit("limit", tc.l)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("CheckLimit(%+v) = %v, want nil", tc.l, err)
				}
				return
			}
			wantField(t, err, tc.field)
		})
	}
	t.Run("prefix", func(t *testing.T) {
		wantField(t, s.CheckLimit("ratelimit.policies.api", lim(store.FixedWindow, 0, sec, 0)), "ratelimit.policies.api.limit")
	})
}

// TestCheckLimitOverOnePerMicrosecond: a bucket of more than one unit per
// microsecond is refused (the store's emission interval would round to 1µs,
// cutting the rate to half or less); a window of that rate counts exactly.
func TestCheckLimitOverOnePerMicrosecond(t *testing.T) {
	s, err := limiter.New(nil, limiter.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []store.Algorithm{store.TokenBucket, store.LeakyBucket} {
		for _, l := range []int64{2000, 1001, 1_000_000_000} {
			wantField(t, s.CheckLimit("limit", store.Limit{Algorithm: a, Limit: l, Period: time.Millisecond}), "limit.limit")
		}
		if err := s.CheckLimit("limit", store.Limit{Algorithm: a, Limit: 1000, Period: time.Millisecond}); err != nil {
			t.Errorf("one unit per µs: %v", err)
		}
	}
	for _, a := range []store.Algorithm{store.FixedWindow, store.SlidingWindow} {
		if err := s.CheckLimit("limit", store.Limit{Algorithm: a, Limit: 1_000_000_000, Period: time.Millisecond}); err != nil {
			t.Errorf("%v, 1e9 in 1ms: %v", a, err)
		}
	}
	if _, err := s.Allow(t.Context(), limiter.Request{Key: "k", Limit: &store.Limit{Algorithm: store.TokenBucket, Limit: 2000, Period: time.Millisecond}}); err == nil {
		t.Error("Allow with 2 units per µs on a token bucket: no error")
	}
}

// harness is a limiter Service on a Faulty memory store.
type harness struct {
	svc    *limiter.Service
	faulty *storetest.Faulty
	clock  *clock.Fake
}

var policies = map[string]limiter.Policy{
	"open":   {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 2, Period: time.Minute}, OnStoreFailure: limiter.FailOpen},
	"closed": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 2, Period: time.Minute}},
	"shadow": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Minute}, Shadow: true},
	"bucket": {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: time.Second, Burst: 3}},
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c})
	f := storetest.NewFaulty(mem)
	t.Cleanup(func() { _ = f.Close() })
	svc, err := limiter.New(f, limiter.DefaultConfig(), policies)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{svc: svc, faulty: f, clock: c}
}

func inline(limit int64) *store.Limit {
	return &store.Limit{Algorithm: store.FixedWindow, Limit: limit, Period: time.Minute}
}

func TestSetPolicies(t *testing.T) {
	good := store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Second}
	for _, tc := range []struct {
		name     string
		policies map[string]limiter.Policy
		field    string // the field the error names
	}{
		{"bad limit", map[string]limiter.Policy{
			"fine": {Limit: good},
			"bad":  {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 0, Period: time.Second}},
		}, "ratelimit.policies.bad.limit"},
		{"bad algorithm", map[string]limiter.Policy{
			"bad": {Limit: store.Limit{Limit: 5, Period: time.Second}},
		}, "ratelimit.policies.bad.algorithm"},
		{"bad period", map[string]limiter.Policy{
			"bad": {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 5}},
		}, "ratelimit.policies.bad.period"},
		{"empty name", map[string]limiter.Policy{"": {Limit: good}}, "policy"},
		{"control character in name", map[string]limiter.Policy{"a\nb": {Limit: good}}, "policy"},
		{"name too long", map[string]limiter.Policy{strings.Repeat("n", 257): {Limit: good}}, "policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			err := h.svc.SetPolicies(tc.policies)
			wantField(t, err, tc.field)
			// Nothing changed: the old policies answer, the new ones do not.
			if _, err := h.svc.Allow(t.Context(), limiter.Request{Key: "k", Policy: "closed"}); err != nil {
				t.Errorf("an old policy after a rejected SetPolicies: %v", err)
			}
			if _, err := h.svc.Allow(t.Context(), limiter.Request{Key: "k", Policy: "fine"}); err == nil {
				t.Error("a policy of a rejected SetPolicies was installed")
			}
		})
	}
	t.Run("New rejects", func(t *testing.T) {
		_, err := limiter.New(nil, limiter.DefaultConfig(), map[string]limiter.Policy{"bad": {}})
		wantField(t, err, "ratelimit.policies.bad.algorithm")
	})
	t.Run("replaces all", func(t *testing.T) {
		h := newHarness(t)
		if err := h.svc.SetPolicies(map[string]limiter.Policy{"new": {Limit: good}}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Allow(t.Context(), limiter.Request{Key: "k", Policy: "new"}); err != nil {
			t.Errorf("the new policy: %v", err)
		}
		_, err := h.svc.Allow(t.Context(), limiter.Request{Key: "k", Policy: "closed"})
		wantField(t, err, "policy")
	})
}

func TestAllowRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   limiter.Request
		field string
	}{
		{"no key", limiter.Request{Policy: "closed"}, "key"},
		{"control character in key", limiter.Request{Key: "a\x00", Policy: "closed"}, "key"},
		{"neither policy nor limit", limiter.Request{Key: "k"}, "policy"},
		{"both policy and limit", limiter.Request{Key: "k", Policy: "closed", Limit: inline(5)}, "policy"},
		{"unknown policy", limiter.Request{Key: "k", Policy: "nope"}, "policy"},
		{"bad inline limit", limiter.Request{Key: "k", Limit: inline(0)}, "limit.limit"},
		{"negative cost", limiter.Request{Key: "k", Limit: inline(5), Cost: -1}, "cost"},
		{"cost over the limit", limiter.Request{Key: "k", Limit: inline(5), Cost: 6}, "cost"},
		{"cost over the burst", limiter.Request{Key: "k", Policy: "bucket", Cost: 4}, "cost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			_, err := h.svc.Allow(t.Context(), tc.req)
			wantField(t, err, tc.field)
			if n := h.faulty.Calls("Allow"); n != 0 {
				t.Errorf("the store was called %d times for an invalid request", n)
			}
		})
	}
}

func TestAllowDecides(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	for i, want := range []bool{true, true, false} {
		res, err := h.svc.Allow(ctx, limiter.Request{Key: "k", Policy: "closed"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed != want || res.Limit != 2 || res.Degraded || res.ShadowDenied {
			t.Fatalf("call %d: %+v, want Allowed %v, Limit 2", i+1, res, want)
		}
		if !want && res.RetryAfter <= 0 {
			t.Errorf("a denial with RetryAfter %v", res.RetryAfter)
		}
	}
	// Cost 0 means 1, and cost up to the capacity is accepted.
	res, err := h.svc.Allow(ctx, limiter.Request{Key: "c", Limit: inline(5), Cost: 0})
	if err != nil || !res.Allowed || res.Remaining != 4 {
		t.Fatalf("cost 0: %+v, %v; want allowed with 4 remaining", res, err)
	}
	res, err = h.svc.Allow(ctx, limiter.Request{Key: "c", Limit: inline(5), Cost: 4})
	if err != nil || !res.Allowed || res.Remaining != 0 {
		t.Fatalf("cost 4: %+v, %v; want allowed with 0 remaining", res, err)
	}
}

func TestAllowShadow(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	req := limiter.Request{NS: "ns", Key: "k", Policy: "shadow"}
	res, err := h.svc.Allow(ctx, req)
	if err != nil || !res.Allowed || res.ShadowDenied {
		t.Fatalf("first call: %+v, %v; want allowed, not shadow-denied", res, err)
	}
	for i := 0; i < 3; i++ {
		res, err = h.svc.Allow(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Allowed || !res.ShadowDenied || res.RetryAfter != 0 || res.Degraded {
			t.Fatalf("over the limit in shadow mode: %+v; want Allowed, ShadowDenied, RetryAfter 0", res)
		}
	}
	// The store's own answer is still a denial: shadow mode consumed nothing.
	d, err := h.faulty.Inner().Allow(ctx, limiter.StoreKey("ns", "k", "shadow"), policies["shadow"].Limit, 1, true)
	if err != nil || d.Allowed || d.Remaining != 0 {
		t.Errorf("a peek at the store after the shadow denials: %+v, %v; want denied, 0 remaining", d, err)
	}
}

func TestAllowStoreFailure(t *testing.T) {
	errOther := errors.New("some other store error")
	for _, tc := range []struct {
		name     string
		req      limiter.Request
		fault    storetest.Fault
		degraded bool  // Allowed and Degraded, no error
		wantErr  error // otherwise
	}{
		{"fail-open, unavailable", limiter.Request{Key: "k", Policy: "open"},
			storetest.Fault{Fail: true}, true, nil},
		{"fail-open, unavailable after applying", limiter.Request{Key: "k", Policy: "open"},
			storetest.Fault{FailAfter: true}, true, nil},
		{"fail-open, peek", limiter.Request{Key: "k", Policy: "open", Peek: true},
			storetest.Fault{Fail: true}, true, nil},
		{"fail-open, canceled", limiter.Request{Key: "k", Policy: "open"},
			storetest.Fault{Fail: true, Err: context.Canceled}, false, context.Canceled},
		{"fail-open, deadline", limiter.Request{Key: "k", Policy: "open"},
			storetest.Fault{Fail: true, Err: context.DeadlineExceeded}, false, context.DeadlineExceeded},
		{"fail-open, other error", limiter.Request{Key: "k", Policy: "open"},
			storetest.Fault{Fail: true, Err: errOther}, false, errOther},
		{"fail-closed, unavailable", limiter.Request{Key: "k", Policy: "closed"},
			storetest.Fault{Fail: true}, false, store.ErrUnavailable},
		{"fail-closed, unavailable after applying", limiter.Request{Key: "k", Policy: "closed"},
			storetest.Fault{FailAfter: true}, false, store.ErrUnavailable},
		{"shadow fails closed", limiter.Request{Key: "k", Policy: "shadow"},
			storetest.Fault{Fail: true}, false, store.ErrUnavailable},
		{"inline limit, unavailable", limiter.Request{Key: "k", Limit: inline(5)},
			storetest.Fault{Fail: true}, false, store.ErrUnavailable},
		{"inline limit, canceled", limiter.Request{Key: "k", Limit: inline(5)},
			storetest.Fault{Fail: true, Err: context.Canceled}, false, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.faulty.Set("Allow", tc.fault)
			res, err := h.svc.Allow(t.Context(), tc.req)
			if tc.degraded {
				if err != nil {
					t.Fatalf("err = %v, want Allowed and Degraded", err)
				}
				if !res.Allowed || !res.Degraded || res.ShadowDenied || res.Limit != policies["open"].Limit.Limit {
					t.Fatalf("%+v, want Allowed, Degraded, Limit %d", res, policies["open"].Limit.Limit)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != store.ErrUnavailable && errors.Is(err, store.ErrUnavailable) {
				t.Errorf("err = %v is ErrUnavailable", err)
			}
			if res != (limiter.Result{}) {
				t.Errorf("result with an error = %+v, want zero", res)
			}
		})
	}
}

// TestAllowRecovers: once the store answers again, a fail-open policy's
// answers are real decisions, not degraded ones.
func TestAllowRecovers(t *testing.T) {
	h := newHarness(t)
	h.faulty.Set("Allow", storetest.Fault{Fail: true, Times: 1})
	res, err := h.svc.Allow(t.Context(), limiter.Request{Key: "k", Policy: "open"})
	if err != nil || !res.Degraded {
		t.Fatalf("during the fault: %+v, %v; want degraded", res, err)
	}
	for i, want := range []bool{true, true, false} {
		res, err := h.svc.Allow(t.Context(), limiter.Request{Key: "k", Policy: "open"})
		if err != nil || res.Degraded || res.Allowed != want {
			t.Fatalf("call %d after the fault: %+v, %v; want Allowed %v, not degraded", i+1, res, err, want)
		}
	}
}

// TestPoliciesKeepSeparateState: two named policies with equal parameters
// never share a counter, nor a cached denial, nor does an inline limit with
// the same parameters.
func TestPoliciesKeepSeparateState(t *testing.T) {
	equal := store.Limit{Algorithm: store.FixedWindow, Limit: 2, Period: time.Minute}
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c})
	f := storetest.NewFaulty(mem)
	t.Cleanup(func() { _ = f.Close() })
	svc, err := limiter.New(f, limiter.DefaultConfig(), map[string]limiter.Policy{
		"a": {Limit: equal}, "b": {Limit: equal},
	}, limiter.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	allow := func(r limiter.Request) limiter.Result {
		t.Helper()
		res, err := svc.Allow(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a := limiter.Request{NS: "ns", Key: "k", Policy: "a"}
	for i, want := range []bool{true, true, false} {
		if res := allow(a); res.Allowed != want {
			t.Fatalf("policy a, call %d: %+v, want allowed %v", i+1, res, want)
		}
	}
	if res := allow(a); res.Allowed || !res.Cached {
		t.Fatalf("policy a, call 4: %+v, want its denial from the deny cache", res)
	}
	calls := f.Calls("Allow")
	for _, r := range []limiter.Request{
		{NS: "ns", Key: "k", Policy: "b"},
		{NS: "ns", Key: "k", Limit: &equal},
	} {
		if res := allow(r); !res.Allowed || res.Cached || res.Remaining != 1 {
			t.Errorf("%+v after policy a is exhausted: %+v, want its own state's first admission (1 remaining)", r, res)
		}
	}
	if n := f.Calls("Allow"); n != calls+2 {
		t.Errorf("%d store calls for policy b and the inline limit, want 2", n-calls)
	}
	if res := allow(a); res.Allowed {
		t.Errorf("policy a after the others: %+v, want still denied", res)
	}
}
