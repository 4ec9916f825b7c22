package limiter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
)

// instances returns n limiter Services (coordd instances) on one store, on
// a fake clock, with policy "hot".
func instances(t *testing.T, n int, hot limiter.Policy) ([]*limiter.Service, *storetest.Faulty, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(time.Unix(1_800_000_000, 0)) // a second boundary
	f := storetest.NewFaulty(memory.New(memory.Options{Clock: c}))
	t.Cleanup(func() { _ = f.Close() })
	svcs := make([]*limiter.Service, n)
	for i := range svcs {
		svc, err := limiter.New(f, limiter.DefaultConfig(), map[string]limiter.Policy{"hot": hot}, limiter.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		svcs[i] = svc
	}
	return svcs, f, c
}

// TestLocalQuotaNeverOvershoots: two instances with a local quota, demand
// five times the limit, 60 windows: each window admits at most the limit,
// and at least 95 % of it; the store is asked for at most 5 % of the calls.
func TestLocalQuotaNeverOvershoots(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    store.Limit
	}{
		{"fixed window", store.Limit{Algorithm: store.FixedWindow, Limit: 1000, Period: time.Second}},
		// A bucket of one second's worth: any second admits at most the
		// capacity plus the refill of that second, as without local quotas.
		{"token bucket", store.Limit{Algorithm: store.TokenBucket, Limit: 1000, Period: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svcs, f, c := instances(t, 2, limiter.Policy{Limit: tc.l, LocalQuota: 50})
			bound := tc.l.Limit
			if tc.l.Algorithm == store.TokenBucket {
				bound = tc.l.Capacity() + tc.l.Limit
			}
			const windows, steps = 60, 20
			calls, admittedAll := 0, int64(0)
			before := f.Calls("Allow")
			for w := range windows {
				admitted := int64(0)
				for range steps {
					// Five times the limit per window, from both instances
					// in turn.
					for i := range 5 * int(tc.l.Limit) / steps {
						res, err := svcs[i%2].Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "hot"})
						if err != nil {
							t.Fatal(err)
						}
						calls++
						if res.Allowed {
							admitted++
						}
					}
					c.Advance(time.Second / steps)
				}
				if admitted > bound {
					t.Fatalf("window %d admitted %d, over %d", w, admitted, bound)
				}
				if w > 0 && admitted < tc.l.Limit*95/100 {
					t.Errorf("window %d admitted %d, under 95%% of the limit %d", w, admitted, tc.l.Limit)
				}
				admittedAll += admitted
			}
			storeCalls := f.Calls("Allow") - before
			t.Logf("%d calls, %d admitted (%.1f%% of %d a window), %d store calls (%.2f%%)", calls, admittedAll,
				100*float64(admittedAll)/float64(windows*tc.l.Limit), tc.l.Limit, storeCalls, 100*float64(storeCalls)/float64(calls))
			if float64(storeCalls) > 0.05*float64(calls) {
				t.Errorf("%d store calls for %d Allow calls, over 5%%", storeCalls, calls)
			}
		})
	}
}

// TestLocalQuotaInstanceLost: an instance that goes away with units of its
// chunk left takes them with it, and no more: the other admits the rest of
// the window.
func TestLocalQuotaInstanceLost(t *testing.T) {
	l := store.Limit{Algorithm: store.FixedWindow, Limit: 100, Period: time.Minute}
	svcs, _, c := instances(t, 2, limiter.Policy{Limit: l, LocalQuota: 10})
	allow := func(svc *limiter.Service) bool {
		res, err := svc.Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "hot"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Allowed
	}
	if !allow(svcs[0]) {
		t.Fatal("the first call was denied")
	}
	// svcs[0] is gone now, with 9 units of its chunk.
	n := 0
	for allow(svcs[1]) {
		n++
	}
	if n != 90 {
		t.Fatalf("the other instance admitted %d, want 90: the window's 100, less the lost instance's chunk of 10", n)
	}
	c.Advance(time.Minute)
	if !allow(svcs[1]) {
		t.Fatal("denied in the next window")
	}
}

