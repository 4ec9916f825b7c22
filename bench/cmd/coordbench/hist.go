package main

import (
	"math"
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram in the manner of HdrHistogram:
// values (nanoseconds) below 2*subBuckets are counted exactly; above that,
// every power-of-two range is split into subBuckets equal buckets, so a
// value is known to within 1/subBuckets (1.6%) of itself. It takes a fixed
// 30 KB, records without allocating, and two histograms merge by adding
// their counts. Not safe for concurrent use: each worker keeps its own and
// they are merged at the end.
type hist struct {
	counts   [numBuckets]uint64
	total    uint64
	sum      float64 // ns
	min, max uint64  // ns
}

const (
	subBits    = 6
	subBuckets = 1 << subBits // 64
	// Values need 64 bits at most: the top bucket group has exponent 64-subBits-1.
	numBuckets = (64-subBits-1)*subBuckets + 2*subBuckets
)

// bucketOf returns the bucket of v: v itself below 2*subBuckets; otherwise
// e*subBuckets + (v >> e), where e keeps v's top subBits+1 bits.
func bucketOf(v uint64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	e := bits.Len64(v) - (subBits + 1)
	return e*subBuckets + int(v>>uint(e))
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < 2*subBuckets {
		return uint64(i), uint64(i)
	}
	e := i/subBuckets - 1
	sub := uint64(i - e*subBuckets)
	lo = sub << uint(e)
	return lo, lo + (1 << uint(e)) - 1
}

// record adds one latency.
func (h *hist) record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[bucketOf(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
	h.sum += float64(v)
}

// merge adds o's counts to h.
func (h *hist) merge(o *hist) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
	h.sum += o.sum
}

// quantile returns the value at quantile q (0 < q <= 1): the midpoint of the
// bucket holding the ceil(q*total)-th smallest value, clamped to the
// recorded min and max. 0 if nothing was recorded.
func (h *hist) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	if rank > h.total {
		rank = h.total
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := lo + (hi-lo)/2
			v = max(v, h.min)
			v = min(v, h.max)
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

// mean returns the mean latency.
func (h *hist) mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.total))
}

// Latency is a histogram's summary, in microseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Min   float64 `json:"min_us"`
	Max   float64 `json:"max_us"`
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (h *hist) summary() Latency {
	if h.total == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.total, Mean: us(h.mean()),
		P50: us(h.quantile(0.50)), P90: us(h.quantile(0.90)), P99: us(h.quantile(0.99)), P999: us(h.quantile(0.999)),
		Min: us(time.Duration(h.min)), Max: us(time.Duration(h.max)),
	}
}
