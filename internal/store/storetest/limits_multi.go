package storetest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// The cases of AllowAll: several limits of one key decided at once,
// all-or-nothing (store/ratelimit.go, "Several limits").
func multiLimitTests() []test {
	return []test{
		{"MultiSpec", multiSpec},
		{"MultiAllOrNothing", multiAllOrNothing},
		{"MultiDecidingLimit", multiDecidingLimit},
		{"MultiSharesStateWithAllow", multiSharesState},
		{"MultiConcurrent", multiConcurrent},
	}
}

func (e *env) allowAll(key string, ls []store.Limit, cost int64, peek bool) store.Decision {
	e.Helper()
	d, err := e.s.AllowAll(e.ctx, key, ls, cost, peek)
	noErr(e, "AllowAll "+key, err)
	return d
}

// multiModel decides as the specification composes the single limits'
// models: each decides alone (without recording); the call is allowed iff
// all allow, and then recorded in each unless a peek.
func multiModel(ms []*limitModel, now, c int64, peek bool) store.Decision {
	var out store.Decision
	for i, m := range ms {
		d := m.allow(now, c, true)
		switch {
		case i == 0:
			out = d
		case !d.Allowed && (out.Allowed || d.RetryAfter > out.RetryAfter):
			out.Limit, out.RetryAfter = i, d.RetryAfter
		case d.Allowed && out.Allowed && d.Remaining < out.Remaining:
			out.Limit = i
		}
		if i > 0 {
			out.Allowed = out.Allowed && d.Allowed
			out.Remaining = min(out.Remaining, d.Remaining)
			out.ResetAfter = max(out.ResetAfter, d.ResetAfter)
		}
	}
	if out.Allowed && !peek {
		for _, m := range ms {
			m.allow(now, c, false)
		}
	}
	return out
}

// multiSpec compares random calls on combinations of two and three limits
// of every algorithm with the composed model, decision by decision.
func multiSpec(e *env) {
	var all []store.Limit
	for _, a := range algorithms {
		all = append(all, specLimits(a)...)
	}
	rng := newRand(7)
	for i := range 24 {
		n := 2 + rng.IntN(2)
		var ls []store.Limit
		for len(ls) < n {
			if l := all[rng.IntN(len(all))]; !slices.Contains(ls, l) {
				ls = append(ls, l)
			}
		}
		key := e.name(fmt.Sprint("m", i))
		ms := make([]*limitModel, n)
		capacity := ls[0].Capacity()
		for j, l := range ls {
			ms[j] = newLimitModel(l)
			capacity = min(capacity, l.Capacity())
		}
		names := make([]string, n)
		for j, l := range ls {
			names[j] = limitName(l)
		}
		for j, c := range schedule(rng, ls[0], 200) {
			e.advance(c.adv)
			c.cost = min(c.cost, capacity)
			got := e.allowAll(key, ls, c.cost, c.peek)
			want := multiModel(ms, nowMicro(e), c.cost, c.peek)
			if got != want {
				e.Fatalf("%v call %d (t=%v, cost %d, peek %v): got %+v, want %+v", names, j, e.now().Sub(base), c.cost, c.peek, got, want)
			}
		}
	}
}

// multiAllOrNothing: a call one limit denies takes nothing from the others;
// one every limit allows takes from each; a peek takes from none.
func multiAllOrNothing(e *env) {
	window := store.Limit{Algorithm: store.FixedWindow, Limit: 3, Period: time.Minute}
	bucket := store.Limit{Algorithm: store.TokenBucket, Limit: 5, Period: time.Minute}
	log := store.Limit{Algorithm: store.SlidingLog, Limit: 4, Period: time.Minute}
	ls := []store.Limit{window, bucket, log}
	k := e.name("k")
	for i := range 3 {
		if d := e.allowAll(k, ls, 1, false); !d.Allowed {
			e.Fatalf("call %d: %+v, want allowed", i, d)
		}
	}
	if d := e.allowAll(k, ls, 1, true); d.Allowed || d.Limit != 0 {
		e.Errorf("a peek with the window full: %+v, want denied by limit 0", d)
	}
	for i := range 5 {
		if d := e.allowAll(k, ls, 1, false); d.Allowed || d.Limit != 0 {
			e.Fatalf("denial %d: %+v, want denied by limit 0", i, d)
		}
	}
	// Each limit alone saw three calls, not the denied ones nor the peek.
	if d := e.allow(k, bucket, 1, true); d.Remaining != 1 {
		e.Errorf("the bucket after three admissions and six denials: remaining %d, want 1 (5 - 3, less the peek's 1)", d.Remaining)
	}
	if d := e.allow(k, log, 1, true); d.Remaining != 0 {
		e.Errorf("the log after three admissions and six denials: remaining %d, want 0 (4 - 3, less the peek's 1)", d.Remaining)
	}
	// The log is the tighter one for a cost of 2 now.
	if d := e.allowAll(k, []store.Limit{bucket, log}, 2, false); d.Allowed || d.Limit != 1 {
		e.Errorf("cost 2 with one unit left in the log: %+v, want denied by limit 1", d)
	}
	if d := e.allow(k, bucket, 1, true); d.Remaining != 1 {
		e.Errorf("the bucket after a call the log denied: remaining %d, want 1 (unchanged)", d.Remaining)
	}
}

