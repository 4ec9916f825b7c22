package storetest

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
)

func limitTests() []test {
	return append([]test{
		{"Table", limitTable},
		{"Spec", limitSpec},
		{"RetryAfterExact", limitRetryAfterExact},
		{"DenialAndPeekConsumeNothing", limitNoConsume},
		{"FixedWindowBoundaryBurst", limitFixedWindowBoundaryBurst},
		{"SlidingLogAnyWindow", limitSlidingLogAnyWindow},
		{"TokenBucketBurstThenRefill", limitTokenBucketBurstThenRefill},
		{"LeakyBucketSpacing", limitLeakyBucketSpacing},
		{"IndependentLimits", limitIndependent},
		{"PeriodTruncated", limitPeriodTruncated},
		{"Concurrent", limitConcurrent},
		{"ClockStepBackKeepsCounts", limitClockStepBack},
		{"ClockStepBackSpec", limitClockStepBackSpec},
		{"ClockStepBackBounds", limitClockStepBackBounds},
	}, append(multiLimitTests(), hitsTests()...)...)
}

var algorithms = []store.Algorithm{store.FixedWindow, store.SlidingWindow, store.SlidingLog, store.TokenBucket, store.LeakyBucket}

func algName(a store.Algorithm) string {
	return [...]string{"", "FixedWindow", "SlidingWindow", "SlidingLog", "TokenBucket", "LeakyBucket"}[a]
}

func limitName(l store.Limit) string {
	return fmt.Sprintf("%s_L%d_P%v_B%d", algName(l.Algorithm), l.Limit, l.Period, l.Burst)
}

// specLimits are the limits each algorithm is checked with: round and
// awkward emission intervals, limit 1, bursts above and below the limit.
func specLimits(a store.Algorithm) []store.Limit {
	lim := func(l int64, p time.Duration, b int64) store.Limit {
		return store.Limit{Algorithm: a, Limit: l, Period: p, Burst: b}
	}
	switch a {
	case store.FixedWindow:
		return []store.Limit{lim(5, time.Second, 0), lim(1, 250*time.Millisecond, 0), lim(3, 700*time.Millisecond, 0), lim(100, time.Minute, 0)}
	case store.SlidingWindow:
		return []store.Limit{lim(10, time.Second, 0), lim(1, time.Second, 0), lim(7, 1500*time.Millisecond, 0), lim(3, 333*time.Millisecond, 0)}
	case store.SlidingLog:
		return []store.Limit{lim(5, time.Second, 0), lim(1, 250*time.Millisecond, 0), lim(20, 3*time.Second, 0)}
	case store.TokenBucket:
		return []store.Limit{lim(10, time.Second, 0), lim(3, time.Second, 5), lim(7, time.Second, 1), lim(100, time.Minute, 20)}
	default:
		return []store.Limit{lim(10, time.Second, 0), lim(3, time.Second, 0), lim(3, time.Second, 4), lim(7, 2*time.Second, 2)}
	}
}

func (e *env) allow(key string, l store.Limit, cost int64, peek bool) store.Decision {
	e.Helper()
	d, err := e.s.Allow(e.ctx, key, l, cost, peek)
	noErr(e, "Allow "+key, err)
	return d
}

func nowMicro(e *env) int64 { return e.now().UnixMicro() }

// limitStep is one call of a table: advance the clock, then call.
type limitStep struct {
	adv  time.Duration
	cost int64
	peek bool
	want store.Decision
}

func yes(rem int64, reset time.Duration) store.Decision {
	return store.Decision{Allowed: true, Remaining: rem, ResetAfter: reset}
}

func no(rem int64, retry, reset time.Duration) store.Decision {
	return store.Decision{Remaining: rem, RetryAfter: retry, ResetAfter: reset}
}

const (
	ms = time.Millisecond
	s1 = time.Second
)

