package server

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// StoreLatency follows the store's recent latency, to shed new work while
// the store answers slowly (limits.shed_store_latency): an average of the
// durations of the store operations that succeeded (an outage shows as
// failures, answered UNAVAILABLE), weighing each by how recent it is (it
// forgets with a time constant of storeLatencyDecay, however many
// operations there are), and decays toward zero while nothing is observed,
// so that an idle instance is never found slow.
//
// Shedding refuses only new work — a new session, a call that would wait,
// a new Observe stream — with OVERLOADED: heartbeats, resumes, releases
// and everything else still go to the store, so a saturated store slows
// live sessions down but does not end them.
type StoreLatency struct {
	threshold time.Duration
	mu        sync.Mutex
	avg       float64 // seconds, as of last
	last      time.Time
}

// storeLatencyDecay is StoreLatency's time constant: short, so that once
// the store answers fast again (after a failover, say) new work is let in
// within about a second, and long enough to span many calls under load.
const storeLatencyDecay = 250 * time.Millisecond

// NewStoreLatency returns a StoreLatency that finds the store slow when its
// average latency is above threshold (> 0).
func NewStoreLatency(threshold time.Duration) *StoreLatency {
	return &StoreLatency{threshold: threshold}
}

// Observe adds one store operation that took d.
func (l *StoreLatency) Observe(d time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := l.decay(now)
	l.avg = l.avg*keep + d.Seconds()*(1-keep)
	l.last = now
}

// decay is the weight the average keeps at now (under mu).
func (l *StoreLatency) decay(now time.Time) float64 {
	if l.last.IsZero() {
		return 0
	}
	return math.Exp(-float64(now.Sub(l.last)) / float64(storeLatencyDecay))
}

// Average returns the store's average latency now.
func (l *StoreLatency) Average() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.avg * l.decay(time.Now()) * float64(time.Second))
}

// shed returns the refusal of new work while the store is slow, else nil
// (always nil for a nil StoreLatency: shedding off).
func (l *StoreLatency) shed() error {
	if l == nil {
		return nil
	}
	if avg := l.Average(); avg > l.threshold {
		return errOverloaded(fmt.Sprintf("the store answers in %v on average, above limits.shed_store_latency (%v)", avg.Round(time.Millisecond), l.threshold))
	}
	return nil
}
