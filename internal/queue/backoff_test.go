package queue_test

import (
	"math"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/queue"
)

// almostOne is the largest jitter rand.Float64 can return.
var almostOne = math.Nextafter(1, 0)

func TestBackoff(t *testing.T) {
	const base, max = time.Second, 5 * time.Minute
	for _, tc := range []struct {
		attempt int
		full    time.Duration // base doubled per attempt after the first, capped at max
	}{
		{-1, base}, // not a real attempt: no doubling
		{0, base},
		{1, base},
		{2, 2 * base},
		{3, 4 * base},
		{4, 8 * base},
		{8, 128 * base},
		{9, 256 * base},
		{10, max}, // 512s capped at 300s
		{11, max},
		{64, max},  // 2^63 s would overflow without the cap
		{100, max}, // likewise
		{math.MaxInt32, max},
	} {
		for _, j := range []struct {
			name   string
			jitter float64
			lo, hi time.Duration // inclusive bounds
		}{
			{"jitter 0", 0, tc.full / 2, tc.full / 2},
			{"jitter 0.5", 0.5, tc.full * 3 / 4, tc.full * 3 / 4},
			// The upper half scaled by almost 1: just under full; never more.
			{"jitter ~1", almostOne, tc.full - time.Microsecond, tc.full},
		} {
			got := queue.Backoff(base, max, tc.attempt, j.jitter)
			if got < j.lo || got > j.hi {
				t.Errorf("Backoff(%v, %v, attempt %d, %s) = %v, want in [%v, %v]", base, max, tc.attempt, j.name, got, j.lo, j.hi)
			}
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		base, max time.Duration
	}{
		{"defaults", time.Second, 5 * time.Minute},
		{"base equals max", time.Minute, time.Minute},
		{"max not a power-of-two multiple of base", 3 * time.Second, 100 * time.Second},
		{"tiny", time.Nanosecond, 10 * time.Nanosecond},
		{"a day", 100 * time.Millisecond, 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := time.Duration(0)
			for attempt := 1; attempt <= 200; attempt++ {
				for _, jitter := range []float64{0, 0.25, 0.5, 0.75, almostOne} {
					d := queue.Backoff(tc.base, tc.max, attempt, jitter)
					if d < tc.base/2 || d > tc.max {
						t.Fatalf("Backoff(attempt %d, jitter %v) = %v, want in [%v, %v]", attempt, jitter, d, tc.base/2, tc.max)
					}
				}
				// With the same jitter, a later attempt never waits less.
				d := queue.Backoff(tc.base, tc.max, attempt, 0)
				if d < prev {
					t.Fatalf("Backoff(attempt %d) = %v < Backoff(attempt %d) = %v", attempt, d, attempt-1, prev)
				}
				prev = d
			}
			if d := queue.Backoff(tc.base, tc.max, 200, 0); d != tc.max/2 {
				t.Errorf("Backoff(attempt 200, jitter 0) = %v, want max/2 = %v", d, tc.max/2)
			}
		})
	}
}

// TestBackoffHugeMaxDoesNotOverflow: queue.nack_backoff_max has no upper
// bound in config, and Backoff doubles d while d < max, so with a max above
// half of the largest time.Duration (about 146 years) the doubling overflows
// and the delay comes out negative or zero instead of capped at max.
func TestBackoffHugeMaxDoesNotOverflow(t *testing.T) {
	const base = time.Second
	const max = time.Duration(math.MaxInt64)
	for _, attempt := range []int{34, 35, 36, 40, 64, 100} {
		d := queue.Backoff(base, max, attempt, 0)
		if d < base/2 || d > max {
			t.Errorf("Backoff(%v, %v, attempt %d, 0) = %v, want in [%v, %v]", base, max, attempt, d, base/2, max)
		}
		if prev := queue.Backoff(base, max, attempt-1, 0); d < prev {
			t.Errorf("Backoff(attempt %d) = %v < Backoff(attempt %d) = %v", attempt, d, attempt-1, prev)
		}
	}
}
