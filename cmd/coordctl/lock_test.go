package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdScript writes the lock's fence to "fence" and waits until the file
// "done" exists.
const holdScript = `echo "$COORDD_FENCE" > fence; while [ ! -e done ]; do sleep 0.02; done`

func TestLockRunsCommandWithFence(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	p := c.start("lock", "job", "--", "sh", "-c", `echo "$COORDD_LOCK_NAME" > name; env > env; `+holdScript)

	fence := waitFile(t, filepath.Join(c.dir, "fence"), 10*time.Second)
	if n, err := strconv.ParseUint(fence, 10, 64); err != nil || n == 0 {
		t.Fatalf("COORDD_FENCE = %q, want a number > 0", fence)
	}
	info := c.getLock("job")
	host, _ := os.Hostname()
	if info["held"] != true || info["fence"] != fence || info["owner"] != fmt.Sprintf("%s:%d", host, p.cmd.Process.Pid) {
		t.Errorf("GetLock while the command runs = %v; want held with fence %s by the default owner HOSTNAME:PID", info, fence)
	}
	if info["sessionId"] == "" {
		t.Errorf("GetLock = %v; want the lock bound to a session", info)
	}
	if got := readFile(t, filepath.Join(c.dir, "name")); got != "job" {
		t.Errorf("COORDD_LOCK_NAME = %q, want job", got)
	}
	for _, kv := range strings.Split(readFile(t, filepath.Join(c.dir, "env")), "\n") {
		if strings.HasPrefix(kv, "COORDD_") && !strings.HasPrefix(kv, "COORDD_FENCE=") && !strings.HasPrefix(kv, "COORDD_LOCK_NAME=") {
			t.Errorf("the command's environment has %q; want only COORDD_FENCE and COORDD_LOCK_NAME (never the token)", kv)
		}
	}

	touch(t, filepath.Join(c.dir, "done"))
	want(t, p.wait(10*time.Second), 0, "", "")
	// The session's half-close released the lock before coordctl exited.
	if info := c.getLock("job"); info["held"] != false {
		t.Errorf("GetLock right after coordctl exited = %v; want not held", info)
	}
}

func TestLockHeldExits75(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	first := c.start("lock", "job", "--owner", "first holder", "--", "sh", "-c", holdScript)
	waitFile(t, filepath.Join(c.dir, "fence"), 10*time.Second)

	for _, args := range [][]string{
		{"lock", "job", "--", "touch", "ran"},
		{"lock", "--wait", "0", "job", "--", "touch", "ran"},
		{"lock", "job", "--fail-if-held", "--", "touch", "ran"},
	} {
		r := c.run(args...)
		want(t, r, exitHeld, "", `lock "job" is held by "first holder"`)
		if r.took > 5*time.Second {
			t.Errorf("%q took %v; want an answer at once", args, r.took)
		}
	}
	r := c.run("--json", "lock", "job", "--", "touch", "ran")
	want(t, r, exitHeld, "", "first holder")
	if m := jsonOut(t, r); m["acquired"] != false || m["holder"] != "first holder" || m["token"] != "" {
		t.Errorf("--json lock on a held lock printed %v; want acquired false, holder, no token", m)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "ran")); err == nil {
		t.Errorf("a command ran without the lock")
	}
	touch(t, filepath.Join(c.dir, "done"))
	want(t, first.wait(10*time.Second), 0, "", "")
}

