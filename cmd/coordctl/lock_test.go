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
