// Package storetest is the conformance suite of store.Store: the executable
// definition of how every backend behaves. A backend's test runs it with a
// function that builds a fresh Harness, a Store whose time is a clock.Fake:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness {
//			c := clock.NewFake(time.Now())
//			s := memory.New(memory.Options{Clock: c})
//			t.Cleanup(func() { _ = s.Close() })
//			return storetest.Harness{Store: s, Clock: c}
//		})
//	}
//
// Every subtest builds its own harness, sets its clock to a fixed instant
// (time.Unix(1_800_000_000, 0), a whole number of hours, so the start of a
// window for the worked examples) and moves it forward or back as it needs;
// it never sleeps for time to pass.
// Only wake-up delivery is awaited in real time. Every subtest uses names no
// other subtest (or earlier run) uses and never assumes the store is empty,
// so harnesses may share one persistent database. Subtests run in parallel:
// a harness's clock must drive only that harness's Store, and newHarness
// must arrange for the Store to be closed (t.Cleanup).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// Harness is one backend under test.
type Harness struct {
	Store store.Store
	Clock *clock.Fake // drives the store's time; advance it instead of sleeping
	// IdleNameTTL is the store's idle name ttl (how long a name's fence
	// counter outlives its last grant); 0: an hour, the default.
	IdleNameTTL time.Duration
	// Residue returns those of names (scoped hold and queue names) of
	// which the store would still keep something (a record, a key) after
	// horizon if nobody touched them; with horizon 0, what it has now.
	Residue func(horizon time.Duration, names ...string) ([]string, error)
	// Forget, if set, removes every record of names as the store does by
	// itself in real time once they have been idle past IdleNameTTL (the
	// Redis store's keys expire by Redis's own clock, which a simulated
	// clock does not move). nil: the store needs nothing of the kind.
	Forget func(names ...string) error
}

// Run runs the whole conformance suite against the backend newHarness builds.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"Locks", lockTests()},
		{"Sessions", sessionTests()},
		{"Limits", limitTests()},
		{"Idempotency", idemTests()},
		{"Queues", queueTests()},
		{"Schedules", scheduleTests()},
		{"Activity", activityTests()},
		{"Policies", policyTests()},
		{"Subscribe", subscribeTests()},
		{"Holds", holdTests()},
		{"Elections", electionTests()},
		{"Residue", residueTests()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(newEnv(t, newHarness))
				})
			}
		})
	}
}

// test is one subtest; it gets a fresh harness.
type test struct {
	name string
	run  func(e *env)
}

// base is where every subtest's clock starts: a whole number of hours (and
// so of every period the suite uses) since the Unix epoch.
var base = time.Unix(1_800_000_000, 0).UTC()

const us = time.Microsecond

// env is one subtest with its harness and its own namespace.
type env struct {
	*testing.T
	h          Harness
	s          store.Store
	clk        *clock.Fake
	ctx        context.Context
	ns         string
	newHarness func(t *testing.T) Harness
}

func newEnv(t *testing.T, newHarness func(t *testing.T) Harness) *env {
	t.Helper()
	h := newHarness(t)
	if h.Store == nil || h.Clock == nil {
		t.Fatal("newHarness returned a Harness without a Store or a Clock")
	}
	h.Clock.Set(base)
	return &env{T: t, h: h, s: h.Store, clk: h.Clock, ctx: t.Context(), ns: "t" + token.New()[:12], newHarness: newHarness}
}

// sub runs f as a parallel subtest with a fresh harness.
func (e *env) sub(name string, f func(e *env)) {
	e.Run(name, func(t *testing.T) {
		t.Parallel()
		f(newEnv(t, e.newHarness))
	})
}

// name returns label scoped to the subtest's namespace.
func (e *env) name(label string) string { return store.Scope(e.ns, label) }

func (e *env) now() time.Time          { return e.clk.Now() }
func (e *env) advance(d time.Duration) { e.clk.Advance(d) }

func eq[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func eqTime(t testing.TB, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func eqBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func isErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v, want %v", what, err, want)
	}
}

func noErr(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func eqStrings(t testing.TB, what string, got, want []string) {
	t.Helper()
	got, want = sorted(got), sorted(want)
	if len(got) != len(want) {
		t.Errorf("%s = %q, want %q", what, got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s = %q, want %q", what, got, want)
			return
		}
	}
}
