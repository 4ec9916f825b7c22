package storetest

import (
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
)

func hitsTests() []test {
	return []test{
		{"CountHits", limitCountHits},
		{"CountHitsConcurrent", limitCountHitsConcurrent},
	}
}

func (e *env) countHits(hits ...store.Hit) ([]int64, time.Time) {
	e.Helper()
	out, err := e.s.CountHits(e.ctx, hits)
	noErr(e, "CountHits", err)
	if len(out) != len(hits) {
		e.Fatalf("CountHits of %d counters: %d counts", len(hits), len(out))
	}
	counts := make([]int64, len(out))
	for i, c := range out {
		counts[i] = c.Count
		if d := c.Now.Sub(out[0].Now); d < -time.Second || d > time.Second {
			e.Errorf("counter %d's time %v, the first's %v", i, c.Now, out[0].Now)
		}
	}
	return counts, out[0].Now
}

// limitCountHits: counts add up within a window whatever their sum, 0 hits
// read, a new window starts at 0, counters of other periods and keys and
// the key's Allow states are apart, a step back of the clock keeps the
// later window, and the store's time is answered.
func limitCountHits(e *env) {
	key, other := e.name("k"), e.name("o")
	sec := func(key string, n int64) store.Hit { return store.Hit{Key: key, Period: time.Second, Hits: n} }
	e.advance(time.Hour) // the start of a window
	check := func(what string, got []int64, want ...int64) {
		e.Helper()
		for i := range want {
			if got[i] != want[i] {
				e.Fatalf("%s: counts %v, want %v", what, got, want)
			}
		}
	}
	c, now := e.countHits(sec(key, 3))
	check("first", c, 3)
	if d := now.Sub(e.now()); d < -time.Second || d > time.Second {
		e.Errorf("now %v, the store's clock %v", now, e.now())
	}
	c, _ = e.countHits(sec(key, 5), sec(key, 0), sec(other, 2), store.Hit{Key: key, Period: time.Minute, Hits: 7})
	check("same window", c, 8, 8, 2, 7)
	// The key's Allow states are its own: a fixed window of 1/s is untouched.
	if d := e.allow(key, store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Second}, 1, false); !d.Allowed {
		e.Errorf("Allow after CountHits of the same key: %+v", d)
	}
	c, _ = e.countHits(sec(key, 0))
	check("read", c, 8)
	e.advance(999 * ms)
	c, _ = e.countHits(sec(key, 1))
	check("end of the window", c, 9)
	e.advance(ms)
	c, _ = e.countHits(sec(key, 1), store.Hit{Key: key, Period: time.Minute, Hits: 1})
	check("next window", c, 1, 8)
	e.advance(-1500 * ms) // a step back into the window before: the later one stays current
	c, _ = e.countHits(sec(key, 2))
	check("after a step back", c, 3)
	e.advance(2500 * ms)
	c, _ = e.countHits(sec(key, 0))
	check("two windows on", c, 0)
	// A count stops at MaxHitCount, whatever is added.
	c, _ = e.countHits(sec(key, store.MaxHitCount-1), sec(key, 1<<62), sec(key, 5))
	check("saturated", c, store.MaxHitCount-1, store.MaxHitCount, store.MaxHitCount)
}

// limitCountHitsConcurrent: 64 callers add to one counter at once; every
// count after from 1 to the sum is answered exactly once.
func limitCountHitsConcurrent(e *env) {
	key := e.name("k")
	const workers = 64
	counts := make([]int64, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			<-start
			var c []store.HitCount
			c, errs[i] = e.s.CountHits(e.ctx, []store.Hit{{Key: key, Period: time.Hour, Hits: 1}})
			if len(c) == 1 {
				counts[i] = c[0].Count
			}
		})
	}
	close(start)
	wg.Wait()
	seen := map[int64]bool{}
	for i, c := range counts {
		noErr(e, "CountHits", errs[i])
		if c < 1 || c > workers || seen[c] {
			e.Fatalf("counts %v: want each of 1..%d once", counts, workers)
		}
		seen[c] = true
	}
}
