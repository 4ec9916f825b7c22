package metrics

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/internal/store"
)

// series gathers reg: the value of every series, by its name and label
// values in the order of the label names ("coordd_holds_lost_total{lock,gone}").
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var values []string
			for _, l := range m.GetLabel() {
				values = append(values, l.GetValue())
			}
			key := f.GetName() + "{" + strings.Join(values, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestLabels: the label values are the callers' strings, as given (an
// inline limit is policy "inline"; a successful store call counts no error).
func TestLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.HoldLost("lock", "session_expired")
	m.Decision("", "token_bucket", "allowed")
	m.Decision("api", "fixed_window", "denied")
	m.StoreCall("GetLock", time.Millisecond, "")
	m.StoreCall("GetLock", time.Millisecond, "unavailable")
	m.Queue("acked", 3)
	got := series(t, reg)
	for key, want := range map[string]float64{
		"coordd_holds_lost_total{lock,session_expired}":                 1,
		"coordd_ratelimit_decisions_total{token_bucket,inline,allowed}": 1,
		"coordd_ratelimit_decisions_total{fixed_window,api,denied}":     1,
		"coordd_store_errors_total{unavailable,GetLock}":                1,
		"coordd_store_duration_seconds{GetLock}":                        2,
		"coordd_queue_operations_total{acked}":                          3,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, "coordd_store_errors_total") && key != "coordd_store_errors_total{unavailable,GetLock}" {
			t.Errorf("%s: a call without failure counts no error", key)
		}
	}

	var none *Metrics // records nothing, and does not panic
	none.HoldLost("lock", "gone")
	none.Decision("", "fixed_window", "allowed")
	none.StoreCall("GetLock", 0, "other")
}

// TestCallsApart: a call that asked to wait is timed in
// coordd_grpc_wait_seconds only, one that did not in
// grpc_server_handling_seconds only; the series of a method exist at 0
// once initialised, its wait series only if it can wait.
func TestCallsApart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.InitMethod("coord.v1.LockService", "Lock", true)
	m.InitMethod("coord.v1.LockService", "GetLock", false)
	got := series(t, reg)
	for key, want := range map[string]float64{
		"grpc_server_handling_seconds{Lock,coord.v1.LockService,unary}":    0,
		"grpc_server_handling_seconds{GetLock,coord.v1.LockService,unary}": 0,
		"coordd_grpc_wait_seconds{Lock,coord.v1.LockService}":              0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (exported: %v), want %v", key, v, ok, want)
		}
	}
	if _, ok := got["coordd_grpc_wait_seconds{GetLock,coord.v1.LockService}"]; ok {
		t.Error("GetLock, which cannot wait, has a wait series")
	}

	m.Call("coord.v1.LockService", "Lock", time.Millisecond, false)
	m.Call("coord.v1.LockService", "Lock", 30*time.Second, true)
	m.Call("coord.v1.LockService", "Lock", 20*time.Second, true)
	got = series(t, reg)
	if v := got["grpc_server_handling_seconds{Lock,coord.v1.LockService,unary}"]; v != 1 {
		t.Errorf("grpc_server_handling_seconds{Lock} has %v samples, want 1: the waits are not latency", v)
	}
	if v := got["coordd_grpc_wait_seconds{Lock,coord.v1.LockService}"]; v != 2 {
		t.Errorf("coordd_grpc_wait_seconds{Lock} has %v samples, want 2", v)
	}

	var none *Metrics
	none.InitMethod("coord.v1.LockService", "Lock", true)
	none.Call("coord.v1.LockService", "Lock", time.Second, true)
	none.InitPolicy("api", "token_bucket")
}

// TestKnownLabelsAtZero: the counters whose label values are known at
// start, and a configured policy's decisions, exist at 0 before their
// first event.
func TestKnownLabelsAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.InitPolicy("api", "token_bucket", "fixed_window")
	got := series(t, reg)
	keys := []string{
		"coordd_ratelimit_decisions_total{token_bucket,api,denied}",
		"coordd_ratelimit_decisions_total{fixed_window,api,degraded}",
	}
	for _, o := range idemOutcomes {
		keys = append(keys, "coordd_idempotency_outcomes_total{"+o+"}")
	}
	for _, op := range queueOps {
		keys = append(keys, "coordd_queue_operations_total{"+op+"}")
	}
	for _, r := range authReasons {
		keys = append(keys, "coordd_auth_failures_total{"+r+"}")
	}
	for _, r := range rejectReasons {
		keys = append(keys, "coordd_rejected_total{"+r+"}")
	}
	for _, k := range keys {
		if v, ok := got[k]; !ok || v != 0 {
			t.Errorf("%s = %v (exported: %v), want 0", k, v, ok)
		}
	}
}

