//go:build unix

package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// TestRegressionDuplicateEnqueueIsReplicated (found by the failover suite,
// failover/queue_test.go): with WaitReplicas, an Enqueue that finds its
// dedup ID already there answers duplicate=true only once the first
// enqueue is replicated too; until then it is uncertain (errNotReplicated,
// store.ErrUnavailable), like the first.
//
// Forced input: a private master, first with no replica, then with one
// replica stopped (SIGSTOP: still online for the master, acknowledging
// nothing). The old code returned errNotReplicated only for a new message:
// a retry after UNAVAILABLE, with the same dedup ID, was answered OK
// (duplicate) whether or not the message had reached a replica, so a client
// that did what UNAVAILABLE tells it to do was told its message was safe
// while a failover could still lose it.
//
// The retry on a fresh connection checks what the fix relies on: the
// duplicate's script writes nothing, and its WAIT must still cover the
// first enqueue, made on another connection. Redis 7.0 moves a
// connection's WAIT offset to the master's offset after every command,
// writes or not, so it does; a Redis that moved it only after writes would
// fail here (the script would then have to write).
func TestRegressionDuplicateEnqueueIsReplicated(t *testing.T) {
	master, replica := redistest.StartStandalone(t), redistest.StartStandalone(t)
	defer rgCloseAdmins()
	ctx := context.Background()
	opts := Config{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond, Prefix: "rg" + token.New()[:12]}
	s, _, _ := rgStandalone(t, master.Addr(), nil, opts)
	const q = "ns:q"
	enqueue := func(s *Store, dedup string) (store.Enqueued, error) {
		return s.Enqueue(ctx, q, store.NewMessage{ID: token.New(), Payload: []byte(dedup), MaxAttempts: 3, DedupID: dedup, DedupWindow: time.Minute})
	}
	wantUncertain := func(what string, e store.Enqueued, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), errNotReplicated.Error()) {
			t.Fatalf("%s = %+v, %v; want errNotReplicated (store.ErrUnavailable)", what, e, err)
		}
	}

	// No replica at all: the first enqueue and its retry are uncertain.
	e, err := enqueue(s, "d1")
	wantUncertain("Enqueue(d1) without a replica", e, err)
	e, err = enqueue(s, "d1")
	wantUncertain("Enqueue(d1) again, without a replica", e, err)

	// A replica attaches and syncs: the retry is a certain duplicate.
	mport := master.Addr()[strings.LastIndex(master.Addr(), ":")+1:]
	if err := rgAdmin(replica.Addr()).Do(ctx, "replicaof", "127.0.0.1", mport).Err(); err != nil {
		t.Fatal(err)
	}
	var first store.Enqueued
	for deadline := time.Now().Add(10 * time.Second); ; {
		first, err = enqueue(s, "d1")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Enqueue(d1) with a replica attached: %v 10s later", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !first.Duplicate {
		t.Fatalf("Enqueue(d1) with the replica attached = %+v; want a duplicate", first)
	}

	// The replica stops acknowledging. A new message is uncertain; so is
	// its retry on another store, whose connection has never written.
	info, err := rgAdmin(replica.Addr()).Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(infoValue(info, "process_id"))
	if err != nil {
		t.Fatalf("the replica's process_id: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	e, err = enqueue(s, "d2")
	wantUncertain("Enqueue(d2) with the replica stopped", e, err)
	fresh, _, _ := rgStandalone(t, master.Addr(), nil, opts)
	e, err = enqueue(fresh, "d2")
	wantUncertain("Enqueue(d2) again, on a fresh connection, with the replica stopped", e, err)

	// The replica resumes: the retry is a certain duplicate of the first.
	resume()
	for deadline := time.Now().Add(10 * time.Second); ; {
		e, err = enqueue(fresh, "d2")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Enqueue(d2) after the replica resumed: %v 10s later", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !e.Duplicate {
		t.Errorf("Enqueue(d2) after the replica resumed = %+v; want a duplicate", e)
	}
	if n, err := rgAdmin(replica.Addr()).ZCard(ctx, s.keys.queue(q)[10]).Result(); err != nil || n != 2 {
		t.Errorf("the replica's ready set has %d messages (%v); want 2", n, err)
	}
}

// infoValue returns the value of name in INFO text.
func infoValue(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
