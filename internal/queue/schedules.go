package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// Schedules: each tick of a schedule enqueues one message whose dedup ID
// is "schedule:<name>:<tick as Unix seconds>", so that every instance may
// enqueue it and the queue keeps one (within queue.dedup_window). Every
// instance runs RunSchedules: once a second it reads the schedules of
// every namespace and enqueues the ticks due since each one's last time
// (the store's ScheduleTicked moves it forward after an enqueue).
//
// After an outage of every instance (a schedule whose last tick is more
// than CatchUpWindow old), only the latest tick due is enqueued, and the
// ones before it are counted as missed.

// CatchUpWindow: ticks due within it of a schedule's last tick are each
// enqueued (an instance's pass may come late, or the instance that would
// have enqueued a tick may have died); older ones mean no instance ran,
// and only the latest of them is enqueued.
const CatchUpWindow = 10 * time.Second

// maxCatchUp bounds the ticks one pass walks for one schedule.
const maxCatchUp = 10_000

// MaxSpecBytes bounds a schedule's spec.
const MaxSpecBytes = 256

// ScheduleRequest puts a schedule. Zero values are unset.
type ScheduleRequest struct {
	NS, Queue, Name string
	Spec, TimeZone  string
	Payload         []byte
	Group           string
	Priority        int
	MaxAttempts     int
}

// ScheduleInfo is a schedule with its next tick.
type ScheduleInfo struct {
	store.Schedule
	NextTime time.Time // zero: none in the next five years
}

// ticker is a parsed spec: Next is its first tick after t.
type ticker interface{ Next(t time.Time) time.Time }

// every ticks at whole multiples of d since the Unix epoch.
type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return time.Unix(0, 0).Add((t.Sub(time.Unix(0, 0))/d + 1) * d)
}

// cronParser reads five fields, or six with seconds first, and the
// descriptors (@hourly, @daily, ...), as robfig/cron's standard parser.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSpec reads spec in time zone tz ("" is UTC).
func parseSpec(spec, tz string) (ticker, error) {
	if len(spec) > MaxSpecBytes {
		return nil, validate.Errorf("spec", "has %d bytes; the limit is %d", len(spec), MaxSpecBytes)
	}
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" || len(tz) > 64 {
			return nil, validate.Errorf("time_zone", "is %q: want an IANA time zone name, like Europe/Paris, or empty for UTC", tz)
		}
		loc = l
	}
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < time.Second || d%time.Second != 0 {
			return nil, validate.Errorf("spec", "is %q: @every wants a whole number of seconds, at least 1s", spec)
		}
		return every(d), nil
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, validate.Errorf("spec", "names a time zone: set time_zone instead")
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, validate.Errorf("spec", "is %q: %v (want five cron fields, six with seconds first, a descriptor like @daily, or @every <duration>)", spec, err)
	}
	cs, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, validate.Errorf("spec", "is %q: not a cron schedule", spec)
	}
	cs.Location = loc
	if cs.Next(time.Now()).IsZero() {
		return nil, validate.Errorf("spec", "is %q: it never fires", spec)
	}
	return cs, nil
}