// limitTables are worked examples of ratelimit.go, each starting at base,
// which is at the start of a window. The comments give the state before
// each call.
var limitTables = []struct {
	limit store.Limit
	steps []limitStep
}{
	{store.Limit{Algorithm: store.FixedWindow, Limit: 3, Period: s1}, []limitStep{
		{0, 1, false, yes(2, s1)},
		{400 * ms, 1, false, yes(1, 600*ms)},
		{0, 2, false, no(1, 600*ms, 600*ms)}, // n=2: 2+2 > 3
		{0, 1, true, yes(0, 600*ms)},
		{0, 1, false, yes(0, 600*ms)},
		{599999 * us, 1, false, no(0, us, us)},
		{us, 3, false, yes(0, s1)},    // next window: the whole limit at once
		{2 * s1, 1, true, yes(2, s1)}, // two windows later
		{250 * ms, 2, false, yes(1, 750*ms)},
	}},
	{store.Limit{Algorithm: store.SlidingWindow, Limit: 10, Period: s1}, []limitStep{
		{0, 8, false, yes(2, 2*s1)},                    // w0 e=0
		{1250 * ms, 1, false, yes(3, 1750*ms)},         // w1 e=250ms prev=8: est = 8*0.75 = 6
		{0, 1, false, yes(2, 1750*ms)},                 // est 7
		{0, 1, false, yes(1, 1750*ms)},                 // est 8
		{0, 1, false, yes(0, 1750*ms)},                 // est 9
		{0, 1, false, no(0, 125*ms, 1750*ms)},          // est 10; 8(P-e)/P+4+1 <= 10 from e=375ms
		{124999 * us, 1, false, no(0, us, 1625001*us)}, // est 9.000008
		{us, 1, false, yes(0, 1625*ms)},                // e=375ms: est 9
		{0, 2, false, no(0, 250*ms, 1625*ms)},          // cur=5, est 10; 8(P-e)/P+5+2 <= 10 from e=625ms
		{s1, 2, false, yes(4, 1625*ms)},                // w2 e=375ms prev=5: est 3.125
		{s1, 10, false, no(8, 625*ms, 625*ms)},         // w3 e=375ms prev=2 cur=0: est 1.25; allowed from w4
		{625 * ms, 10, false, yes(0, 2*s1)},            // w4 e=0: est 0
		{0, 1, false, no(0, 1100*ms, 2*s1)},            // cur=10: in w5 10(P-e)/P+1 <= 10 from e=100ms
		{0, 10, false, no(0, 2*s1, 2*s1)},              // cost L with cur>0: not before w6
		{2*s1 - us, 10, true, no(9, us, us)},           // w5 e=P-1µs prev=10 cur=0: est 0.00001
		{us, 10, false, yes(0, 2*s1)},                  // w6 e=0: prev=0
	}},
	{store.Limit{Algorithm: store.SlidingLog, Limit: 3, Period: s1}, []limitStep{
		{0, 1, false, yes(2, s1)},                     // t=0
		{300 * ms, 1, false, yes(1, s1)},              // t=300ms
		{300 * ms, 2, false, no(1, 400*ms, 700*ms)},   // t=600ms: the entry at 0 frees enough at 1s
		{0, 1, true, yes(0, s1)},                      // peek
		{0, 1, false, yes(0, s1)},                     // entries 0, 300ms, 600ms
		{399999 * us, 1, false, no(0, us, 600001*us)}, // t=999999µs
		{us, 1, false, yes(0, s1)},                    // t=1s: the entry at 0 is gone
		{0, 1, false, no(0, 300*ms, s1)},              // entries 300ms, 600ms, 1s
		{0, 3, false, no(0, s1, s1)},                  // needs all three gone
		{2 * s1, 3, true, yes(0, s1)},                 // t=3s: empty log
		{0, 3, false, yes(0, s1)},                     //
		{ms, 1, false, no(0, 999*ms, 999*ms)},         //
	}},
	{store.Limit{Algorithm: store.TokenBucket, Limit: 10, Period: s1}, []limitStep{
		// T=100ms, em(1)=100ms, C=10, em(C)=1s
		{0, 1, false, yes(9, 100*ms)},
		{0, 9, false, yes(0, s1)},
		{0, 1, false, no(0, 100*ms, s1)},
		{50 * ms, 1, false, no(0, 50*ms, 950*ms)},
		{50 * ms, 1, false, yes(0, s1)},       // t=100ms: tat 1.1s
		{250 * ms, 2, true, yes(0, 950*ms)},   // t=350ms: 2.5 tokens, peek
		{0, 3, false, no(2, 50*ms, 750*ms)},   //
		{0, 2, false, yes(0, 950*ms)},         // the peeked call
		{5 * s1, 1, false, yes(9, 100*ms)},    // long idle: full bucket
		{0, 10, false, no(9, 100*ms, 100*ms)}, // the full cost needs a full bucket
	}},
	{store.Limit{Algorithm: store.TokenBucket, Limit: 2, Period: s1, Burst: 5}, []limitStep{
		// em(1)=500ms, em(C)=2.5s
		{0, 5, false, yes(0, 2500*ms)},
		{0, 1, false, no(0, 500*ms, 2500*ms)},
		{s1, 2, false, yes(0, 2500*ms)},
		{0, 1, true, no(0, 500*ms, 2500*ms)},
	}},
	{store.Limit{Algorithm: store.TokenBucket, Limit: 3, Period: s1}, []limitStep{
		// P/L is not a whole number of µs: T = ceil(333333.3µs) = 333334µs,
		// C*T = 1000002µs, so a full bucket still takes its 3 units at once.
		{0, 1, false, yes(2, 333334*us)},
		{0, 1, false, yes(1, 666668*us)},
		{0, 1, false, yes(0, 1000002*us)},
		{0, 1, false, no(0, 333334*us, 1000002*us)},
		{333334 * us, 1, false, yes(0, 1000002*us)},
		{5 * s1, 2, false, yes(1, 666668*us)},
	}},
	{store.Limit{Algorithm: store.LeakyBucket, Limit: 4, Period: s1}, []limitStep{
		// C=1, em(1)=250ms
		{0, 1, false, yes(0, 250*ms)},
		{0, 1, false, no(0, 250*ms, 250*ms)},
		{249999 * us, 1, false, no(0, us, us)},
		{us, 1, false, yes(0, 250*ms)},
		{s1, 1, true, yes(0, 250*ms)},
		{0, 1, false, yes(0, 250*ms)},
		{100 * ms, 1, false, no(0, 150*ms, 150*ms)},
	}},
	{store.Limit{Algorithm: store.LeakyBucket, Limit: 3, Period: s1}, []limitStep{
		// em(1) = ceil(333333.3µs) = 333334µs
		{0, 1, false, yes(0, 333334*us)},
		{0, 1, false, no(0, 333334*us, 333334*us)},
		{333334 * us, 1, false, yes(0, 333334*us)},
	}},
	{store.Limit{Algorithm: store.LeakyBucket, Limit: 10, Period: s1, Burst: 3}, []limitStep{
		// em(1)=100ms, C=3, em(C)=300ms
		{0, 1, false, yes(2, 100*ms)},
		{0, 2, false, yes(0, 300*ms)},
		{0, 1, false, no(0, 100*ms, 300*ms)},
		{150 * ms, 1, false, yes(0, 250*ms)},
		{0, 3, false, no(0, 250*ms, 250*ms)},
	}},
}