func TestLockWaitRunsAfterHolder(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	first := c.start("lock", "job", "--", "sh", "-c",
		`echo "$COORDD_FENCE" > fence1; while [ ! -e done ]; do sleep 0.02; done; date +%s%N > end1`)
	fence1 := waitFile(t, filepath.Join(c.dir, "fence1"), 10*time.Second)
	second := c.start("lock", "--wait", "10s", "job", "--", "sh", "-c",
		`date +%s%N > start2; echo "$COORDD_FENCE" > fence2`)

	time.Sleep(500 * time.Millisecond)
	if !second.running() {
		t.Fatalf("the second lock did not wait: %v", second.wait(0))
	}
	if _, err := os.Stat(filepath.Join(c.dir, "start2")); err == nil {
		t.Fatalf("the second command ran while the first held the lock")
	}
	done := time.Now()
	touch(t, filepath.Join(c.dir, "done"))
	want(t, first.wait(10*time.Second), 0, "", "")
	want(t, second.wait(10*time.Second), 0, "", "")
	if took := time.Since(done); took > 3*time.Second {
		t.Errorf("the waiter finished %v after the holder was told to finish; want it woken at once", took)
	}
	end1, _ := strconv.ParseInt(readFile(t, filepath.Join(c.dir, "end1")), 10, 64)
	start2, _ := strconv.ParseInt(readFile(t, filepath.Join(c.dir, "start2")), 10, 64)
	if end1 == 0 || start2 <= end1 {
		t.Errorf("the second command started at %d, before the first ended at %d", start2, end1)
	}
	f1, _ := strconv.ParseUint(fence1, 10, 64)
	f2, _ := strconv.ParseUint(readFile(t, filepath.Join(c.dir, "fence2")), 10, 64)
	if f2 <= f1 {
		t.Errorf("fences %d then %d; want the second greater", f1, f2)
	}
}

func TestLockExitStatus(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	if err := os.WriteFile(filepath.Join(c.dir, "not-executable"), []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		argv []string
		code int
	}{
		{"success", []string{"true"}, 0},
		{"exit code", []string{"sh", "-c", "exit 7"}, 7},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + int(syscall.SIGKILL)},
		{"not found", []string{"no-such-command-for-coordctl"}, 127},
		{"not executable", []string{"./not-executable"}, 126},
	}
	for _, tt := range tests {
		r := c.run(append([]string{"lock", "job", "--"}, tt.argv...)...)
		if r.code != tt.code {
			t.Errorf("%s: %v; want exit %d", tt.name, r, tt.code)
		}
		if info := c.getLock("job"); info["held"] != false {
			t.Errorf("%s: after coordctl exited, GetLock = %v; want not held", tt.name, info)
		}
	}
}

func TestLockForwardsSignals(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		ready := fmt.Sprintf("ready%d", i)
		// The whole process group gets the signal: the sleep dies, then sh runs its trap.
		script := fmt.Sprintf(`for s in TERM INT HUP; do trap "echo $s > got%d; exit 3" $s; done; touch %s; while :; do sleep 0.05; done`, i, ready)
		p := c.start("lock", "job", "--", "sh", "-c", script)
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(c.dir, ready)); err == nil {
				break
			}
			if time.Now().After(end) || !p.running() {
				t.Fatalf("the command did not start: %v", p.wait(time.Second))
			}
		}
		p.signal(sig)
		want(t, p.wait(10*time.Second), 3, "", "")
		sigName := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGINT: "INT", syscall.SIGHUP: "HUP"}[sig]
		if got := readFile(t, filepath.Join(c.dir, fmt.Sprintf("got%d", i))); got != sigName {
			t.Errorf("sent %v to coordctl; the command got %q", sig, got)
		}
		if info := c.getLock("job"); info["held"] != false {
			t.Errorf("after %v, GetLock = %v; want not held", sig, info)
		}
	}
}

// TestLockInterruptedWhileWaiting: a signal while waiting for the lock ends
// coordctl at once, without running the command.
func TestLockInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	first := c.start("lock", "job", "--", "sh", "-c", holdScript)
	waitFile(t, filepath.Join(c.dir, "fence"), 10*time.Second)
	second := c.start("lock", "--wait", "30s", "job", "--", "touch", "ran")
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	second.signal(syscall.SIGINT)
	want(t, second.wait(10*time.Second), 128+int(syscall.SIGINT), "", "interrupted")
	if took := time.Since(sent); took > 3*time.Second {
		t.Errorf("coordctl took %v to exit after SIGINT", took)
	}
	touch(t, filepath.Join(c.dir, "done"))
	want(t, first.wait(10*time.Second), 0, "", "")
	if _, err := os.Stat(filepath.Join(c.dir, "ran")); err == nil {
		t.Errorf("the interrupted waiter ran its command")
	}
	if info := c.getLock("job"); info["held"] != false {
		t.Errorf("GetLock = %v; want not held", info)
	}
}

