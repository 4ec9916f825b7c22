package storetest

import (
	"slices"
	"strings"
	"time"

	"github.com/coordd/coordd/internal/store"
)

func scheduleTests() []test {
	return []test{
		{"PutListDelete", schedulePutListDelete},
		{"Bound", scheduleBound},
		{"Ticked", scheduleTicked},
	}
}

func (e *env) listSchedules(ns, queue string) []store.Schedule {
	e.Helper()
	l, err := e.s.ListSchedules(e.ctx, ns, queue)
	noErr(e, "ListSchedules", err)
	slices.SortFunc(l, func(a, b store.Schedule) int {
		if a.Queue != b.Queue {
			return strings.Compare(a.Queue, b.Queue)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return l
}

func eqSchedule(e *env, what string, got, want store.Schedule) {
	e.Helper()
	want.Payload = nil
	if !got.LastTime.Equal(want.LastTime) {
		e.Errorf("%s: LastTime %v, want %v", what, got.LastTime, want.LastTime)
	}
	got.LastTime, want.LastTime = time.Time{}, time.Time{}
	if !slices.Equal(got.Payload, want.Payload) || got.Queue != want.Queue || got.Name != want.Name || got.Spec != want.Spec ||
		got.TimeZone != want.TimeZone || got.Group != want.Group || got.Priority != want.Priority ||
		got.MaxAttempts != want.MaxAttempts || got.PayloadSize != want.PayloadSize {
		e.Errorf("%s: %+v, want %+v", what, got, want)
	}
}

// schedulePutListDelete: a schedule is stored as put, listed by queue
// and namespace (without its payload, which SchedulePayload reads), a
// put replaces it but never moves its last time back, and a delete
// removes it.
func schedulePutListDelete(e *env) {
	ns := e.ns
	q, q2 := e.name("q"), e.name("q2")
	a := store.Schedule{Queue: q, Name: "nightly", Spec: "0 3 * * *", TimeZone: "Europe/Paris", Payload: []byte("run\x00"),
		PayloadSize: 4, Group: "g", Priority: 4, MaxAttempts: 3, LastTime: e.now()}
	b := store.Schedule{Queue: q2, Name: "tick", Spec: "@every 1s", Payload: nil, MaxAttempts: 5, LastTime: e.now()}
	noErr(e, "PutSchedule", e.s.PutSchedule(e.ctx, ns, a, 10))
	noErr(e, "PutSchedule", e.s.PutSchedule(e.ctx, ns, b, 10))
	l := e.listSchedules(ns, q)
	if len(l) != 1 {
		e.Fatalf("ListSchedules(q): %d schedules, want 1", len(l))
	}
	eqSchedule(e, "listed", l[0], a)
	eq(e, "schedules of the namespace", len(e.listSchedules(ns, "")), 2)
	eq(e, "schedules of another namespace", len(e.listSchedules(ns+"x", "")), 0)
	p, ok, err := e.s.SchedulePayload(e.ctx, ns, q, "nightly")
	noErr(e, "SchedulePayload", err)
	eq(e, "payload", string(p), "run\x00")
	eq(e, "payload found", ok, true)
	nss, err := e.s.ScheduleNamespaces(e.ctx)
	noErr(e, "ScheduleNamespaces", err)
	eq(e, "namespace listed", slices.Contains(nss, ns), true)

	a2 := a
	a2.Spec, a2.Payload, a2.PayloadSize, a2.LastTime = "*/5 * * * *", []byte("v2"), 2, e.now().Add(time.Hour)
	noErr(e, "PutSchedule again", e.s.PutSchedule(e.ctx, ns, a2, 1)) // a replacement is not new: the bound does not apply
	a2.LastTime = a.LastTime
	eqSchedule(e, "replaced, its last time kept (even against a later one)", e.listSchedules(ns, q)[0], a2)

	for _, sc := range []store.Schedule{a, b} {
		ok, err := e.s.DeleteSchedule(e.ctx, ns, sc.Queue, sc.Name)
		noErr(e, "DeleteSchedule", err)
		eq(e, "deleted", ok, true)
	}
	ok, err = e.s.DeleteSchedule(e.ctx, ns, q, "nightly")
	noErr(e, "DeleteSchedule", err)
	eq(e, "deleted twice", ok, false)
	eq(e, "schedules left", len(e.listSchedules(ns, "")), 0)
	_, ok, err = e.s.SchedulePayload(e.ctx, ns, q, "nightly")
	noErr(e, "SchedulePayload", err)
	eq(e, "payload of a deleted schedule", ok, false)
	nss, err = e.s.ScheduleNamespaces(e.ctx)
	noErr(e, "ScheduleNamespaces", err)
	eq(e, "namespace listed after its last schedule went", slices.Contains(nss, ns), false)
}

// scheduleBound: a namespace holds at most max schedules; a delete makes
// room; other namespaces count apart.
func scheduleBound(e *env) {
	ns := e.ns
	q := e.name("q")
	put := func(ns, name string) error {
		return e.s.PutSchedule(e.ctx, ns, store.Schedule{Queue: q, Name: name, Spec: "@every 1m", MaxAttempts: 1, LastTime: e.now()}, 3)
	}
	for _, n := range []string{"a", "b", "c"} {
		noErr(e, "PutSchedule", put(ns, n))
	}
	if err := put(ns, "d"); err != store.ErrTooManySchedules {
		e.Fatalf("a fourth schedule: %v, want ErrTooManySchedules", err)
	}
	eq(e, "schedules after the refusal", len(e.listSchedules(ns, "")), 3)
	noErr(e, "PutSchedule in another namespace", put(ns+"x", "d"))
	_, err := e.s.DeleteSchedule(e.ctx, ns, q, "a")
	noErr(e, "DeleteSchedule", err)
	noErr(e, "PutSchedule after a delete", put(ns, "d"))
	_, err = e.s.DeleteSchedule(e.ctx, ns+"x", q, "d")
	noErr(e, "DeleteSchedule", err)
}

// scheduleTicked: a tick moves the last time forward only, and does not
// bring back a deleted schedule.
func scheduleTicked(e *env) {
	ns, q := e.ns, e.name("q")
	sc := store.Schedule{Queue: q, Name: "s", Spec: "@every 1s", MaxAttempts: 1, LastTime: e.now()}
	noErr(e, "PutSchedule", e.s.PutSchedule(e.ctx, ns, sc, 10))
	t1 := e.now().Add(5 * time.Second)
	noErr(e, "ScheduleTicked", e.s.ScheduleTicked(e.ctx, ns, q, "s", t1))
	noErr(e, "ScheduleTicked earlier", e.s.ScheduleTicked(e.ctx, ns, q, "s", t1.Add(-time.Second)))
	sc.LastTime = t1
	eqSchedule(e, "after the ticks", e.listSchedules(ns, q)[0], sc)
	_, err := e.s.DeleteSchedule(e.ctx, ns, q, "s")
	noErr(e, "DeleteSchedule", err)
	noErr(e, "ScheduleTicked after the delete", e.s.ScheduleTicked(e.ctx, ns, q, "s", t1.Add(time.Second)))
	eq(e, "schedules after a tick of a deleted one", len(e.listSchedules(ns, q)), 0)
}
