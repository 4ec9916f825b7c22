package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// leader asks coordd who leads name.
func leader(t *testing.T, d *daemon, name string) *coordv1.LeaderResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := coordv1.NewElectionServiceClient(d.conn(t)).Leader(ctx, &coordv1.LeaderRequest{Name: name})
	if err != nil {
		t.Fatalf("Leader(%s): %v", name, err)
	}
	return resp
}

func TestElectRunsCommandWhileLeader(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCtl(t, d)
	p := c.start("elect", "sched", "--", "sh", "-c", `echo "$COORDD_ELECTION_NAME" > name; env > env; `+holdScript)
	fence := waitFile(t, filepath.Join(c.dir, "fence"), 10*time.Second)
	n, err := strconv.ParseUint(fence, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("COORDD_FENCE = %q, want a number > 0", fence)
	}
	host, _ := os.Hostname()
	value := fmt.Sprintf("%s:%d", host, p.cmd.Process.Pid) // the default --value
	if l := leader(t, d, "sched"); !l.GetHasLeader() || string(l.GetLeader().GetValue()) != value || l.GetLeader().GetFence() != n {
		t.Errorf("Leader while the command runs = %v; want %q with fence %d", l, value, n)
	}
	if got := readFile(t, filepath.Join(c.dir, "name")); got != "sched" {
		t.Errorf("COORDD_ELECTION_NAME = %q, want sched", got)
	}
	for _, kv := range strings.Split(readFile(t, filepath.Join(c.dir, "env")), "\n") {
		if strings.HasPrefix(kv, "COORDD_") && !strings.HasPrefix(kv, "COORDD_FENCE=") && !strings.HasPrefix(kv, "COORDD_ELECTION_NAME=") {
			t.Errorf("the command's environment has %q; want only COORDD_FENCE and COORDD_ELECTION_NAME (never the token)", kv)
		}
	}

	// Another candidate exits 75 at once, naming the leader's value.
	want(t, c.run("elect", "sched", "--value", "host b", "--", "touch", "ran"), exitHeld, "", fmt.Sprintf(`election "sched" is led by %q (fence %d)`, value, n))
	r := c.run("--json", "elect", "sched", "--value", "host b", "--", "touch", "ran")
	want(t, r, exitHeld, "", "")
	if m := jsonOut(t, r); m["elected"] != false || m["token"] != "" {
		t.Errorf("--json elect with another leader printed %v; want elected false, no token", m)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "ran")); err == nil {
		t.Errorf("a command ran without the leadership")
	}

	// A waiting candidate is elected when the leader's command ends.
	second := c.start("elect", "--wait", "20s", "sched", "--value", "host b", "--", "sh", "-c", `echo "$COORDD_FENCE" > fence2; while [ ! -e done2 ]; do sleep 0.02; done`)
	time.Sleep(300 * time.Millisecond)
	if !second.running() {
		t.Fatalf("the second candidate did not wait: %v", second.wait(0))
	}
	touch(t, filepath.Join(c.dir, "done"))
	want(t, p.wait(10*time.Second), 0, "", "")
	f2, _ := strconv.ParseUint(waitFile(t, filepath.Join(c.dir, "fence2"), 10*time.Second), 10, 64)
	if f2 <= n {
		t.Errorf("terms' fences %d then %d; want the second greater", n, f2)
	}
	if l := leader(t, d, "sched"); string(l.GetLeader().GetValue()) != "host b" || l.GetLeader().GetFence() != f2 {
		t.Errorf("Leader = %v; want host b with fence %d", l, f2)
	}
	touch(t, filepath.Join(c.dir, "done2"))
	want(t, second.wait(10*time.Second), 0, "", "")
	// It resigned as its command ended.
	if l := leader(t, d, "sched"); l.GetHasLeader() {
		t.Errorf("Leader after the last candidate exited = %v; want none", l)
	}

	// The command's status is coordctl's.
	want(t, c.run("elect", "sched", "--", "sh", "-c", "exit 7"), 7, "", "")
}

// TestElectLostWhenDaemonGoes: with coordd gone, the leadership cannot be
// known to last, and coordctl ends the command as lock does.
func TestElectLostWhenDaemonGoes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCtl(t, d)
	p := c.start("elect", "--ttl", "1s", "--grace", "200ms", "sched", "--", "sh", "-c", `echo $$ > pid; while :; do sleep 0.05; done`)
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(c.dir, "pid"), 10*time.Second))
	d.signal(t, syscall.SIGKILL)
	r := p.wait(10 * time.Second)
	want(t, r, exitLeaseLost, "", `election "sched" lost: no heartbeat was answered within the session TTL`)
	want(t, r, exitLeaseLost, "", "the command was terminated")
	if alive(t, pid) {
		t.Errorf("the command is still running after the leadership was lost")
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