// TestLockLostWhenDaemonGoes: with coordd gone (killed) or silent (stopped),
// no heartbeat is answered, and coordctl must end the command within about
// the TTL: every process of it.
func TestLockLostWhenDaemonGoes(t *testing.T) {
	for _, tt := range []struct {
		name string
		sig  syscall.Signal
	}{{"killed", syscall.SIGKILL}, {"stopped", syscall.SIGSTOP}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t)
			if tt.sig == syscall.SIGSTOP {
				t.Cleanup(func() { _ = syscall.Kill(d.Pid(), syscall.SIGCONT) })
			}
			c := newCtl(t, d)
			const ttl = time.Second
			p := c.start("lock", "--ttl", ttl.String(), "job", "--", "sh", "-c",
				`sleep 60 & echo $! > child; echo $$ > pid; wait`)
			child, _ := strconv.Atoi(waitFile(t, filepath.Join(c.dir, "child"), 10*time.Second))
			pid, _ := strconv.Atoi(waitFile(t, filepath.Join(c.dir, "pid"), 10*time.Second))

			d.signal(t, tt.sig)
			sent := time.Now()
			r := p.wait(10 * time.Second)
			took := time.Since(sent)
			want(t, r, exitLeaseLost, "", `lock "job" lost: no heartbeat was answered within the session TTL`)
			want(t, r, exitLeaseLost, "", "the command was terminated")
			// TTL for the lease, plus at most 1s to tidy up, plus slack.
			if took > ttl+2500*time.Millisecond {
				t.Errorf("coordctl exited %v after coordd was %s; want within about the TTL (%v)", took, tt.name, ttl)
			}
			for _, pid := range []int{pid, child} {
				if alive(t, pid) {
					t.Errorf("process %d of the command is still running after its lease was lost", pid)
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// TestLockMaxHold: --max-hold ends the command, and one that ignores SIGTERM
// gets SIGKILL after --grace.
func TestLockMaxHold(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	r := c.run("lock", "--ttl", "5s", "--max-hold", "1s", "--grace", "300ms", "job", "--", "sh", "-c",
		`trap "" TERM; while :; do sleep 0.05; done`)
	want(t, r, exitLeaseLost, "", "--max-hold 1s has passed")
	want(t, r, exitLeaseLost, "", fmt.Sprintf("exit status %d", 128+int(syscall.SIGKILL)))
	if r.took < time.Second || r.took > 4*time.Second {
		t.Errorf("coordctl took %v; want about --max-hold + --grace (1.3s)", r.took)
	}
	if info := c.getLock("job"); info["held"] != false {
		t.Errorf("GetLock = %v; want not held", info)
	}
}

func TestLockUnavailable(t *testing.T) {
	t.Parallel()
	c := ctl{t: t, addr: closedAddr(t), dir: t.TempDir()}
	r := c.run("lock", "job", "--", "touch", "ran")
	want(t, r, exitUnavailable, "", "UNAVAILABLE")
	if _, err := os.Stat(filepath.Join(c.dir, "ran")); err == nil {
		t.Errorf("the command ran without a lock")
	}
}

// holdUntil writes the fence to file and waits until the file done exists.
func holdUntil(file, done string) string {
	return fmt.Sprintf(`echo "$COORDD_FENCE" > %s; while [ ! -e %s ]; do sleep 0.02; done`, file, done)
}

// waitFor polls cond every 10ms until it holds or within has passed.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

func TestLockShared(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	r1 := c.start("lock", "--shared", "data", "--owner", "reader 1", "--", "sh", "-c", holdUntil("fence1", "done"))
	r2 := c.start("lock", "--shared", "data", "--owner", "reader 2", "--", "sh", "-c", holdUntil("fence2", "done"))
	// Both run at once.
	f1 := waitFile(t, filepath.Join(c.dir, "fence1"), 10*time.Second)
	f2 := waitFile(t, filepath.Join(c.dir, "fence2"), 10*time.Second)
	if f1 == f2 || f1 == "0" || f2 == "0" {
		t.Errorf("shared holders' fences %s and %s; want each its own", f1, f2)
	}
	info := c.getLock("data")
	holders, _ := info["holders"].([]any)
	if len(holders) != 2 {
		t.Errorf("GetLock with two shared holders = %v; want two holders", info)
	}
	for _, h := range holders {
		if m, _ := h.(map[string]any); m["shared"] != true || m["sessionBound"] != true {
			t.Errorf("holder %v; want shared and session-bound", h)
		}
	}
	// An exclusive lock is excluded, at once without --wait.
	r := c.run("lock", "data", "--", "touch", "ran")
	want(t, r, exitHeld, "", `lock "data" is held by "reader `)

	// A waiting exclusive request goes before later shared ones.
	writer := c.start("lock", "--wait", "20s", "data", "--owner", "writer", "--", "sh", "-c", holdUntil("fence3", "done3"))
	waitFor(t, 10*time.Second, "the writer waits", func() bool {
		n, _ := c.getLock("data")["waiters"].(float64)
		return n == 1
	})
	want(t, c.run("lock", "--shared", "data", "--", "touch", "ran"), exitHeld, "", `lock "data"`)
	if _, err := os.Stat(filepath.Join(c.dir, "ran")); err == nil {
		t.Errorf("a command ran although it should have been excluded")
	}

	touch(t, filepath.Join(c.dir, "done"))
	want(t, r1.wait(10*time.Second), 0, "", "")
	want(t, r2.wait(10*time.Second), 0, "", "")
	f3 := waitFile(t, filepath.Join(c.dir, "fence3"), 10*time.Second)
	if info := c.getLock("data"); info["held"] != true || info["owner"] != "writer" {
		t.Errorf("GetLock after the readers ended = %v; want held by the writer", info)
	}
	touch(t, filepath.Join(c.dir, "done3"))
	want(t, writer.wait(10*time.Second), 0, "", "")
	n1, _ := strconv.ParseUint(f1, 10, 64)
	n2, _ := strconv.ParseUint(f2, 10, 64)
	n3, _ := strconv.ParseUint(f3, 10, 64)
	if n3 <= max(n1, n2) {
		t.Errorf("the writer's fence %d is not above the readers' %d, %d", n3, n1, n2)
	}
	if info := c.getLock("data"); info["held"] != false {
		t.Errorf("GetLock at the end = %v; want not held", info)
	}
}

func TestLockSemaphore(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	p1 := c.start("lock", "--limit", "2", "pool", "--owner", "w1", "--", "sh", "-c", `env > env; `+holdUntil("fence1", "done1"))
	p2 := c.start("lock", "--limit", "2", "pool", "--owner", "w2", "--", "sh", "-c", holdUntil("fence2", "done2"))
	f1 := waitFile(t, filepath.Join(c.dir, "fence1"), 10*time.Second)
	f2 := waitFile(t, filepath.Join(c.dir, "fence2"), 10*time.Second)
	if f1 == f2 {
		t.Errorf("two permits with one fence %s; want each its own", f1)
	}
	for _, kv := range strings.Split(readFile(t, filepath.Join(c.dir, "env")), "\n") {
		if strings.HasPrefix(kv, "COORDD_") && kv != "COORDD_FENCE="+f1 && kv != "COORDD_LOCK_NAME=pool" {
			t.Errorf("the command's environment has %q; want only COORDD_FENCE=%s and COORDD_LOCK_NAME=pool", kv, f1)
		}
	}

	// Full: a third exits 75 at once; another limit is refused.
	want(t, c.run("lock", "--limit", "2", "pool", "--", "touch", "ran"), exitHeld, "", `semaphore "pool" has no free permit (2 of 2 held)`)
	r := c.run("--json", "lock", "--limit", "2", "pool", "--", "touch", "ran")
	want(t, r, exitHeld, "", `semaphore "pool"`)
	if m := jsonOut(t, r); m["acquired"] != false || m["token"] != "" {
		t.Errorf("--json lock --limit on a full semaphore printed %v; want acquired false, no token", m)
	}
	want(t, c.run("lock", "--limit", "3", "pool", "--", "touch", "ran"), exitFailure, "", "LIMIT_MISMATCH")
	// A lock of the same name is another thing.
	want(t, c.run("lock", "pool", "--", "true"), 0, "", "")
	if _, err := os.Stat(filepath.Join(c.dir, "ran")); err == nil {
		t.Errorf("a command ran without a permit")
	}

	// A waiter gets the permit that a holder gives back.
	p3 := c.start("lock", "--limit", "2", "--wait", "20s", "pool", "--", "sh", "-c", `echo "$COORDD_FENCE" > fence3`)
	time.Sleep(300 * time.Millisecond)
	if !p3.running() {
		t.Fatalf("the third permit did not wait: %v", p3.wait(0))
	}
	touch(t, filepath.Join(c.dir, "done1"))
	want(t, p1.wait(10*time.Second), 0, "", "")
	want(t, p3.wait(10*time.Second), 0, "", "")
	n1, _ := strconv.ParseUint(f1, 10, 64)
	n2, _ := strconv.ParseUint(f2, 10, 64)
	n3, _ := strconv.ParseUint(readFile(t, filepath.Join(c.dir, "fence3")), 10, 64)
	if n3 <= max(n1, n2) {
		t.Errorf("the third permit's fence %d is not above the first two, %d and %d", n3, n1, n2)
	}
	touch(t, filepath.Join(c.dir, "done2"))
	want(t, p2.wait(10*time.Second), 0, "", "")
	// Every permit was given back: the limit may change.
	want(t, c.run("lock", "--limit", "5", "pool", "--", "true"), 0, "", "")
}

// TestWaitsBeyondMaxWait: a --wait longer than coordd's limits.max_wait
// (1s here; coordctl assumes 1m and finds the lower limit) waits again,
// with a progress line each time, for a lock, a permit and a leadership.
func TestWaitsBeyondMaxWait(t *testing.T) {
	t.Parallel()
	d := startDaemonConfig(t, "limits:\n  max_wait: 1s\n")
	for _, tt := range []struct {
		name     string
		hold     []string // before -- and the command
		progress string
	}{
		{"lock", []string{"lock", "job"}, `waiting for "job", held by "first holder"`},
		{"semaphore", []string{"lock", "--limit", "1", "pool"}, `waiting for "pool", held by "first holder"`},
		{"shared lock", []string{"lock", "--shared", "data"}, `waiting for "data", held by "first holder"`},
		{"election", []string{"elect", "sched"}, `waiting for "sched", held by "first holder"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCtl(t, d)
			label := "--owner"
			if tt.hold[0] == "elect" {
				label = "--value"
			}
			first := tt.hold
			if tt.name == "shared lock" {
				first = []string{"lock", "data"} // an exclusive holder, a shared waiter
			}
			p1 := c.start(append(append([]string{}, first...), label, "first holder", "--", "sh", "-c", holdScript)...)
			waitFile(t, filepath.Join(c.dir, "fence"), 10*time.Second)

			// A wait that runs out: progress lines, then exit 75.
			r := c.run(append(append([]string{}, tt.hold...), "--wait", "2500ms", "--", "touch", "ran")...)
			want(t, r, exitHeld, "", tt.progress)
			if r.took < 2500*time.Millisecond {
				t.Errorf("--wait 2500ms gave up after %v", r.took)
			}

			// A wait that ends in a grant, with an explicit --max-wait.
			p2 := c.start(append(append([]string{}, tt.hold...), "--wait", "30s", "--max-wait", "1s", "--", "sh", "-c", `echo "$COORDD_FENCE" > fence2`)...)
			waitFor(t, 15*time.Second, "two progress lines", func() bool { return strings.Count(p2.stderr.String(), tt.progress) >= 2 })
			touch(t, filepath.Join(c.dir, "done"))
			want(t, p1.wait(10*time.Second), 0, "", "")
			r = p2.wait(10 * time.Second)
			want(t, r, 0, "", tt.progress)
			if waitFile(t, filepath.Join(c.dir, "fence2"), time.Second) == "" {
				t.Errorf("the waiter's command got no fence")
			}
			if _, err := os.Stat(filepath.Join(c.dir, "ran")); err == nil {
				t.Errorf("a command ran without its hold")
			}
		})
	}
}
