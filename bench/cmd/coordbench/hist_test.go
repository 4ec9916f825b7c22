package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(v uint64) {
		i := bucketOf(v)
		if i < 0 || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d, outside [0, %d)", v, i, numBuckets)
		}
		lo, hi := bucketRange(i)
		if v < lo || v > hi {
			t.Fatalf("bucketOf(%d) = %d with range [%d, %d]", v, i, lo, hi)
		}
		// Relative width: at most 1/subBuckets of the value.
		if float64(hi-lo) > float64(lo)/subBuckets {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of its values", i, lo, hi, subBuckets)
		}
	}
	for v := uint64(0); v < 5000; v++ {
		check(v)
	}
	for range 100000 {
		check(rng.Uint64() >> rng.IntN(64))
	}
	check(math.MaxUint64)
	check(1 << 63)
	// Buckets are ordered like their values, and adjacent.
	for i := 1; i < numBuckets; i++ {
		_, prevHi := bucketRange(i - 1)
		lo, _ := bucketRange(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, bucket %d ends at %d", i, lo, i-1, prevHi)
		}
	}
}

func TestQuantilesExactBelow128ns(t *testing.T) {
	var h hist
	for v := 1; v <= 100; v++ {
		h.record(time.Duration(v))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {0.999, 100}, {1, 100}, {0.01, 1}, {0, 1}} {
		if got := h.quantile(c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if h.mean() != 50 { // 50.5 truncated
		t.Errorf("mean = %v, want 50", h.mean())
	}
}

// The histogram's quantiles are within 1/64 of the exact ones, on a
// latency-like (log-normal) sample.
func TestQuantilesMatchSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h hist
	samples := make([]time.Duration, 200000)
	for i := range samples {
		d := time.Duration(math.Exp(rng.NormFloat64()*1.2+math.Log(300e3))) + 1 // around 300µs
		samples[i] = d
		h.record(d)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := samples[int(math.Ceil(q*float64(len(samples))))-1]
		got := h.quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 1.0/subBuckets {
			t.Errorf("quantile(%v) = %v, exact %v: off by %.2f%%", q, got, exact, rel*100)
		}
	}
	if h.quantile(1) != samples[len(samples)-1] {
		t.Errorf("quantile(1) = %v, want the max %v", h.quantile(1), samples[len(samples)-1])
	}
	if h.quantile(0) < samples[0] {
		t.Errorf("quantile(0) = %v below the min %v", h.quantile(0), samples[0])
	}
}

func TestMergeEqualsOneHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var all, a, b hist
	for i := range 10000 {
		d := time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
		all.record(d)
		if i%3 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	var m hist
	m.merge(&a)
	m.merge(&b)
	m.merge(&hist{}) // empty: no effect
	if m != all {
		t.Fatal("merging two halves differs from recording all")
	}
	if s := m.summary(); s.Count != 10000 || s.P50 <= 0 || s.P99 < s.P50 || s.P999 < s.P99 || s.Max < s.P999 || s.Min > s.P50 {
		t.Fatalf("summary out of order: %+v", s)
	}
}

func TestEmptyHistogram(t *testing.T) {
	var h hist
	if h.quantile(0.99) != 0 || h.mean() != 0 || h.summary() != (Latency{}) {
		t.Fatal("an empty histogram reports values")
	}
	h.record(-5) // a clock step backwards counts as 0
	if h.quantile(0.5) != 0 || h.total != 1 {
		t.Fatalf("negative latency: quantile %v total %d", h.quantile(0.5), h.total)
	}
}