func limitTable(e *env) {
	for _, tb := range limitTables {
		e.sub(limitName(tb.limit), func(e *env) {
			key := e.name("k")
			for i, st := range tb.steps {
				e.advance(st.adv)
				got := e.allow(key, tb.limit, st.cost, st.peek)
				if got != st.want {
					e.Errorf("step %d (t=%v, cost %d, peek %v): got %+v, want %+v", i, e.now().Sub(base), st.cost, st.peek, got, st.want)
				}
			}
		})
	}
}

// limitCall is one call of a generated schedule.
type limitCall struct {
	adv  time.Duration
	cost int64
	peek bool
}

// schedule generates n calls: bursts at one instant, steps around the
// emission interval, within the period, and past it.
func schedule(rng *rand.Rand, l store.Limit, n int) []limitCall {
	p := l.Period.Microseconds()
	calls := make([]limitCall, n)
	for i := range calls {
		var adv int64
		switch r := rng.IntN(10); {
		case r < 3:
		case r < 6:
			adv = rng.Int64N(p/l.Limit + 2)
		case r < 9:
			adv = rng.Int64N(p/2 + 1)
		default:
			adv = rng.Int64N(3*p + 1)
		}
		cost := int64(1)
		if rng.IntN(3) == 0 {
			cost = 1 + rng.Int64N(l.Capacity())
		}
		calls[i] = limitCall{usec(adv), cost, rng.IntN(5) == 0}
	}
	return calls
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// limitSpec compares every decision over generated schedules with the
// specification in ratelimit.go.
func limitSpec(e *env) {
	for _, a := range algorithms {
		e.sub(algName(a), func(e *env) {
			for i, l := range specLimits(a) {
				key := e.name(fmt.Sprint("k", i))
				m := newLimitModel(l)
				for j, c := range schedule(newRand(uint64(i)), l, 300) {
					e.advance(c.adv)
					got := e.allow(key, l, c.cost, c.peek)
					want := m.allow(nowMicro(e), c.cost, c.peek)
					if got != want {
						e.Fatalf("%s call %d (t=%v, cost %d, peek %v): got %+v, want %+v", limitName(l), j, e.now().Sub(base), c.cost, c.peek, got, want)
					}
				}
			}
		})
	}
}

// limitRetryAfterExact checks RetryAfter without the model: on two keys with
// the same history, the denied call succeeds after exactly RetryAfter on one
// and is still denied, with RetryAfter 1µs, one microsecond earlier on the
// other.
func limitRetryAfterExact(e *env) {
	for _, a := range algorithms {
		e.sub(algName(a), func(e *env) {
			for i, l := range specLimits(a) {
				rng := newRand(uint64(100 + i))
				for trial := range 10 {
					k1, k2 := e.name(fmt.Sprint("a", i, "-", trial)), e.name(fmt.Sprint("b", i, "-", trial))
					what := fmt.Sprintf("%s trial %d", limitName(l), trial)
					both := func(cost int64) store.Decision {
						d1, d2 := e.allow(k1, l, cost, false), e.allow(k2, l, cost, false)
						if d1 != d2 {
							e.Fatalf("%s: same history, different decisions: %+v and %+v", what, d1, d2)
						}
						return d1
					}
					cost := func() int64 { return 1 + rng.Int64N(l.Capacity()) }
					for _, c := range schedule(rng, l, rng.IntN(int(2*l.Capacity())+1)) {
						e.advance(c.adv)
						both(c.cost)
					}
					var d store.Decision
					var c int64
					for n := 0; ; n++ {
						if n > 10_000 {
							e.Fatalf("%s: never denied", what)
						}
						c = cost()
						if d = both(c); !d.Allowed {
							break
						}
					}
					if d.RetryAfter <= 0 {
						e.Fatalf("%s: denied with RetryAfter %v", what, d.RetryAfter)
					}
					e.advance(d.RetryAfter - us)
					if got := e.allow(k2, l, c, false); got.Allowed || got.RetryAfter != us {
						e.Errorf("%s: cost %d 1µs before RetryAfter %v: got %+v, want denied with RetryAfter 1µs", what, c, d.RetryAfter, got)
					}
					e.advance(us)
					if got := e.allow(k1, l, c, false); !got.Allowed {
						e.Errorf("%s: cost %d after RetryAfter %v: got %+v, want allowed", what, c, d.RetryAfter, got)
					}
					if got := e.allow(k2, l, c, false); !got.Allowed {
						e.Errorf("%s: cost %d after RetryAfter %v (after a denial): got %+v, want allowed", what, c, d.RetryAfter, got)
					}
					e.advance(usec(rng.Int64N(l.Period.Microseconds())))
				}
			}
		})
	}
}

// limitNoConsume checks without the model that peeks and denials change
// nothing: key k1 gets extra peeks and denied calls, k2 does not, and both
// answer every call of the shared schedule alike. A peek answers what the
// call it precedes gets.
func limitNoConsume(e *env) {
	for _, a := range algorithms {
		e.sub(algName(a), func(e *env) {
			for i, l := range specLimits(a) {
				rng := newRand(uint64(200 + i))
				k1, k2 := e.name(fmt.Sprint("a", i)), e.name(fmt.Sprint("b", i))
				for j, c := range schedule(rng, l, 150) {
					what := fmt.Sprintf("%s call %d (t=%v)", limitName(l), j, e.now().Sub(base))
					e.advance(c.adv)
					for range 2 {
						x := 1 + rng.Int64N(l.Capacity())
						p1, p2 := e.allow(k1, l, x, true), e.allow(k1, l, x, true)
						if p1 != p2 {
							e.Fatalf("%s: two peeks of cost %d differ: %+v, %+v", what, x, p1, p2)
						}
						if !p1.Allowed {
							if d := e.allow(k1, l, x, false); d != p1 {
								e.Fatalf("%s: denied peek of cost %d %+v, then the call got %+v", what, x, p1, d)
							}
						}
					}
					peek := e.allow(k2, l, c.cost, true)
					d1, d2 := e.allow(k1, l, c.cost, false), e.allow(k2, l, c.cost, false)
					if d1 != d2 {
						e.Fatalf("%s: cost %d after extra peeks and denials %+v, without %+v", what, c.cost, d1, d2)
					}
					if peek != d2 {
						e.Fatalf("%s: peek of cost %d %+v, then the call got %+v", what, c.cost, peek, d2)
					}
				}
			}
		})
	}
}

func limitFixedWindowBoundaryBurst(e *env) {
	l := store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Second}
	key := e.name("k")
	e.advance(time.Second - time.Millisecond) // 1ms before the window ends
	burst := func(what string, retry time.Duration) {
		e.Helper()
		for i := range 10 {
			if d := e.allow(key, l, 1, false); !d.Allowed || d.Remaining != int64(9-i) {
				e.Fatalf("%s call %d: %+v, want allowed with remaining %d", what, i, d, 9-i)
			}
		}
		if d := e.allow(key, l, 1, false); d != no(0, retry, retry) {
			e.Errorf("%s call 11: %+v, want %+v", what, d, no(0, retry, retry))
		}
	}
	burst("1ms before the boundary", time.Millisecond)
	e.advance(time.Millisecond)
	burst("at the boundary", time.Second) // 2L admitted within 1ms
}

