package main

// coordctl against a coordd in Redlock mode (redis.mode redlock) on five
// redis-server processes of the test's own: `lock` holds a plain lease,
// renewed by coordctl, and ends the command when the lease is lost.

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

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/daemontest"
	"github.com/coordd/coordd/internal/redistest"
)

// startRedlockDaemon starts coordd in Redlock mode over n standalone
// masters of the test's own.
func startRedlockDaemon(t *testing.T, n int) (*daemon, []*redistest.Server) {
	t.Helper()
	ms := make([]*redistest.Server, n)
	addrs := make([]string, n)
	for i := range ms {
		ms[i] = redistest.StartStandalone(t)
		addrs[i] = ms[i].Addr()
	}
	d := daemontest.Start(t, daemontest.Options{
		Env:         []string{"COORDD_STORE=redis", "COORDD_REDIS_MODE=redlock", "COORDD_REDIS_ADDRS=" + strings.Join(addrs, ",")},
		WaitServing: true, KillAtEnd: true,
	})
	return &daemon{Daemon: d, addr: d.GRPCAddr}, ms
}

// TestLockRedlock: the command runs while the lock is held as a plain
// lease (GetLock shows it held with the command's fence, not bound to a
// session; another lock cannot take it) for more than two TTLs, so only
// renewals keep it; a waiter that waited more than its TTL gets it when
// the command ends, with a greater fence, and keeps it while its command
// runs; the lock is free once coordctl exits. What needs a session is
// refused, naming REDLOCK_MODE.
func TestLockRedlock(t *testing.T) {
	t.Parallel()
	d, _ := startRedlockDaemon(t, 5)
	c := newCtl(t, d)
	const ttl = 1500 * time.Millisecond
	p := c.start("lock", "--ttl", ttl.String(), "--owner", "redlock holder", "job", "--", "sh", "-c", `env > env; `+holdScript)
	fence := waitFile(t, filepath.Join(c.dir, "fence"), 10*time.Second)
	if n, err := strconv.ParseUint(fence, 10, 64); err != nil || n == 0 {
		t.Fatalf("COORDD_FENCE = %q, want a number > 0", fence)
	}
	for _, kv := range strings.Split(readFile(t, filepath.Join(c.dir, "env")), "\n") {
		if strings.HasPrefix(kv, "COORDD_") && kv != "COORDD_FENCE="+fence && kv != "COORDD_LOCK_NAME=job" {
			t.Errorf("the command's environment has %q; want only COORDD_FENCE and COORDD_LOCK_NAME", kv)
		}
	}
	held := func(when string) {
		t.Helper()
		info := c.getLock("job")
		if info["held"] != true || info["fence"] != fence || info["owner"] != "redlock holder" || info["sessionBound"] == true {
			t.Fatalf("GetLock %s = %v; want held by \"redlock holder\" with fence %s, not session-bound", when, info, fence)
		}
	}
	held("while the command runs")
	want(t, c.run("lock", "--wait", "0", "job", "--", "touch", "ran"), exitHeld, "", `lock "job" is held by "redlock holder"`)
	want(t, c.run("check-fence", "job", fence), 0, "", "")

	// Only renewals keep a lease of 1.5s for 4s.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if !p.running() {
			t.Fatalf("coordctl ended while its command ran: %v", p.wait(time.Second))
		}
		held("more than a TTL after the grant")
	}
	// The waiter waits longer than its TTL, and its command runs a TTL
	// more: a lease counted from when its request was sent would be over
	// at its grant, and the command killed (exit 70).
	waiter := c.start("lock", "--ttl", ttl.String(), "--wait", "20s", "job", "--", "sh", "-c", `echo "$COORDD_FENCE" > fence2; sleep 1.5`)
	time.Sleep(2 * ttl)
	if !waiter.running() {
		t.Fatalf("the waiter did not wait: %v", waiter.wait(time.Second))
	}

	touch(t, filepath.Join(c.dir, "done"))
	want(t, p.wait(10*time.Second), 0, "", "")
	want(t, waiter.wait(10*time.Second), 0, "", "")
	f1, _ := strconv.ParseUint(fence, 10, 64)
	if f2, _ := strconv.ParseUint(readFile(t, filepath.Join(c.dir, "fence2")), 10, 64); f2 <= f1 {
		t.Errorf("the waiter's fence %d is not above the first holder's %d", f2, f1)
	}
	if info := c.getLock("job"); info["held"] != false {
		t.Errorf("GetLock after both exited = %v; want not held (released)", info)
	}

	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"lock", "--shared", "job", "--", "touch", "ran"}, `not a shared lock (--shared): FAILED_PRECONDITION (REDLOCK_MODE)`},
		{[]string{"lock", "--limit", "2", "job", "--", "touch", "ran"}, `not a semaphore (--limit): FAILED_PRECONDITION (REDLOCK_MODE)`},
		{[]string{"elect", "job", "--", "touch", "ran"}, `not an election: FAILED_PRECONDITION (REDLOCK_MODE)`},
		{[]string{"get-semaphore", "job"}, "FAILED_PRECONDITION (REDLOCK_MODE)"},
		{[]string{"leader", "job"}, "FAILED_PRECONDITION (REDLOCK_MODE)"},
		{[]string{"stats", "q"}, "FAILED_PRECONDITION (REDLOCK_MODE)"},
	} {
		want(t, c.run(tt.args...), exitFailure, "", tt.msg)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "ran")); err == nil {
		t.Errorf("a command ran without the lock")
	}
}

