package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/coordd/coordd/internal/store"
)

func activityTests() []test {
	return []test{
		{"CountsAddUp", activityCountsAddUp},
		{"Registry", activityRegistry},
	}
}

// activityCountsAddUp: counts two instances record for one minute add
// up; minutes are listed oldest first from since; those older than
// ActivityHistory go.
func activityCountsAddUp(e *env) {
	ns := e.ns
	m0 := e.now().Truncate(time.Minute)
	rec := func(m time.Time, c store.QueueCounts) {
		e.Helper()
		noErr(e, "RecordQueueActivity", e.s.RecordQueueActivity(e.ctx, ns, m, map[string]store.QueueCounts{"q": c}))
	}
	rec(m0, store.QueueCounts{Enqueued: 5, Acked: 2})
	rec(m0, store.QueueCounts{Enqueued: 1, Retried: 3, Dead: 1})
	rec(m0.Add(time.Minute), store.QueueCounts{Acked: 4})
	h, err := e.s.QueueHistory(e.ctx, ns, "q", m0)
	noErr(e, "QueueHistory", err)
	want := []store.QueueMinute{
		{Minute: m0, QueueCounts: store.QueueCounts{Enqueued: 6, Acked: 2, Retried: 3, Dead: 1}},
		{Minute: m0.Add(time.Minute), QueueCounts: store.QueueCounts{Acked: 4}},
	}
	eqMinutes(e, "two minutes", h, want)
	h, err = e.s.QueueHistory(e.ctx, ns, "q", m0.Add(time.Minute))
	noErr(e, "QueueHistory", err)
	eqMinutes(e, "since the second minute", h, want[1:])
	h, err = e.s.QueueHistory(e.ctx, ns, "other", m0)
	noErr(e, "QueueHistory", err)
	eqMinutes(e, "another queue", h, nil)

	e.advance(store.ActivityHistory + 2*time.Minute)
	rec(m0.Add(store.ActivityHistory+2*time.Minute), store.QueueCounts{Enqueued: 1})
	h, err = e.s.QueueHistory(e.ctx, ns, "q", m0)
	noErr(e, "QueueHistory", err)
	eqMinutes(e, "an hour later", h, []store.QueueMinute{{Minute: m0.Add(store.ActivityHistory + 2*time.Minute), QueueCounts: store.QueueCounts{Enqueued: 1}}})
}

func eqMinutes(e *env, what string, got, want []store.QueueMinute) {
	e.Helper()
	if len(got) != len(want) {
		e.Errorf("%s: %d minutes %+v, want %+v", what, len(got), got, want)
		return
	}
	for i := range got {
		if !got[i].Minute.Equal(want[i].Minute) || got[i].QueueCounts != want[i].QueueCounts {
			e.Errorf("%s: minute %d = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// activityRegistry: every queue recorded in a namespace is listed, other
// namespaces apart; beyond ActivityRegistry, the least recent go.
func activityRegistry(e *env) {
	ns := e.ns
	m := e.now().Truncate(time.Minute)
	counts := map[string]store.QueueCounts{}
	for i := range store.ActivityRegistry {
		counts[fmt.Sprintf("q%04d", i)] = store.QueueCounts{Enqueued: 1}
	}
	noErr(e, "RecordQueueActivity", e.s.RecordQueueActivity(e.ctx, ns, m, counts))
	noErr(e, "RecordQueueActivity", e.s.RecordQueueActivity(e.ctx, ns+"x", m, map[string]store.QueueCounts{"elsewhere": {Acked: 1}}))
	got, err := e.s.ActiveQueues(e.ctx, ns)
	noErr(e, "ActiveQueues", err)
	eq(e, "queues listed", len(got), store.ActivityRegistry)
	eq(e, "another namespace's listed", slices.Contains(got, "elsewhere"), false)
	e.advance(time.Minute)
	noErr(e, "RecordQueueActivity", e.s.RecordQueueActivity(e.ctx, ns, m.Add(time.Minute), map[string]store.QueueCounts{"late": {Enqueued: 1}}))
	got, err = e.s.ActiveQueues(e.ctx, ns)
	noErr(e, "ActiveQueues", err)
	eq(e, "queues listed past the bound", len(got), store.ActivityRegistry)
	eq(e, "the latest listed", slices.Contains(got, "late"), true)
}
