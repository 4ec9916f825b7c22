package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
)

var (
	perSecond = limiter.NamedLimit{Name: "per-second", Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 2, Period: time.Second}}
	perMinute = limiter.NamedLimit{Name: "per-minute", Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 3, Period: time.Minute}}
	burst     = limiter.NamedLimit{Name: "burst", Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 60, Period: time.Minute, Burst: 4}}
)

// TestPolicyOfSeveralLimits: a call is allowed only if every limit of the
// policy allows it; a denial names its limit and takes from none.
func TestPolicyOfSeveralLimits(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_020, 0)) // on a minute boundary
	f := storetest.NewFaulty(memory.New(memory.Options{Clock: c}))
	t.Cleanup(func() { _ = f.Close() })
	svc, err := limiter.New(f, limiter.DefaultConfig(), map[string]limiter.Policy{
		"tiered": {Limits: []limiter.NamedLimit{perSecond, perMinute}},
	}, limiter.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	allow := func(what string, want bool, deniedBy string, limit int64) {
		t.Helper()
		res, err := svc.Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "tiered"})
		if err != nil || res.Allowed != want || res.DeniedBy != deniedBy || res.Limit != limit {
			t.Fatalf("%s: %+v, %v; want allowed %v, denied by %q, limit %d", what, res, err, want, deniedBy, limit)
		}
	}
	allow("first", true, "", 2)
	allow("second", true, "", 2)
	allow("third in the second", false, "per-second", 2)
	c.Advance(time.Second)
	// per-second took two, per-minute two: the denial took from neither.
	allow("third, a second later", true, "", 3)
	allow("fourth", false, "per-minute", 3)
	if _, err := svc.Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "tiered", Cost: 3}); err == nil {
		t.Error("cost 3 with a per-second limit of 2: no error")
	} else {
		wantField(t, err, "cost")
	}
}

// TestSeveralLimitsDenyCache: a denial under several limits is answered
// from the deny cache with its limit's name, and a policy whose later limit
// changes never meets an entry of the old one.
func TestSeveralLimitsDenyCache(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_020, 0))
	f := storetest.NewFaulty(memory.New(memory.Options{Clock: c}))
	t.Cleanup(func() { _ = f.Close() })
	svc, err := limiter.New(f, limiter.DefaultConfig(), map[string]limiter.Policy{
		"tiered": {Limits: []limiter.NamedLimit{burst, perMinute}},
	}, limiter.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	req := limiter.Request{NS: "ns", Key: "k", Policy: "tiered"}
	for range 3 {
		if res, err := svc.Allow(t.Context(), req); err != nil || !res.Allowed {
			t.Fatalf("allowed calls: %+v, %v", res, err)
		}
	}
	res, err := svc.Allow(t.Context(), req)
	if err != nil || res.Allowed || res.DeniedBy != "per-minute" || res.Cached {
		t.Fatalf("the denial: %+v, %v", res, err)
	}
	calls := f.Calls("AllowAll")
	res, err = svc.Allow(t.Context(), req)
	if err != nil || res.Allowed || res.DeniedBy != "per-minute" || !res.Cached || f.Calls("AllowAll") != calls {
		t.Fatalf("the denial again: %+v, %v (%d store calls); want it from the cache", res, err, f.Calls("AllowAll")-calls)
	}
	looser := perMinute
	looser.Limit.Limit = 30
	if err := svc.SetPolicies(map[string]limiter.Policy{"tiered": {Limits: []limiter.NamedLimit{burst, looser}}}); err != nil {
		t.Fatal(err)
	}
	res, err = svc.Allow(t.Context(), req)
	if err != nil || !res.Allowed || res.Cached {
		t.Fatalf("after the per-minute limit rose: %+v, %v; want allowed by the store", res, err)
	}
}

// TestSeveralLimitsBadPolicies: the policy's checks name the field.
func TestSeveralLimitsBadPolicies(t *testing.T) {
	twelve := make([]limiter.NamedLimit, store.MaxLimits+1)
	for i := range twelve {
		twelve[i] = limiter.NamedLimit{Name: string(rune('a' + i)), Limit: store.Limit{Algorithm: store.FixedWindow, Limit: int64(i + 1), Period: time.Minute}}
	}
	unnamed := perMinute
	unnamed.Name = ""
	zero := perMinute
	zero.Limit.Limit = 0
	for _, tc := range []struct {
		name  string
		p     limiter.Policy
		field string
	}{
		{"limit and limits", limiter.Policy{Limit: perSecond.Limit, Limits: []limiter.NamedLimit{perMinute}}, "ratelimit.policies.p.limits"},
		{"too many", limiter.Policy{Limits: twelve}, "ratelimit.policies.p.limits"},
		{"unnamed", limiter.Policy{Limits: []limiter.NamedLimit{perSecond, unnamed}}, "ratelimit.policies.p.limits[1].name"},
		{"a bad limit", limiter.Policy{Limits: []limiter.NamedLimit{zero}}, "ratelimit.policies.p.limits[0].limit"},
		{"one name twice", limiter.Policy{Limits: []limiter.NamedLimit{perSecond, {Name: "per-second", Limit: perMinute.Limit}}}, "ratelimit.policies.p.limits[1].name"},
		{"one limit twice", limiter.Policy{Limits: []limiter.NamedLimit{perSecond, {Name: "again", Limit: perSecond.Limit}}}, "ratelimit.policies.p.limits[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := limiter.New(nil, limiter.DefaultConfig(), map[string]limiter.Policy{"p": tc.p})
			wantField(t, err, tc.field)
		})
	}
}

