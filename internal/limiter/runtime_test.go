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
	"github.com/coordd/coordd/internal/validate"
)

// eventually calls f every 10ms until it reports true, for up to d.
func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !f(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// run runs svc's RunPolicies until the test ends.
func run(t *testing.T, svc *limiter.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.RunPolicies(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A runtime policy put on one Service is in force on it at once, and on
// another Service on the same store within a second; a delete takes it
// away the same way. Its state is its own, apart from a config policy's
// with equal parameters.
func TestRuntimePoliciesPropagate(t *testing.T) {
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	one := store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Hour}
	cfg := map[string]limiter.Policy{"config": {Limit: one}}
	a, err := limiter.New(mem, limiter.DefaultConfig(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := limiter.New(mem, limiter.DefaultConfig(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	run(t, a)
	run(t, b)
	allow := func(s *limiter.Service, ns, policy string) (limiter.Result, error) {
		return s.Allow(t.Context(), limiter.Request{NS: ns, Key: "k", Policy: policy})
	}
	created, err := a.PutPolicy(t.Context(), "ns", "rt", limiter.Policy{Limit: one})
	if err != nil || !created {
		t.Fatalf("PutPolicy = %v, %v; want created", created, err)
	}
	if res, err := allow(a, "ns", "rt"); err != nil || !res.Allowed || !res.Runtime {
		t.Fatalf("Allow on the same instance at once = %+v, %v; want allowed under a runtime policy", res, err)
	}
	start := time.Now()
	eventually(t, time.Second, "the put seen by the other instance", func() bool {
		_, err := allow(b, "ns", "rt")
		return err == nil
	})
	t.Logf("the other instance saw the put after %v", time.Since(start))
	if res, err := allow(b, "ns", "rt"); err != nil || res.Allowed {
		t.Fatalf("a second call on the other instance = %+v, %v; want denied (one per hour, across instances)", res, err)
	}
	if res, err := allow(a, "ns", "config"); err != nil || !res.Allowed || res.Runtime {
		t.Fatalf("the config policy of equal parameters = %+v, %v; want allowed, its own state", res, err)
	}
	if _, err := allow(b, "other", "rt"); err == nil {
		t.Fatal("another namespace's Allow found the runtime policy")
	}
	if n := a.RuntimePolicies(); n != 1 {
		t.Errorf("RuntimePolicies = %d, want 1", n)
	}

	deleted, err := b.DeletePolicy(t.Context(), "ns", "rt")
	if err != nil || !deleted {
		t.Fatalf("DeletePolicy = %v, %v; want deleted", deleted, err)
	}
	if _, err := allow(b, "ns", "rt"); err == nil {
		t.Fatal("Allow on the deleting instance found the deleted policy")
	}
	eventually(t, time.Second, "the delete seen by the first instance", func() bool {
		_, err := allow(a, "ns", "rt")
		return err != nil
	})
	wantField(t, func() error { _, err := allow(a, "ns", "rt"); return err }(), "policy")
}

// Config policies are authoritative: their names can be neither put nor
// deleted, and a runtime policy is checked as a config policy is, naming
// the API's fields.
func TestPutPolicyRules(t *testing.T) {
	h := newHarness(t)
	good := store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Second}
	if _, err := h.svc.PutPolicy(t.Context(), "ns", "open", limiter.Policy{Limit: good}); !errors.Is(err, limiter.ErrFromConfig) {
		t.Errorf("PutPolicy of a config policy's name: %v, want ErrFromConfig", err)
	}
	if _, err := h.svc.DeletePolicy(t.Context(), "ns", "open"); !errors.Is(err, limiter.ErrFromConfig) {
		t.Errorf("DeletePolicy of a config policy's name: %v, want ErrFromConfig", err)
	}
	for _, tc := range []struct {
		name, policy string
		p            limiter.Policy
		field        string
	}{
		{"no name", "", limiter.Policy{Limit: good}, "policy.name"},
		{"no limit", "p", limiter.Policy{}, "policy.limit.algorithm"},
		{"bad period", "p", limiter.Policy{Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 5}}, "policy.limit.period"},
		{"bad limit of several", "p", limiter.Policy{Limits: []limiter.NamedLimit{{Name: "a", Limit: good}, {Name: "b", Limit: store.Limit{Algorithm: store.FixedWindow, Period: time.Second}}}}, "policy.limits[1].limit.limit"},
		{"unnamed limit", "p", limiter.Policy{Limits: []limiter.NamedLimit{{Limit: good}}}, "policy.limits[0].name"},
		{"both", "p", limiter.Policy{Limit: good, Limits: []limiter.NamedLimit{{Name: "a", Limit: good}}}, "policy.limits"},
		{"local quota of a sliding log", "p", limiter.Policy{Limit: store.Limit{Algorithm: store.SlidingLog, Limit: 5, Period: time.Second}, LocalQuota: 2}, "policy.local_quota"},
		{"unknown on_store_failure", "p", limiter.Policy{Limit: good, OnStoreFailure: 9}, "policy.on_store_failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.PutPolicy(t.Context(), "ns", tc.policy, tc.p)
			wantField(t, err, tc.field)
		})
	}
	if l, err := h.svc.ListPolicies(t.Context(), "ns"); err != nil || len(l) != 0 {
		t.Errorf("ListPolicies after refused puts = %v, %v; want none", l, err)
	}
}

// The bound per namespace: a new policy past it is ErrTooManyPolicies; a
// replacing put is not new. ListPolicies gives back what was put.
func TestPutPolicyBound(t *testing.T) {
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	cfg := limiter.DefaultConfig()
	cfg.MaxPoliciesPerNamespace = 2
	svc, err := limiter.New(mem, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := limiter.Policy{
		Limits: []limiter.NamedLimit{
			{Name: "second", Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: time.Second, Burst: 20}},
			{Name: "day", Limit: store.Limit{Algorithm: store.SlidingWindow, Limit: 1000, Period: 24 * time.Hour}},
		},
		Shadow: true, OnStoreFailure: limiter.FailLocal,
	}
	for _, name := range []string{"a", "b"} {
		if _, err := svc.PutPolicy(t.Context(), "ns", name, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.PutPolicy(t.Context(), "ns", "c", p); !errors.Is(err, store.ErrTooManyPolicies) {
		t.Fatalf("PutPolicy past the bound: %v, want ErrTooManyPolicies", err)
	}
	if created, err := svc.PutPolicy(t.Context(), "ns", "b", p); err != nil || created {
		t.Fatalf("a replacing PutPolicy at the bound = %v, %v; want replaced", created, err)
	}
	l, err := svc.ListPolicies(t.Context(), "ns")
	if err != nil || len(l) != 2 {
		t.Fatalf("ListPolicies = %v, %v", l, err)
	}
	got := l["a"]
	if len(got.Limits) != 2 || got.Limits[0] != p.Limits[0] || got.Limits[1] != p.Limits[1] || !got.Shadow || got.OnStoreFailure != limiter.FailLocal {
		t.Errorf("listed %+v, want %+v", got, p)
	}
}

// A policy that fails local decides in the instance's memory while the
// store is unreachable: limit ÷ expected_instances (rounded down, at
// least 1), marked degraded and local; when the store answers again,
// decisions come from it.
func TestFailLocal(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c})
	f := storetest.NewFaulty(mem)
	t.Cleanup(func() { _ = f.Close() })
	cfg := limiter.DefaultConfig()
	cfg.ExpectedInstances = 3
	svc, err := limiter.New(f, cfg, map[string]limiter.Policy{
		"local":  {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Minute}, OnStoreFailure: limiter.FailLocal},
		"quota":  {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Minute}, OnStoreFailure: limiter.FailLocal, LocalQuota: 5},
		"tiny":   {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 2, Period: time.Second}, OnStoreFailure: limiter.FailLocal},
		"tiered": {Limits: []limiter.NamedLimit{{Name: "minute", Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 7, Period: time.Minute}}, {Name: "hour", Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 8, Period: time.Hour}}}, OnStoreFailure: limiter.FailLocal},
		"twins":  {Limits: []limiter.NamedLimit{{Name: "seven", Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 7, Period: time.Minute}}, {Name: "eight", Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 8, Period: time.Minute}}}, OnStoreFailure: limiter.FailLocal},
	}, limiter.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	allow := func(policy, key string) limiter.Result {
		t.Helper()
		res, err := svc.Allow(t.Context(), limiter.Request{Key: key, Policy: policy})
		if err != nil {
			t.Fatalf("Allow %s: %v", policy, err)
		}
		return res
	}
	if res := allow("local", "k"); !res.Allowed || res.Degraded {
		t.Fatalf("with the store: %+v", res)
	}
	f.Fail("Allow", "AllowAll")
	for _, tc := range []struct {
		policy string
		want   int // admitted of 10 calls
	}{
		{"local", 3},  // 10 ÷ 3
		{"quota", 3},  // its local quota's refill fails the same way
		{"tiny", 1},   // 2 ÷ 3, at least 1
		{"tiered", 2}, // 7 ÷ 3 a minute and 8 ÷ 3 an hour
		{"twins", 2},  // 7 ÷ 3 and 8 ÷ 3 a minute are both 2: one limit
	} {
		admitted := 0
		for range 10 {
			res := allow(tc.policy, "k")
			if !res.Degraded || !res.Local {
				t.Fatalf("%s with the store down: %+v, want degraded and local", tc.policy, res)
			}
			if res.Allowed {
				admitted++
			} else if res.RetryAfter <= 0 {
				t.Errorf("%s: a local denial without retry_after: %+v", tc.policy, res)
			}
		}
		if admitted != tc.want {
			t.Errorf("%s with the store down admitted %d of 10, want %d", tc.policy, admitted, tc.want)
		}
	}
	if res := allow("tiered", "k"); res.Allowed || res.DeniedBy != "hour" {
		t.Errorf("tiered's local denial = %+v, want denied by hour (the longest retry_after)", res)
	}
	f.Set("Allow", storetest.Fault{})
	f.Set("AllowAll", storetest.Fault{})
	res := allow("local", "k")
	if !res.Allowed || res.Degraded || res.Local || res.Remaining != 8 {
		t.Errorf("with the store back: %+v, want the store's decision (8 left of 10)", res)
	}
}