// PutSchedule stores a schedule (replacing the one of its queue and name).
func (s *Service) PutSchedule(ctx context.Context, r ScheduleRequest) (ScheduleInfo, error) {
	if err := s.checkQueue(r.Queue); err != nil {
		return ScheduleInfo{}, err
	}
	if err := validate.Name("name", r.Name, s.cfg.MaxNameBytes); err != nil {
		return ScheduleInfo{}, err
	}
	if err := validate.Label("spec", r.Spec, MaxSpecBytes); err != nil {
		return ScheduleInfo{}, err
	}
	if r.Spec == "" {
		return ScheduleInfo{}, validate.Errorf("spec", "is required")
	}
	t, err := parseSpec(r.Spec, r.TimeZone)
	if err != nil {
		return ScheduleInfo{}, err
	}
	if err := validate.Bytes("payload", r.Payload, s.cfg.MaxPayloadBytes); err != nil {
		return ScheduleInfo{}, err
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = s.cfg.DefaultMaxAttempts
	}
	if r.MaxAttempts < 1 || r.MaxAttempts > s.cfg.MaxAttemptsLimit {
		return ScheduleInfo{}, validate.Errorf("max_attempts", "is %d; it must be between 1 and %d", r.MaxAttempts, s.cfg.MaxAttemptsLimit)
	}
	if r.Priority < 0 || r.Priority > MaxPriority {
		return ScheduleInfo{}, validate.Errorf("priority", "is %d; it must be between 0 and %d", r.Priority, MaxPriority)
	}
	if r.Group != "" {
		if err := validate.Name("group", r.Group, s.cfg.MaxNameBytes); err != nil {
			return ScheduleInfo{}, err
		}
	}
	sc := store.Schedule{Queue: r.Queue, Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Payload: r.Payload,
		PayloadSize: len(r.Payload), Group: r.Group, Priority: r.Priority, MaxAttempts: r.MaxAttempts,
		LastTime: s.clock.Now().Truncate(time.Microsecond)}
	if err := s.st.PutSchedule(ctx, r.NS, sc, s.cfg.MaxSchedulesPerNamespace); err != nil {
		return ScheduleInfo{}, err
	}
	// A replaced schedule keeps its last tick: read back what is stored.
	if l, err := s.st.ListSchedules(ctx, r.NS, r.Queue); err == nil {
		for _, got := range l {
			if got.Name == r.Name {
				sc.LastTime = got.LastTime
			}
		}
	}
	sc.Payload = nil
	return ScheduleInfo{Schedule: sc, NextTime: t.Next(sc.LastTime)}, nil
}

// DeleteSchedule deletes a schedule and reports whether there was one.
func (s *Service) DeleteSchedule(ctx context.Context, ns, queue, name string) (bool, error) {
	if err := s.checkQueue(queue); err != nil {
		return false, err
	}
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return false, err
	}
	return s.st.DeleteSchedule(ctx, ns, queue, name)
}

// ListSchedules lists a queue's schedules ("" : every queue's of the
// namespace), by queue and name, each with its next tick.
func (s *Service) ListSchedules(ctx context.Context, ns, queue string) ([]ScheduleInfo, error) {
	if queue != "" {
		if err := s.checkQueue(queue); err != nil {
			return nil, err
		}
	}
	l, err := s.st.ListSchedules(ctx, ns, queue)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleInfo, len(l))
	for i, sc := range l {
		out[i].Schedule = sc
		if t, err := parseSpec(sc.Spec, sc.TimeZone); err == nil {
			out[i].NextTime = t.Next(sc.LastTime)
		}
	}
	sortSchedules(out)
	return out, nil
}

