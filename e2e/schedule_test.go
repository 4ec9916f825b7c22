package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/redistest"
)

// TestScheduleAcrossInstances: a schedule of @every 1s on three instances
// of one Redis Cluster, one of them killed and another started while it
// runs, enqueues exactly one message per tick over 100 ticks; after every
// instance was down for 15s (beyond queue.CatchUpWindow), the instance
// started next enqueues one message for the latest missed tick, not one per
// missed tick.
func TestScheduleAcrossInstances(t *testing.T) {
	addrs := redistest.Cluster(t)
	prefix := "e2e-" + randomHex(t, 8)
	a, b, c := startInstance(t, "A", addrs, prefix), startInstance(t, "B", addrs, prefix), startInstance(t, "C", addrs, prefix)
	ctx := testContext(t, 5*time.Minute)
	put, err := a.queues.PutSchedule(ctx, &coordv1.PutScheduleRequest{Queue: "ticks", Name: "s", Spec: "@every 1s", Payload: []byte("t")})
	if err != nil {
		t.Fatal(err)
	}
	first := put.GetSchedule().GetNextTime().AsTime()
	time.Sleep(30 * time.Second)
	b.Kill(t)
	time.Sleep(20 * time.Second)
	d := startInstance(t, "D", addrs, prefix)
	time.Sleep(time.Until(first.Add(100 * time.Second)))
	for _, in := range []*instance{a, c, d} {
		in.Kill(t)
	}
	killed := time.Now()
	time.Sleep(15 * time.Second)
	e := startInstance(t, "E", addrs, prefix)
	restarted := time.Now()
	time.Sleep(4 * time.Second)
	ls, err := e.queues.ListSchedules(ctx, &coordv1.ListSchedulesRequest{Queue: "ticks"})
	if err != nil || len(ls.GetSchedules()) != 1 {
		t.Fatalf("ListSchedules = %v, %v", ls, err)
	}
	last := ls.GetSchedules()[0].GetLastTime().AsTime()
	if _, err := e.queues.DeleteSchedule(ctx, &coordv1.DeleteScheduleRequest{Queue: "ticks", Name: "s"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a pass under way when it was deleted
	e.Kill(t)
	f := startInstance(t, "F", addrs, prefix)
	st, err := f.queues.Stats(ctx, &coordv1.StatsRequest{Queue: "ticks"})
	if err != nil {
		t.Fatal(err)
	}
	// Which ticks have their message: an Enqueue with a tick's dedup ID is
	// a duplicate exactly then (it adds a message otherwise, after the
	// count above).
	enqueued, seen := 0, map[string]bool{}
	var missing, inGap []string
	for tick := first; !tick.After(last.Add(time.Second)); tick = tick.Add(time.Second) {
		r, err := f.queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "ticks", DedupId: queue.ScheduleDedupID("s", tick)})
		if err != nil {
			t.Fatal(err)
		}
		dup := r.GetDuplicate()
		if dup {
			enqueued++
			if seen[r.GetMessageId()] {
				t.Errorf("tick %v: the message of another tick", tick.Unix())
			}
			seen[r.GetMessageId()] = true
		}
		switch {
		case tick.Before(killed.Add(-2*time.Second)) || tick.After(restarted.Add(2*time.Second)) && tick.Before(last):
			if !dup {
				missing = append(missing, fmt.Sprint(tick.Unix()))
			}
		case tick.After(killed.Add(2*time.Second)) && tick.Before(restarted.Add(-2*time.Second)):
			if dup {
				inGap = append(inGap, fmt.Sprint(tick.Unix()))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("ticks without a message (of %v to %v): %s", first.Unix(), last.Unix(), strings.Join(missing, " "))
	}
	if len(inGap) > 0 {
		t.Errorf("ticks while every instance was down enqueued one by one: %s", strings.Join(inGap, " "))
	}
	if got := st.GetReady() + st.GetDelayed() + st.GetInFlight(); got != int64(enqueued) {
		t.Errorf("the queue holds %d messages; %d ticks have one: a tick enqueued twice, or a message of no tick", got, enqueued)
	}
	t.Logf("%d ticks from %v to %v, all down from %v to %v: %d messages", int(last.Sub(first)/time.Second)+1,
		first.Format(time.TimeOnly), last.Format(time.TimeOnly), killed.Format(time.TimeOnly), restarted.Format(time.TimeOnly), enqueued)
}
