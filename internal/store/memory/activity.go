package memory

import (
	"context"
	"slices"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// activity is QueueActivity's state: each queue's minutes (by scoped
// name), and each namespace's registry (name -> last minute recorded).
type activity struct {
	minutes  map[string]map[int64]store.QueueCounts
	registry map[string]map[string]time.Time
}

// RecordQueueActivity implements store.QueueActivity.
func (s *Store) RecordQueueActivity(_ context.Context, ns string, minute time.Time, counts map[string]store.QueueCounts) error {
	now := s.now()
	s.am.Lock()
	defer s.am.Unlock()
	reg := s.act.registry[ns]
	if reg == nil {
		reg = map[string]time.Time{}
		s.act.registry[ns] = reg
	}
	m := minute.Truncate(time.Minute).Unix()
	for q, c := range counts {
		k := store.Scope(ns, q)
		h := s.act.minutes[k]
		if h == nil {
			h = map[int64]store.QueueCounts{}
			s.act.minutes[k] = h
		}
		old := h[m]
		h[m] = store.QueueCounts{Enqueued: old.Enqueued + c.Enqueued, Acked: old.Acked + c.Acked,
			Retried: old.Retried + c.Retried, Dead: old.Dead + c.Dead}
		reg[q] = minute
	}
	s.trimActivity(now)
	return nil
}

// trimActivity forgets minutes past ActivityHistory and names past the
// registry's bounds. s.am is held.
func (s *Store) trimActivity(now time.Time) {
	for k, h := range s.act.minutes {
		for t := range h {
			if t < now.Add(-store.ActivityHistory).Unix() {
				delete(h, t)
			}
		}
		if len(h) == 0 {
			delete(s.act.minutes, k)
		}
	}
	for ns, reg := range s.act.registry {
		for q, t := range reg {
			if t.Before(now.Add(-store.ActivityRegistryTTL)) {
				delete(reg, q)
			}
		}
		for len(reg) > store.ActivityRegistry {
			oldest, at := "", time.Time{}
			for q, t := range reg {
				if oldest == "" || t.Before(at) {
					oldest, at = q, t
				}
			}
			delete(reg, oldest)
		}
		if len(reg) == 0 {
			delete(s.act.registry, ns)
		}
	}
}

// QueueHistory implements store.QueueActivity.
func (s *Store) QueueHistory(_ context.Context, ns, queue string, since time.Time) ([]store.QueueMinute, error) {
	s.am.Lock()
	defer s.am.Unlock()
	var out []store.QueueMinute
	for t, c := range s.act.minutes[store.Scope(ns, queue)] {
		if m := time.Unix(t, 0); !m.Before(since.Truncate(time.Minute)) {
			out = append(out, store.QueueMinute{Minute: m, QueueCounts: c})
		}
	}
	slices.SortFunc(out, func(a, b store.QueueMinute) int { return a.Minute.Compare(b.Minute) })
	return out, nil
}

// ActiveQueues implements store.QueueActivity.
func (s *Store) ActiveQueues(_ context.Context, ns string) ([]string, error) {
	now := s.now()
	s.am.Lock()
	defer s.am.Unlock()
	s.trimActivity(now)
	out := make([]string, 0, len(s.act.registry[ns]))
	for q := range s.act.registry[ns] {
		out = append(out, q)
	}
	slices.Sort(out)
	return out, nil
}