// limitSlidingLogAnyWindow checks that no window of length P, anywhere,
// holds more than L of admitted cost.
func limitSlidingLogAnyWindow(e *env) {
	l := store.Limit{Algorithm: store.SlidingLog, Limit: 5, Period: time.Second}
	key := e.name("k")
	rng := newRand(7)
	type adm struct{ t, c int64 }
	var admitted []adm
	for range 1000 {
		e.advance(usec(rng.Int64N(150_000)))
		c := 1 + rng.Int64N(2)
		if e.allow(key, l, c, false).Allowed {
			admitted = append(admitted, adm{nowMicro(e), c})
		}
	}
	if len(admitted) < 100 {
		e.Fatalf("only %d admissions over %v", len(admitted), e.now().Sub(base))
	}
	// The fullest window starts at an admission.
	p := l.Period.Microseconds()
	for i, a := range admitted {
		sum := int64(0)
		for _, b := range admitted[i:] {
			if b.t >= a.t+p {
				break
			}
			sum += b.c
		}
		if sum > l.Limit {
			e.Fatalf("window [%v, +%v) admitted %d > %d", usec(a.t).String(), l.Period, sum, l.Limit)
		}
	}
}

func limitTokenBucketBurstThenRefill(e *env) {
	l := store.Limit{Algorithm: store.TokenBucket, Limit: 5, Period: time.Second, Burst: 20}
	key := e.name("k")
	drain := func(what string, want int64) {
		e.Helper()
		for i := range want {
			if d := e.allow(key, l, 1, false); !d.Allowed {
				e.Fatalf("%s: call %d denied: %+v", what, i, d)
			}
		}
		if d := e.allow(key, l, 1, false); d.Allowed || d.RetryAfter != 200*time.Millisecond {
			e.Errorf("%s: call %d: %+v, want denied with RetryAfter 200ms", what, want, d)
		}
	}
	drain("fresh bucket", 20)
	e.advance(time.Second)
	drain("after 1s", 5)
	e.advance(200 * time.Millisecond)
	drain("after 200ms", 1)
	e.advance(time.Hour)
	drain("after an hour", 20)
}

