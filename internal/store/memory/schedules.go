package memory

import (
	"context"
	"slices"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// schedKey names a schedule within its namespace.
type schedKey struct{ queue, name string }

// PutSchedule implements store.Schedules.
func (s *Store) PutSchedule(_ context.Context, ns string, sc store.Schedule, max int) error {
	s.sm.Lock()
	defer s.sm.Unlock()
	m := s.schedules[ns]
	k := schedKey{sc.Queue, sc.Name}
	old, ok := m[k]
	if !ok && len(m) >= max {
		return store.ErrTooManySchedules
	}
	if m == nil {
		m = make(map[schedKey]store.Schedule)
		s.schedules[ns] = m
	}
	if ok {
		sc.LastTime = old.LastTime // a tick due but not yet enqueued is not skipped
	}
	sc.Payload = slices.Clone(sc.Payload)
	sc.PayloadSize = len(sc.Payload)
	sc.LastTime = sc.LastTime.Truncate(time.Microsecond)
	m[k] = sc
	return nil
}

// DeleteSchedule implements store.Schedules.
func (s *Store) DeleteSchedule(_ context.Context, ns, queue, name string) (bool, error) {
	s.sm.Lock()
	defer s.sm.Unlock()
	m := s.schedules[ns]
	k := schedKey{queue, name}
	if _, ok := m[k]; !ok {
		return false, nil
	}
	delete(m, k)
	if len(m) == 0 {
		delete(s.schedules, ns)
	}
	return true, nil
}

// ListSchedules implements store.Schedules.
func (s *Store) ListSchedules(_ context.Context, ns, queue string) ([]store.Schedule, error) {
	s.sm.Lock()
	defer s.sm.Unlock()
	var out []store.Schedule
	for k, sc := range s.schedules[ns] {
		if queue == "" || k.queue == queue {
			sc.Payload = nil
			out = append(out, sc)
		}
	}
	return out, nil
}

// SchedulePayload implements store.Schedules.
func (s *Store) SchedulePayload(_ context.Context, ns, queue, name string) ([]byte, bool, error) {
	s.sm.Lock()
	defer s.sm.Unlock()
	sc, ok := s.schedules[ns][schedKey{queue, name}]
	return slices.Clone(sc.Payload), ok, nil
}

// ScheduleNamespaces implements store.Schedules.
func (s *Store) ScheduleNamespaces(context.Context) ([]string, error) {
	s.sm.Lock()
	defer s.sm.Unlock()
	out := make([]string, 0, len(s.schedules))
	for ns := range s.schedules {
		out = append(out, ns)
	}
	return out, nil
}

// ScheduleTicked implements store.Schedules.
func (s *Store) ScheduleTicked(_ context.Context, ns, queue, name string, t time.Time) error {
	s.sm.Lock()
	defer s.sm.Unlock()
	k := schedKey{queue, name}
	if sc, ok := s.schedules[ns][k]; ok && t.After(sc.LastTime) {
		sc.LastTime = t.Truncate(time.Microsecond)
		s.schedules[ns][k] = sc
	}
	return nil
}