func sortSchedules(l []ScheduleInfo) {
	for i := 1; i < len(l); i++ { // insertion sort: at most queue.max_schedules_per_namespace
		for j := i; j > 0 && (l[j].Queue < l[j-1].Queue || l[j].Queue == l[j-1].Queue && l[j].Name < l[j-1].Name); j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}

// ScheduleHooks tell RunSchedules' caller what it did.
type ScheduleHooks struct {
	Ticked func()                                  // a tick's message was enqueued (by this instance: not a duplicate)
	Missed func(n int)                             // n ticks of a schedule were skipped after an outage
	Failed func(ns, queue, name string, err error) // a pass could not enqueue a schedule's tick
}

// RunSchedules enqueues the ticks of every namespace's schedules, once a
// second, until ctx ends.
func (s *Service) RunSchedules(ctx context.Context, h ScheduleHooks) {
	for {
		now := s.clock.Now()
		next := now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.SchedulePass(ctx, h)
	}
}

// SchedulePass enqueues the ticks due now of every schedule, once.
func (s *Service) SchedulePass(ctx context.Context, h ScheduleHooks) {
	fail := func(ns, queue, name string, err error) {
		if h.Failed != nil && ctx.Err() == nil {
			h.Failed(ns, queue, name, err)
		}
	}
	nss, err := s.st.ScheduleNamespaces(ctx)
	if err != nil {
		fail("", "", "", err)
		return
	}
	now := s.clock.Now()
	for _, ns := range nss {
		l, err := s.st.ListSchedules(ctx, ns, "")
		if err != nil {
			fail(ns, "", "", err)
			continue
		}
		for _, sc := range l {
			if err := s.runSchedule(ctx, ns, sc, now, h); err != nil {
				fail(ns, sc.Queue, sc.Name, err)
			}
		}
	}
}

// runSchedule enqueues the ticks of sc due at now.
func (s *Service) runSchedule(ctx context.Context, ns string, sc store.Schedule, now time.Time, h ScheduleHooks) error {
	t, err := parseSpec(sc.Spec, sc.TimeZone)
	if err != nil {
		return err
	}
	ticks, missed := dueTicks(t, sc.LastTime, now)
	if len(ticks) == 0 {
		return nil
	}
	payload, ok, err := s.st.SchedulePayload(ctx, ns, sc.Queue, sc.Name)
	if err != nil || !ok {
		return err // deleted since it was listed: nothing to do
	}
	for _, tick := range ticks {
		e, err := s.Enqueue(ctx, EnqueueRequest{
			NS: ns, Queue: sc.Queue, Payload: payload, DedupID: ScheduleDedupID(sc.Name, tick),
			MaxAttempts: sc.MaxAttempts, Priority: sc.Priority, Group: sc.Group,
		})
		if err != nil {
			return fmt.Errorf("the tick of %v: %w", tick, err)
		}
		if !e.Duplicate && h.Ticked != nil {
			h.Ticked()
		}
		if err := s.st.ScheduleTicked(ctx, ns, sc.Queue, sc.Name, tick); err != nil {
			return err
		}
		if missed > 0 && h.Missed != nil && !e.Duplicate {
			h.Missed(missed) // counted once, by the instance that enqueued the tick after them
		}
	}
	return nil
}

// ScheduleDedupID is the dedup ID of a schedule's tick.
func ScheduleDedupID(name string, tick time.Time) string {
	return "schedule:" + name + ":" + strconv.FormatInt(tick.Unix(), 10)
}

// errNoTick: a spec with no tick in the window looked at.
var errNoTick = errors.New("no tick")

// dueTicks returns the ticks of t after last and at most now to enqueue:
// each of them while the first is within CatchUpWindow of now; otherwise
// (no instance ran for a while) only the latest, with the number skipped.
func dueTicks(t ticker, last, now time.Time) (ticks []time.Time, missed int) {
	first := t.Next(last)
	if first.IsZero() || first.After(now) {
		return nil, 0
	}
	if now.Sub(first) <= CatchUpWindow {
		for tk := first; !tk.IsZero() && !tk.After(now); tk = t.Next(tk) {
			ticks = append(ticks, tk)
		}
		return ticks, 0
	}
	n, latest := 0, first
	for tk := first; !tk.IsZero() && !tk.After(now); tk = t.Next(tk) {
		latest, n = tk, n+1
		if n == maxCatchUp {
			if l, err := latestTick(t, now); err == nil {
				latest = l
			}
			break
		}
	}
	return []time.Time{latest}, n - 1
}

// latestTick is t's last tick at most now, found by looking back over
// longer and longer windows.
func latestTick(t ticker, now time.Time) (time.Time, error) {
	for _, w := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 367 * 24 * time.Hour} {
		var latest time.Time
		for tk := t.Next(now.Add(-w)); !tk.IsZero() && !tk.After(now); tk = t.Next(tk) {
			latest = tk
		}
		if !latest.IsZero() {
			return latest, nil
		}
	}
	return time.Time{}, errNoTick
}