// TestLockRedlockLost: the plain lease is lost, and the command ended
// (SIGTERM to its process group, exit 70), when coordd answers a renewal
// LOCK_NOT_HELD (the lock's keys deleted on 3 of 5 masters), or when the
// lease runs out while renewals fail (3 of 5 masters killed: UNAVAILABLE,
// which must not extend it).
func TestLockRedlockLost(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	for _, tt := range []struct {
		name   string
		lose   func(t *testing.T, ms []*redistest.Server, name string)
		stderr string
		within time.Duration // after the loss
	}{
		{"not held", deleteKeys, `coordd answers a renewal FAILED_PRECONDITION (LOCK_NOT_HELD)`, ttl/3 + time.Second},
		{"majority down", func(t *testing.T, ms []*redistest.Server, _ string) {
			for _, m := range ms[:3] {
				m.Kill()
			}
		}, "no renewal was answered before the lease's end", ttl + time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, ms := startRedlockDaemon(t, 5)
			c := newCtl(t, d)
			name := "lost-" + strings.ReplaceAll(tt.name, " ", "-")
			p := c.start("lock", "--ttl", ttl.String(), "--grace", "500ms", name, "--", "sh", "-c",
				`sleep 60 & echo $! > child; echo $$ > pid; wait`)
			child, _ := strconv.Atoi(waitFile(t, filepath.Join(c.dir, "child"), 10*time.Second))
			pid, _ := strconv.Atoi(waitFile(t, filepath.Join(c.dir, "pid"), 10*time.Second))
			time.Sleep(ttl) // a renewal or two

			tt.lose(t, ms, name)
			lost := time.Now()
			r := p.wait(10 * time.Second)
			took := time.Since(lost)
			want(t, r, exitLeaseLost, "", fmt.Sprintf("lock %q lost: %s", name, tt.stderr))
			want(t, r, exitLeaseLost, "", "the lease was lost while the command ran; the command was terminated")
			// The loss, plus at most a second to tidy up.
			if took > tt.within+time.Second {
				t.Errorf("coordctl exited %v after the loss; want within %v", took, tt.within+time.Second)
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

// deleteKeys deletes every key with name in it on 3 of the 5 masters: the
// lock is then held on a minority only.
func deleteKeys(t *testing.T, ms []*redistest.Server, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, m := range ms[:3] {
		rc := redis.NewClient(redistest.Options(m.Addr()))
		keys, err := rc.Keys(ctx, "*"+name+"*").Result()
		if err == nil && len(keys) == 0 {
			err = fmt.Errorf("no key has %q in it", name)
		}
		if err == nil {
			err = rc.Del(ctx, keys...).Err()
		}
		_ = rc.Close()
		if err != nil {
			t.Fatalf("deleting the lock's keys on %s: %v", m.Addr(), err)
		}
	}
}