// limitLeakyBucketSpacing checks that a leaky bucket of burst 0 admits one
// call at a time, exactly T = ceil(P/L) apart.
func limitLeakyBucketSpacing(e *env) {
	for _, l := range []store.Limit{
		{Algorithm: store.LeakyBucket, Limit: 10, Period: time.Second},
		{Algorithm: store.LeakyBucket, Limit: 3, Period: time.Second},
	} {
		key := e.name(limitName(l))
		gap := usec((l.Period.Microseconds() + l.Limit - 1) / l.Limit)
		e.advance(time.Hour)
		for i := range 20 {
			if d := e.allow(key, l, 1, false); !d.Allowed {
				e.Fatalf("%s admission %d: %+v", limitName(l), i, d)
			}
			if d := e.allow(key, l, 1, false); d.Allowed || d.RetryAfter != gap {
				e.Fatalf("%s after admission %d: %+v, want denied with RetryAfter %v", limitName(l), i, d, gap)
			}
			e.advance(gap - us)
			if d := e.allow(key, l, 1, false); d.Allowed {
				e.Fatalf("%s: admitted %v after admission %d, want %v", limitName(l), gap-us, i, gap)
			}
			e.advance(us)
		}
	}
}

func limitIndependent(e *env) {
	key := e.name("k")
	a := store.Limit{Algorithm: store.FixedWindow, Limit: 2, Period: time.Second}
	e.allow(key, a, 2, false)
	others := []store.Limit{
		{Algorithm: store.FixedWindow, Limit: 3, Period: time.Second},
		{Algorithm: store.FixedWindow, Limit: 2, Period: 2 * time.Second},
		{Algorithm: store.SlidingWindow, Limit: 2, Period: time.Second},
		{Algorithm: store.SlidingLog, Limit: 2, Period: time.Second},
		{Algorithm: store.TokenBucket, Limit: 2, Period: time.Second},
		{Algorithm: store.TokenBucket, Limit: 2, Period: time.Second, Burst: 1},
		{Algorithm: store.LeakyBucket, Limit: 2, Period: time.Second},
		{Algorithm: store.LeakyBucket, Limit: 2, Period: time.Second, Burst: 2},
	}
	for _, o := range others {
		want := newLimitModel(o).allow(nowMicro(e), 1, false)
		if got := e.allow(key, o, 1, false); got != want {
			e.Errorf("%s on a key exhausted under another limit: %+v, want a fresh state's %+v", limitName(o), got, want)
		}
	}
	if d := e.allow(key, a, 1, false); d != no(0, time.Second, time.Second) {
		e.Errorf("the first limit after the others: %+v, want %+v", d, no(0, time.Second, time.Second))
	}
}