// TestWatchQueues: each named queue is read at every scrape; one that
// cannot be read is left out, not the scrape failed.
func TestWatchQueues(t *testing.T) {
	reg := prometheus.NewRegistry()
	WatchQueues(reg, []QueueRef{{Namespace: "a", Name: "jobs"}, {Namespace: "b", Name: "down"}},
		func(_ context.Context, q QueueRef) (QueueDepth, error) {
			if q.Name == "down" {
				return QueueDepth{}, errors.New("unreachable")
			}
			return QueueDepth{Ready: 1, Delayed: 2, InFlight: 3, Dead: 4}, nil
		}, time.Second)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] != "a" || labels["queue"] != "jobs" {
				t.Errorf("%s has labels %v, want only namespace a, queue jobs", f.GetName(), labels)
			}
			got[labels["state"]] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"ready": 1, "delayed": 2, "in_flight": 3, "dead": 4}
	if len(got) != len(want) {
		t.Fatalf("coordd_queue_messages = %v, want %v", got, want)
	}
	for state, n := range want {
		if got[state] != n {
			t.Errorf("coordd_queue_messages{state=%s} = %v, want %v", state, got[state], n)
		}
	}
}

// TestHoldSeries: the hold and election series exist at 0 before anything
// happens, and each call counts under its own labels.
func TestHoldSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	zero := []string{
		"coordd_holds_granted_total{lock,exclusive}", "coordd_holds_granted_total{lock,shared}",
		"coordd_holds_granted_total{semaphore,shared}", "coordd_holds_granted_total{election,exclusive}",
	}
	for _, kind := range []string{"lock", "semaphore", "election"} {
		for _, family := range []string{"coordd_holds_contended_total", "coordd_hold_wait_seconds", "coordd_hold_duration_seconds",
			"coordd_holds_expired_total", "coordd_hold_holders_at_grant"} {
			zero = append(zero, family+"{"+kind+"}")
		}
	}
	for _, kind := range []string{"lock", "semaphore", "election"} {
		for _, reason := range []string{"max_hold", "session_expired", "gone"} {
			zero = append(zero, "coordd_holds_lost_total{"+kind+","+reason+"}")
		}
	}
	got := series(t, reg)
	for _, key := range zero {
		if v, ok := got[key]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want present at 0", key, v, ok)
		}
	}
	m.HoldGranted("semaphore", "shared", 3)
	m.HoldGranted("lock", "shared", 2)
	m.HoldGranted("lock", "shared", 0) // unknown count: no observation
	m.HoldContended("election")
	m.HoldWaited("election", time.Second)
	m.HoldReleased("lock", time.Second)
	m.HoldExpired("semaphore")
	m.HoldLost("semaphore", "max_hold")
	m.HoldLost("election", "session_expired")
	m.Observers(2)
	m.Observers(-1)
	got = series(t, reg)
	for key, want := range map[string]float64{
		"coordd_holds_granted_total{semaphore,shared}":      1,
		"coordd_holds_granted_total{lock,shared}":           2,
		"coordd_holds_granted_total{lock,exclusive}":        0,
		"coordd_hold_holders_at_grant{semaphore}":           1,
		"coordd_hold_holders_at_grant{lock}":                1,
		"coordd_holds_contended_total{election}":            1,
		"coordd_hold_wait_seconds{election}":                1,
		"coordd_hold_duration_seconds{lock}":                1,
		"coordd_hold_duration_seconds{election}":            0,
		"coordd_holds_expired_total{semaphore}":             1,
		"coordd_holds_lost_total{semaphore,max_hold}":       1,
		"coordd_holds_lost_total{election,session_expired}": 1,
		"coordd_holds_lost_total{lock,max_hold}":            0,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "coordd_election_observers" {
			if v := f.GetMetric()[0].GetGauge().GetValue(); v != 1 {
				t.Errorf("coordd_election_observers = %v, want 1", v)
			}
		}
	}
	var none *Metrics
	none.HoldGranted("lock", "exclusive", 1)
	none.HoldWaited("lock", time.Second)
	none.HoldContended("lock")
	none.HoldReleased("lock", time.Second)
	none.HoldExpired("lock")
	none.HoldLost("lock", "gone")
	none.Observers(1)
}

// TestHeldReasonsAreTheStores: the held-back reasons counted from the
// start are the ones the store reports.
func TestHeldReasonsAreTheStores(t *testing.T) {
	if !slices.Equal(heldReasons, store.HeldBackReasons) {
		t.Fatalf("heldReasons %q, store.HeldBackReasons %q", heldReasons, store.HeldBackReasons)
	}
}