// TestAllowWait: a denied call with wait asks the store again only at each
// denial's retry_after, and is allowed then; one whose retry_after lies
// beyond its wait is answered at once; the drain and the caller's context
// end a wait.
func TestAllowWait(t *testing.T) {
	newSvc := func(t *testing.T, drain <-chan struct{}) (*limiter.Service, *storetest.Faulty) {
		f := storetest.NewFaulty(memory.New(memory.Options{}))
		t.Cleanup(func() { _ = f.Close() })
		cfg := limiter.DefaultConfig()
		cfg.DenyCacheSize = 0 // every decision from the store: the calls are counted
		svc, err := limiter.New(f, cfg, nil, limiter.WithDrain(drain))
		if err != nil {
			t.Fatal(err)
		}
		return svc, f
	}
	// One unit every 300ms, starting full with one.
	l := &store.Limit{Algorithm: store.LeakyBucket, Limit: 1, Period: 300 * time.Millisecond}
	t.Run("allowed at retry_after", func(t *testing.T) {
		svc, f := newSvc(t, nil)
		if res, err := svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: l}); err != nil || !res.Allowed {
			t.Fatalf("first: %+v, %v", res, err)
		}
		before, start := f.Calls("Allow"), time.Now()
		res, err := svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: l, Wait: time.Second})
		took := time.Since(start)
		if err != nil || !res.Allowed {
			t.Fatalf("waiting: %+v, %v", res, err)
		}
		if n := f.Calls("Allow") - before; n != 2 {
			t.Errorf("%d store calls, want 2: the denial and the call at its retry_after", n)
		}
		if took < 250*time.Millisecond {
			t.Errorf("allowed after %v, before the retry_after (about 300ms)", took)
		}
	})
	t.Run("retry beyond the wait", func(t *testing.T) {
		svc, f := newSvc(t, nil)
		_, _ = svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: l})
		before, start := f.Calls("Allow"), time.Now()
		res, err := svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: l, Wait: 100 * time.Millisecond})
		if err != nil || res.Allowed || res.RetryAfter <= 100*time.Millisecond {
			t.Fatalf("waiting: %+v, %v; want denied, retry_after beyond the wait", res, err)
		}
		if n, took := f.Calls("Allow")-before, time.Since(start); n != 1 || took > 50*time.Millisecond {
			t.Errorf("%d store calls in %v, want 1 answered at once", n, took)
		}
	})
	t.Run("drain", func(t *testing.T) {
		drain := make(chan struct{})
		svc, _ := newSvc(t, drain)
		slow := &store.Limit{Algorithm: store.LeakyBucket, Limit: 1, Period: 10 * time.Second}
		_, _ = svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: slow})
		time.AfterFunc(50*time.Millisecond, func() { close(drain) })
		start := time.Now()
		res, err := svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: slow, Wait: 30 * time.Second})
		if err != nil || res.Allowed || time.Since(start) > 5*time.Second {
			t.Fatalf("a drain during the wait: %+v, %v after %v; want the denial at once", res, err, time.Since(start))
		}
	})
	t.Run("canceled", func(t *testing.T) {
		svc, _ := newSvc(t, nil)
		slow := &store.Limit{Algorithm: store.LeakyBucket, Limit: 1, Period: 10 * time.Second}
		_, _ = svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: slow})
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := svc.Allow(ctx, limiter.Request{Key: "k", Limit: slow, Wait: 30 * time.Second}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("bad", func(t *testing.T) {
		svc, _ := newSvc(t, nil)
		_, err := svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: l, Wait: time.Hour})
		wantField(t, err, "wait")
		_, err = svc.Allow(t.Context(), limiter.Request{Key: "k", Limit: l, Wait: time.Second, Peek: true})
		wantField(t, err, "wait")
	})
}