// An instance that starts while the store is unreachable answers a name
// that may be a runtime policy UNAVAILABLE (ErrPoliciesNotLoaded, a store
// error), never "no such policy", until it has read the runtime policies;
// then the policy is in force, and an unknown name is INVALID_ARGUMENT.
func TestRuntimePoliciesNotLoadedYet(t *testing.T) {
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	one := store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Hour}
	a, err := limiter.New(mem, limiter.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutPolicy(t.Context(), "ns", "rt", limiter.Policy{Limit: one, OnStoreFailure: limiter.FailLocal}); err != nil {
		t.Fatal(err)
	}
	f := storetest.NewFaulty(mem)
	f.Set("PolicyVersions", storetest.Fault{Fail: true, Err: store.ErrUnavailable})
	b, err := limiter.New(f, limiter.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, b)
	eventually(t, time.Second, "a poll", func() bool { return f.Calls("PolicyVersions") > 0 })
	_, err = b.Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "rt"})
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, limiter.ErrPoliciesNotLoaded) {
		t.Fatalf("Allow before the runtime policies could be read: %v, want ErrPoliciesNotLoaded (UNAVAILABLE)", err)
	}
	f.Clear()
	eventually(t, time.Second, "the runtime policy read", func() bool {
		_, err := b.Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "rt"})
		return err == nil
	})
	if _, err := b.Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "nobody"}); !validate.IsFieldError(err) {
		t.Fatalf("an unknown name once loaded: %v, want INVALID_ARGUMENT", err)
	}
}

