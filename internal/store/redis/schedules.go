package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// A namespace's schedules are two hashes, records and payloads, by "queue
// NUL name"; one more hash counts every namespace's schedules. All share
// the hash tag {sched} (lua/schedule_put.lua), so each operation is one
// script on one slot. A record is "last µs|" then schedRecord as JSON: the
// scripts read and write only the last time.

var scheduleKeyNames = []string{"kSpec", "kPayload", "kCount"}

// schedules returns the keys of namespace ns's schedules.
func (k keys) schedules(ns string) []string {
	base := k.prefix + ":{sched}:"
	return []string{base + "s:" + ns, base + "p:" + ns, base + "n"}
}

// schedRecord is a schedule's record after its last time.
type schedRecord struct {
	Spec        string `json:"spec"`
	TimeZone    string `json:"tz,omitempty"`
	Group       string `json:"group,omitempty"`
	Priority    int    `json:"prio,omitempty"`
	MaxAttempts int    `json:"max"`
	PayloadSize int    `json:"size"`
}

// schedulePutArgs are lua/schedule_put.lua's.
type schedulePutArgs struct {
	NS      string `lua:"ns"`
	Field   string `lua:"field"`
	Last    int64  `lua:"last,int"` // µs
	Rest    string `lua:"rest"`     // schedRecord as JSON
	Payload string `lua:"payload"`
	Max     int    `lua:"max,int"`
}

// scheduleArgs are lua/schedule_delete.lua's.
type scheduleArgs struct {
	NS    string `lua:"ns"`
	Field string `lua:"field"`
}

// scheduleTickedArgs are lua/schedule_ticked.lua's.
type scheduleTickedArgs struct {
	Field string `lua:"field"`
	Tick  int64  `lua:"tick,int"` // µs
}

// scheduleReadArgs are lua/schedule_read.lua's: what to read ("list",
// "payload", "namespaces") and the field, for "payload".
type scheduleReadArgs struct {
	What  string `lua:"what"`
	Field string `lua:"field"`
}

func schedField(queue, name string) string { return queue + "\x00" + name }

// PutSchedule implements store.Schedules.
func (s *Store) PutSchedule(ctx context.Context, ns string, sc store.Schedule, max int) error {
	rest, err := json.Marshal(schedRecord{Spec: sc.Spec, TimeZone: sc.TimeZone, Group: sc.Group,
		Priority: sc.Priority, MaxAttempts: sc.MaxAttempts, PayloadSize: len(sc.Payload)})
	if err != nil {
		return err
	}
	ks := s.keys.schedules(ns)
	return s.do(ctx, "PutSchedule", ks[0], func(ctx context.Context) error {
		c, err := codeOf(schedulePut, s.eval(ctx, schedulePut, ks, schedulePutArgs{
			NS: ns, Field: schedField(sc.Queue, sc.Name), Last: sc.LastTime.UnixMicro(), Rest: string(rest),
			Payload: string(sc.Payload), Max: max,
		}), codeOK, codeNo)
		if err == nil && c == codeNo {
			err = store.ErrTooManySchedules
		}
		return err
	})
}

// DeleteSchedule implements store.Schedules.
func (s *Store) DeleteSchedule(ctx context.Context, ns, queue, name string) (bool, error) {
	ks := s.keys.schedules(ns)
	var deleted bool
	err := s.do(ctx, "DeleteSchedule", ks[0], func(ctx context.Context) error {
		c, err := codeOf(scheduleDelete, s.eval(ctx, scheduleDelete, ks, scheduleArgs{NS: ns, Field: schedField(queue, name)}), codeOK, codeNo)
		deleted = c == codeOK
		return err
	})
	return deleted, err
}

// ScheduleTicked implements store.Schedules.
func (s *Store) ScheduleTicked(ctx context.Context, ns, queue, name string, t time.Time) error {
	ks := s.keys.schedules(ns)
	return s.do(ctx, "ScheduleTicked", ks[0], func(ctx context.Context) error {
		_, err := codeOf(scheduleTicked, s.eval(ctx, scheduleTicked, ks[:1], scheduleTickedArgs{Field: schedField(queue, name), Tick: t.UnixMicro()}), codeOK)
		return err
	})
}

// scheduleRead runs lua/schedule_read.lua and returns its strings.
func (s *Store) scheduleRead(ctx context.Context, op, ns string, a scheduleReadArgs) ([]string, error) {
	ks := s.keys.schedules(ns)
	var out []string
	err := s.do(ctx, op, ks[0], func(ctx context.Context) error {
		r, err := replyOf(scheduleRead, s.eval(ctx, scheduleRead, ks, a))
		if err != nil {
			return err
		}
		out = make([]string, r.len())
		for i := range out {
			out[i] = r.str(i)
		}
		return r.done()
	})
	return out, err
}

// ListSchedules implements store.Schedules.
func (s *Store) ListSchedules(ctx context.Context, ns, queue string) ([]store.Schedule, error) {
	kv, err := s.scheduleRead(ctx, "ListSchedules", ns, scheduleReadArgs{What: "list"})
	if err != nil {
		return nil, err
	}
	var out []store.Schedule
	for i := 0; i+1 < len(kv); i += 2 {
		q, name, ok := strings.Cut(kv[i], "\x00")
		if !ok {
			return nil, fmt.Errorf("%w: schedule field %q", errCorrupt, kv[i])
		}
		if queue != "" && q != queue {
			continue
		}
		sc, err := decodeSchedule(q, name, kv[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// decodeSchedule reads a schedule's record.
func decodeSchedule(queue, name, v string) (store.Schedule, error) {
	last, rest, ok := strings.Cut(v, "|")
	us, err := strconv.ParseInt(last, 10, 64)
	var r schedRecord
	if !ok || err != nil || json.Unmarshal([]byte(rest), &r) != nil {
		return store.Schedule{}, fmt.Errorf("%w: schedule record of %q", errCorrupt, name)
	}
	return store.Schedule{Queue: queue, Name: name, Spec: r.Spec, TimeZone: r.TimeZone, Group: r.Group,
		Priority: r.Priority, MaxAttempts: r.MaxAttempts, PayloadSize: r.PayloadSize, LastTime: unixMicro(us)}, nil
}

// SchedulePayload implements store.Schedules.
func (s *Store) SchedulePayload(ctx context.Context, ns, queue, name string) ([]byte, bool, error) {
	v, err := s.scheduleRead(ctx, "SchedulePayload", ns, scheduleReadArgs{What: "payload", Field: schedField(queue, name)})
	if err != nil || len(v) == 0 {
		return nil, false, err
	}
	return []byte(v[0]), true, nil
}

// ScheduleNamespaces implements store.Schedules.
func (s *Store) ScheduleNamespaces(ctx context.Context) ([]string, error) {
	return s.scheduleRead(ctx, "ScheduleNamespaces", "", scheduleReadArgs{What: "namespaces"})
}