// TestLocalQuotaAnswersLocally: admissions within a chunk, and denials
// until their retry_after, make no store call; the chunk left is what
// remaining reports; a peek asks the store.
func TestLocalQuotaAnswersLocally(t *testing.T) {
	l := store.Limit{Algorithm: store.FixedWindow, Limit: 25, Period: time.Minute}
	svcs, f, c := instances(t, 1, limiter.Policy{Limit: l, LocalQuota: 10})
	svc := svcs[0]
	req := limiter.Request{NS: "ns", Key: "k", Policy: "hot"}
	var answers []string
	for range 27 {
		res, err := svc.Allow(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, fmt.Sprintf("%v/%d", res.Allowed, res.Remaining))
	}
	// Chunks of 10, 10, then the 5 left, then denials.
	want := "[true/9 true/8 true/7 true/6 true/5 true/4 true/3 true/2 true/1 true/0 " +
		"true/9 true/8 true/7 true/6 true/5 true/4 true/3 true/2 true/1 true/0 " +
		"true/4 true/3 true/2 true/1 true/0 false/0 false/0]"
	if fmt.Sprint(answers) != want {
		t.Fatalf("answers %v\nwant %s", answers, want)
	}
	// 10, 10, then a denial of 10 (5 left) and the take of 5, then one
	// denial: the last call was answered locally.
	if n := f.Calls("Allow"); n != 5 {
		t.Errorf("%d store calls, want 5", n)
	}
	res, err := svc.Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "hot", Peek: true})
	if err != nil || res.Allowed || f.Calls("Allow") != 6 {
		t.Errorf("a peek: %+v, %v, %d store calls; want the store's denial", res, err, f.Calls("Allow"))
	}
	c.Advance(time.Minute)
	if res, err := svc.Allow(t.Context(), req); err != nil || !res.Allowed || res.Remaining != 9 {
		t.Errorf("in the next window: %+v, %v; want a new chunk", res, err)
	}
}

// TestLocalQuotaBadPolicies: the checks name local_quota.
func TestLocalQuotaBadPolicies(t *testing.T) {
	fixed := store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Second}
	for _, tc := range []struct {
		name string
		p    limiter.Policy
	}{
		{"negative", limiter.Policy{Limit: fixed, LocalQuota: -1}},
		{"above the capacity", limiter.Policy{Limit: fixed, LocalQuota: 11}},
		{"a sliding log", limiter.Policy{Limit: store.Limit{Algorithm: store.SlidingLog, Limit: 10, Period: time.Second}, LocalQuota: 2}},
		{"several limits", limiter.Policy{Limits: []limiter.NamedLimit{perSecond, perMinute}, LocalQuota: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := limiter.New(nil, limiter.DefaultConfig(), map[string]limiter.Policy{"p": tc.p})
			wantField(t, err, "ratelimit.policies.p.local_quota")
		})
	}
}

// TestLocalQuotaChunkExpires: units of a chunk are never admitted after
// the store has stopped counting them: a fixed window's when its window
// ends, a token bucket's once the bucket has refilled them.
func TestLocalQuotaChunkExpires(t *testing.T) {
	for _, tc := range []struct {
		name  string
		l     store.Limit
		later time.Duration // then every unit of the limiter is free again
		most  int           // the most the store admits at once then
	}{
		{"fixed window", store.Limit{Algorithm: store.FixedWindow, Limit: 100, Period: time.Minute}, time.Minute, 100},
		{"token bucket", store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: time.Second}, 10 * time.Second, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svcs, _, c := instances(t, 1, limiter.Policy{Limit: tc.l, LocalQuota: 5})
			allow := func() bool {
				res, err := svcs[0].Allow(t.Context(), limiter.Request{NS: "ns", Key: "k", Policy: "hot"})
				if err != nil {
					t.Fatal(err)
				}
				return res.Allowed
			}
			if !allow() {
				t.Fatal("the first call was denied")
			}
			c.Advance(tc.later) // four units of the chunk left, no longer counted
			n := 0
			for range 3 * tc.most {
				if allow() {
					n++
				}
			}
			if n != tc.most {
				t.Fatalf("admitted %d at once after the chunk's time, want the store's %d (no unit of the old chunk)", n, tc.most)
			}
		})
	}
}