// multiDecidingLimit: denied, the deciding limit is the denying one whose
// RetryAfter is longest (the first of equals); allowed, the one with the
// least Remaining (the first of equals); Remaining is the least, ResetAfter
// the longest.
func multiDecidingLimit(e *env) {
	short := store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Second}
	long := store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Minute}
	roomy := store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Hour}
	k := e.name("k")
	e.advance(time.Hour - time.Duration(nowMicro(e)%time.Hour.Microseconds())*time.Microsecond) // windows start now
	d := e.allowAll(k, []store.Limit{roomy, short, long}, 1, false)
	want := store.Decision{Allowed: true, Remaining: 0, ResetAfter: time.Hour, Limit: 1}
	if d != want {
		e.Errorf("allowed: %+v, want %+v (the first of the limits left at 0)", d, want)
	}
	d = e.allowAll(k, []store.Limit{roomy, short, long}, 1, false)
	want = store.Decision{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Hour, Limit: 2}
	if d != want {
		e.Errorf("denied by two: %+v, want %+v (the longer RetryAfter)", d, want)
	}
	e.advance(time.Second)
	d = e.allowAll(k, []store.Limit{long, short, roomy}, 1, false)
	want = store.Decision{Remaining: 0, RetryAfter: time.Minute - time.Second, ResetAfter: time.Hour - time.Second, Limit: 0}
	if d != want {
		e.Errorf("denied by one: %+v, want %+v", d, want)
	}
}

// multiSharesState: a key's state under a limit is the same whether Allow
// or AllowAll takes from it.
func multiSharesState(e *env) {
	a := store.Limit{Algorithm: store.SlidingWindow, Limit: 4, Period: time.Minute}
	b := store.Limit{Algorithm: store.LeakyBucket, Limit: 60, Period: time.Minute, Burst: 10}
	k := e.name("k")
	e.allow(k, a, 3, false)
	if d := e.allowAll(k, []store.Limit{b, a}, 2, false); d.Allowed || d.Limit != 1 {
		e.Errorf("AllowAll after Allow took 3 of a's 4: %+v, want denied by a", d)
	}
	if d := e.allowAll(k, []store.Limit{b, a}, 1, false); !d.Allowed || d.Remaining != 0 || d.Limit != 1 {
		e.Errorf("AllowAll of a's last unit: %+v, want allowed, a at 0", d)
	}
	if d := e.allow(k, b, 1, true); d.Remaining != 8 {
		e.Errorf("b after one unit through AllowAll: remaining %d, want 8 (10 - 1, less the peek's 1)", d.Remaining)
	}
}

// multiConcurrent: callers at once on one key with two limits never get
// more than the tighter admits, and each limit counts exactly the admitted.
func multiConcurrent(e *env) {
	window := store.Limit{Algorithm: store.FixedWindow, Limit: 50, Period: time.Hour}
	log := store.Limit{Algorithm: store.SlidingLog, Limit: 30, Period: time.Hour}
	ls := []store.Limit{window, log}
	k := e.name("k")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				d, err := e.s.AllowAll(e.ctx, k, ls, 1, false)
				if err != nil {
					e.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	eq(e, "admitted", admitted.Load(), 30)
	if d := e.allow(k, window, 1, true); d.Remaining != 19 {
		e.Errorf("the window after 30 admissions: remaining %d, want 19 (50 - 30, less the peek's 1)", d.Remaining)
	}
}