func limitPeriodTruncated(e *env) {
	key := e.name("k")
	l := store.Limit{Algorithm: store.SlidingLog, Limit: 1, Period: time.Second + 999*time.Nanosecond}
	if d := e.allow(key, l, 1, false); d != yes(0, time.Second) {
		e.Errorf("first call: %+v, want %+v", d, yes(0, time.Second))
	}
	e.advance(time.Second - us)
	if d := e.allow(key, l, 1, false); d != no(0, us, us) {
		e.Errorf("1µs before the truncated period: %+v, want %+v", d, no(0, us, us))
	}
	e.advance(us)
	if d := e.allow(key, l, 1, false); !d.Allowed {
		e.Errorf("after the truncated period: %+v, want allowed", d)
	}
}

// limitConcurrent checks that each decision is atomic: of 64 simultaneous
// calls exactly as many are allowed as the limiter has room for, each
// seeing a distinct remaining count.
func limitConcurrent(e *env) {
	for _, a := range algorithms {
		e.sub(algName(a), func(e *env) {
			l := store.Limit{Algorithm: a, Limit: 10, Period: time.Minute}
			key := e.name("k")
			const workers = 64
			ds := make([]store.Decision, workers)
			errs := make([]error, workers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range workers {
				wg.Go(func() {
					<-start
					ds[i], errs[i] = e.s.Allow(e.ctx, key, l, 1, false)
				})
			}
			close(start)
			wg.Wait()
			var rems []int
			for i, d := range ds {
				noErr(e, "Allow", errs[i])
				if d.Allowed {
					rems = append(rems, int(d.Remaining))
				}
			}
			want := l.Capacity() // 10, or 1 for the leaky bucket
			if int64(len(rems)) != want {
				e.Fatalf("%d of %d calls allowed, want %d", len(rems), workers, want)
			}
			sort.Ints(rems)
			for i, r := range rems {
				if r != i {
					e.Fatalf("remaining counts of the allowed calls = %v, want 0..%d", rems, want-1)
				}
			}
		})
	}
}

// limitClockStepBack is the failover to a master whose clock is behind: a
// fixed window of 5/s takes its 5 at the start of a window, then the store's
// clock steps back into the windows before it, twice, within 40ms of real
// time. The later window's count stays current, so nothing more is admitted
// until it ends, by the store's clock.
func limitClockStepBack(e *env) {
	for _, a := range []store.Algorithm{store.FixedWindow, store.SlidingWindow} {
		e.sub(algName(a), func(e *env) {
			l := store.Limit{Algorithm: a, Limit: 5, Period: time.Second}
			key := e.name("k")
			admitted := 0
			take := func() {
				for range 10 {
					if e.allow(key, l, 1, false).Allowed {
						admitted++
					}
				}
			}
			e.advance(time.Hour) // the start of a window
			take()
			e.advance(20*ms - 700*ms) // 20ms of real time later, the clock is 700ms behind
			take()
			e.advance(20*ms - 1200*ms) // and again, 1.2s further back
			take()
			if admitted != 5 {
				e.Fatalf("%d admitted in 40ms by a limit of 5/s, its store's clock stepping back 700ms then 1.2s; want 5", admitted)
			}
			// Denied until the window of the 5 ends, by the store's clock:
			// 1s - 40ms + 1.9s from now.
			end := time.Hour + time.Second
			now := e.now().Sub(base)
			want := no(0, end-now, end-now)
			if a == store.SlidingWindow {
				want = no(0, end+200*ms-now, end+time.Second-now) // prev=5: 5(P-e)/P+1 <= 5 from e=200ms
			}
			if d := e.allow(key, l, 1, false); d != want {
				e.Errorf("after the step backs: %+v, want %+v", d, want)
			}
		})
	}
}

// stepBackSchedule is schedule with the store's clock stepping back now and
// then, by up to two periods.
func stepBackSchedule(rng *rand.Rand, l store.Limit, n int) []limitCall {
	calls := schedule(rng, l, n)
	for i := range calls {
		if rng.IntN(8) == 0 {
			calls[i].adv = -usec(rng.Int64N(2*l.Period.Microseconds() + 1))
		}
	}
	return calls
}

// limitClockStepBackSpec compares every decision with the specification
// while the store's clock steps back. It steps back only while the state
// must still be kept, since a backend may drop it once the clock has passed
// its lifetime.
func limitClockStepBackSpec(e *env) {
	for _, a := range algorithms {
		e.sub(algName(a), func(e *env) {
			for i, l := range specLimits(a) {
				key := e.name(fmt.Sprint("k", i))
				m := newLimitModel(l)
				latest := nowMicro(e) // the latest time the clock has shown
				steps := 0
				for j, c := range stepBackSchedule(newRand(uint64(300+i)), l, 300) {
					if c.adv < 0 && latest >= m.lifetime() {
						c.adv = 0
					}
					if c.adv < 0 {
						steps++
					}
					e.advance(c.adv)
					latest = max(latest, nowMicro(e))
					got := e.allow(key, l, c.cost, c.peek)
					want := m.allow(nowMicro(e), c.cost, c.peek)
					if got != want {
						e.Fatalf("%s call %d (t=%v after a step of %v, cost %d, peek %v): got %+v, want %+v",
							limitName(l), j, e.now().Sub(base), c.adv, c.cost, c.peek, got, want)
					}
				}
				if steps < 10 {
					e.Fatalf("%s: only %d step backs", limitName(l), steps)
				}
			}
		})
	}
}

// limitClockStepBackBounds checks, without the model, what each algorithm
// admits in any period of real time while the store's clock steps back:
// real time only moves on, the store's clock is real time less an offset
// that only grows. The windows admit at most 2L in any period, the sliding
// log at most L, the buckets at most C + L.
func limitClockStepBackBounds(e *env) {
	for _, a := range algorithms {
		e.sub(algName(a), func(e *env) {
			for i, l := range specLimits(a) {
				key := e.name(fmt.Sprint("k", i))
				rng := newRand(uint64(400 + i))
				p := l.Period.Microseconds()
				type adm struct{ t, c int64 }
				var admitted []adm
				real := int64(0)
				for _, c := range schedule(rng, l, 400) {
					real += c.adv.Microseconds()
					e.advance(c.adv)
					if rng.IntN(6) == 0 {
						e.advance(-usec(rng.Int64N(2*p + 1)))
					}
					if d := e.allow(key, l, c.cost, false); d.Allowed {
						admitted = append(admitted, adm{real, c.cost})
					}
				}
				bound := 2 * l.Limit
				switch a {
				case store.SlidingLog:
					bound = l.Limit
				case store.TokenBucket, store.LeakyBucket:
					bound = l.Capacity() + l.Limit
				}
				total := int64(0)
				for j, x := range admitted {
					total += x.c
					sum := int64(0)
					for _, y := range admitted[j:] {
						if y.t >= x.t+p {
							break
						}
						sum += y.c
					}
					if sum > bound {
						e.Fatalf("%s: %d admitted in the %v of real time from %v, want at most %d", limitName(l), sum, l.Period, usec(x.t), bound)
					}
				}
				if total < l.Limit {
					e.Fatalf("%s: only %d admitted in all", limitName(l), total)
				}
			}
		})
	}
}
