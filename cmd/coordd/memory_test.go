package main

import (
	"runtime/debug"
	"testing"

	"github.com/coordd/coordd/internal/server"
)

// TestMaxSessionsDerivedFromMemory: limits.max_sessions 0 is half of the
// memory coordd may use at server.SessionBytes a session: GOMEMLIMIT when
// set, else the cgroup's or the machine's memory, never fewer than 1000.
func TestMaxSessionsDerivedFromMemory(t *testing.T) {
	if b, from := memoryBudget(); b <= 0 {
		t.Fatalf("memoryBudget() = %d from %s: this machine's memory could not be read", b, from)
	} else {
		t.Logf("memory budget %d bytes from %s: limits.max_sessions 0 is %d", b, from, server.DerivedMaxSessions(b))
	}
	old := debug.SetMemoryLimit(1 << 30)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	b, from := memoryBudget()
	if b != 1<<30 || from != "GOMEMLIMIT" {
		t.Fatalf("memoryBudget() with a 1 GiB memory limit = %d from %s", b, from)
	}
	if n := server.DerivedMaxSessions(b); n != 8192 {
		t.Fatalf("DerivedMaxSessions(1 GiB) = %d, want 8192 (512 MiB at 64 KiB)", n)
	}
	if n := server.DerivedMaxSessions(0); n != 1000 {
		t.Fatalf("DerivedMaxSessions(0) = %d, want the floor 1000", n)
	}
}
