package main

import (
	"strings"
	"testing"
)

// pause, resume, configure-queue and queue-settings change and show a
// queue's settings; enqueue --replace debounces; schedule put, list and
// delete manage a schedule.
func TestQueueSettingsAndSchedules(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	want(t, c.run("pause", "q"), 0, "paused=true max_in_flight=0 claim_rate=none", "")
	want(t, c.run("enqueue", "q", "a"), 0, "message_id=", "")
	want(t, c.run("claim", "q"), 0, "", "no message")
	want(t, c.run("stats", "q"), 0, "ready=1 delayed=0 in_flight=0 dead=0 paused", "")
	want(t, c.run("configure-queue", "q", "--max-in-flight", "1", "--claim-rate", "5/1s"), 0, "paused=true max_in_flight=1 claim_rate=5/1s", "")
	want(t, c.run("configure-queue", "q", "--claim-rate", "5"), 2, "", "N/PERIOD")
	want(t, c.run("configure-queue", "q", "--max-in-flight", "-1"), 1, "", "max_in_flight")
	want(t, c.run("resume", "q"), 0, "paused=false max_in_flight=1 claim_rate=5/1s", "")
	want(t, c.run("queue-settings", "q"), 0, "paused=false max_in_flight=1 claim_rate=5/1s", "")
	want(t, c.run("enqueue", "q", "b"), 0, "message_id=", "")
	want(t, c.run("claim", "q", "--max", "10"), 0, "", "")
	if r := c.run("claim", "q", "--max", "10"); strings.Contains(r.stdout, "receipt=") {
		t.Errorf("a second claim under max_in_flight 1: %q", r.stdout)
	}

	want(t, c.run("enqueue", "d", "v1", "--dedup-id", "x", "--replace", "--delay", "1h"), 0, "message_id=", "")
	want(t, c.run("enqueue", "d", "v2", "--dedup-id", "x", "--replace", "--delay", "1h"), 0, "replaced", "")

	want(t, c.run("schedule", "put", "q", "nightly", "0 3 * * *", "run", "--time-zone", "Europe/Paris"), 0,
		`queue="q" name="nightly" spec="0 3 * * *" time_zone="Europe/Paris"`, "")
	want(t, c.run("schedule", "put", "q", "bad", "@every 10ms"), 1, "", "spec")
	want(t, c.run("schedule", "list"), 0, `name="nightly"`, "")
	want(t, c.run("schedule", "delete", "q", "nightly"), 0, "deleted=true", "")
	want(t, c.run("schedule", "list", "q"), 0, "", "no schedules")
	want(t, c.run("schedule", "frobnicate"), 2, "", "put, delete or list")
}
