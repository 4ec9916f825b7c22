package server

import (
	"context"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
)

// Activity counts what each queue's messages went through on this
// instance, minute by minute, and adds the counts to the store's
// (store.QueueActivity) once a minute, so that the console draws each
// queue's last hour from every instance's counts and lists every queue of
// a namespace. A minute's counts of at most maxActivityQueues queues are
// kept (more are dropped, not blocked).
type Activity struct {
	st    store.QueueActivity
	clock clock.Clock

	mu     sync.Mutex
	minute time.Time
	counts map[string]map[string]store.QueueCounts // by namespace, queue
	n      int
	done   []minuteCounts // ended minutes not yet flushed
}

// minuteCounts is an ended minute's counts.
type minuteCounts struct {
	minute time.Time
	counts map[string]map[string]store.QueueCounts
}

// maxActivityQueues bounds the queues counted in one minute.
const maxActivityQueues = 10_000

// NewActivity returns an Activity that adds to st.
func NewActivity(st store.QueueActivity, clk clock.Clock) *Activity {
	return &Activity{st: st, clock: clk, counts: map[string]map[string]store.QueueCounts{}}
}

// add counts c for queue q of namespace ns.
func (a *Activity) add(ns, q string, c store.QueueCounts) {
	if a == nil || c.IsZero() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if m := a.clock.Now().Truncate(time.Minute); !m.Equal(a.minute) {
		if a.n > 0 && len(a.done) < 2 {
			a.done = append(a.done, minuteCounts{a.minute, a.counts})
		}
		a.minute, a.counts, a.n = m, map[string]map[string]store.QueueCounts{}, 0
	}
	byQ := a.counts[ns]
	if byQ == nil {
		byQ = map[string]store.QueueCounts{}
		a.counts[ns] = byQ
	}
	old, ok := byQ[q]
	if !ok {
		if a.n >= maxActivityQueues {
			return
		}
		a.n++
	}
	byQ[q] = store.QueueCounts{Enqueued: old.Enqueued + c.Enqueued, Acked: old.Acked + c.Acked,
		Retried: old.Retried + c.Retried, Dead: old.Dead + c.Dead}
}

// Flush adds the counts of the minutes that have ended, and, with now,
// the current minute's so far, to the store. A failed flush drops its
// counts (the chart has a gap; nothing else depends on them).
func (a *Activity) Flush(ctx context.Context, now bool) error {
	a.mu.Lock()
	todo := a.done
	a.done = nil
	if m := a.clock.Now().Truncate(time.Minute); (now || !m.Equal(a.minute)) && a.n > 0 {
		todo = append(todo, minuteCounts{a.minute, a.counts})
		a.counts, a.n = map[string]map[string]store.QueueCounts{}, 0
	}
	a.mu.Unlock()
	var first error
	for _, mc := range todo {
		for ns, byQ := range mc.counts {
			if err := a.st.RecordQueueActivity(ctx, ns, mc.minute, byQ); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// Run flushes every 10 seconds (the console's chart lags by as much)
// until ctx ends, then once more.
func (a *Activity) Run(ctx context.Context, failed func(error)) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := a.Flush(fctx, true); err != nil && failed != nil {
				failed(err)
			}
			return
		case <-t.C:
			if err := a.Flush(ctx, true); err != nil && failed != nil {
				failed(err)
			}
		}
	}
}
