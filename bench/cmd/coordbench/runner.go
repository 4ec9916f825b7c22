package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// worker is one concurrent caller's state: its random source, histogram and
// counters, merged when the run ends.
type worker struct {
	id       int
	rng      *rand.Rand
	h        hist
	errs     int64
	misses   int64 // answers that are not failures but not the work either: denied, not acquired
	firstErr error
}

// opFunc is one operation of a scenario; its latency is recorded if it
// returns nil.
type opFunc func(ctx context.Context, w *worker) error

// loopResult is what a closed-loop run measured.
type loopResult struct {
	ops, errs, misses int64
	elapsed           time.Duration
	h                 hist
	firstErr          error
}

// runLoop runs op in a closed loop on conc workers until d has passed (an
// operation in progress then finishes) or ctx ends, and merges what they
// measured. record=false only exercises (warm-up).
func runLoop(ctx context.Context, conc int, d time.Duration, op opFunc, seed uint64) *loopResult {
	return runPaced(ctx, conc, 0, d, op, seed)
}

// runPaced is runLoop with the workers starting at most rate operations a
// second between them (0: no limit): the n-th operation starts no earlier
// than n/rate after the start. An operation's latency is counted from its
// start, not from when it was due.
func runPaced(ctx context.Context, conc int, rate float64, d time.Duration, op opFunc, seed uint64) *loopResult {
	workers := make([]*worker, conc)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	var started atomic.Int64
	for i := range workers {
		w := &worker{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if rate > 0 {
					due := start.Add(time.Duration(float64(started.Add(1)-1) / rate * float64(time.Second)))
					if !due.Before(deadline) {
						return
					}
					if wait := time.Until(due); wait > 0 {
						select {
						case <-time.After(wait):
						case <-ctx.Done():
							return
						}
					}
				}
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				err := op(ctx, w)
				lat := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil && errors.Is(err, context.Canceled) {
						return
					}
					w.errs++
					if w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				w.h.record(lat)
			}
		}()
	}
	wg.Wait()
	r := &loopResult{elapsed: time.Since(start)}
	for _, w := range workers {
		r.h.merge(&w.h)
		r.errs += w.errs
		r.misses += w.misses
		if r.firstErr == nil {
			r.firstErr = w.firstErr
		}
	}
	r.ops = int64(r.h.total)
	return r
}

// lockedHist is a histogram shared by many goroutines that record rarely
// (heartbeats).
type lockedHist struct {
	mu sync.Mutex
	h  hist
}

func (l *lockedHist) record(d time.Duration) {
	l.mu.Lock()
	l.h.record(d)
	l.mu.Unlock()
}

// counter counts errors shared by many goroutines and keeps the first.
type counter struct {
	n     atomic.Int64
	mu    sync.Mutex
	first error
}

func (c *counter) add(err error) {
	c.n.Add(1)
	c.mu.Lock()
	if c.first == nil {
		c.first = err
	}
	c.mu.Unlock()
}

func (c *counter) firstErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}