// A runtime policy put before a config reload took its name is not in
// force (the config's is), and can still be deleted; a put under the name
// is refused.
func TestRuntimePolicyShadowedByConfig(t *testing.T) {
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	one := store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Hour}
	s, err := limiter.New(mem, limiter.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPolicy(t.Context(), "ns", "api", limiter.Policy{Limit: one}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPolicies(map[string]limiter.Policy{"api": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Hour}}}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "api"}); err != nil || res.Limit != 5 || res.Runtime {
		t.Fatalf("Allow under the shadowed name = %+v, %v; want the config's limit of 5", res, err)
	}
	if _, err := s.PutPolicy(t.Context(), "ns", "api", limiter.Policy{Limit: one}); !errors.Is(err, limiter.ErrFromConfig) {
		t.Fatalf("a put under a config policy's name: %v, want ErrFromConfig", err)
	}
	if deleted, err := s.DeletePolicy(t.Context(), "ns", "api"); err != nil || !deleted {
		t.Fatalf("deleting the shadowed runtime policy = %v, %v; want deleted", deleted, err)
	}
	if _, err := s.DeletePolicy(t.Context(), "ns", "api"); !errors.Is(err, limiter.ErrFromConfig) {
		t.Fatalf("deleting the config policy's name again: %v, want ErrFromConfig", err)
	}
}
