package redistest

import (
	_ "embed"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

//go:embed testdata/clockshim.c
var clockShimSource []byte

// ClockShim builds testdata/clockshim.c, an LD_PRELOAD library that shifts
// a process's wall clock (see its comment), with the C compiler into
// t.TempDir() and returns the library's path. Without Linux or a C
// compiler (gcc or cc) it fails the test under CI and skips it otherwise.
// A server runs under it with env (StartStandaloneEnv)
// "LD_PRELOAD=" + path and "CLOCKSHIM_OFFSET_US=" + µs behind, or with a
// Clock's Env.
func ClockShim(t testing.TB) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		missing(t, "the clock shim (LD_PRELOAD) needs Linux")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if cc, err = exec.LookPath("cc"); err != nil {
			missing(t, "no C compiler (gcc or cc) to build the clock shim")
		}
	}
	dir := t.TempDir()
	src, out := filepath.Join(dir, "clockshim.c"), filepath.Join(dir, "clockshim.so")
	if err := os.WriteFile(src, clockShimSource, 0o644); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if b, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("redistest: building the clock shim: %v\n%s", err, b)
	}
	return out
}

// Clock is a wall clock that a test steps while the servers that read it
// run: servers started with its Env read their clock (CLOCK_REALTIME,
// gettimeofday, time: what Redis expires keys and answers TIME by) as the
// real one plus the clock's offset, which Set changes at once. Monotonic
// clocks are left alone. Each Clock is one offset: give each server whose
// clock moves on its own a Clock of its own.
type Clock struct {
	env  []string
	word *int64 // the offset file's first 8 bytes, mapped: µs behind
}

// NewClock returns a Clock at offset 0 on shim (from ClockShim, which
// clocks can share), unmapped when the test ends.
func NewClock(t testing.TB, shim string) *Clock {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "clock-")
	if err == nil {
		_, err = f.Write(make([]byte, 8))
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	word, unmap, err := mapWord(f.Name())
	if err != nil {
		t.Fatalf("redistest: mapping %s: %v", f.Name(), err)
	}
	t.Cleanup(unmap)
	return &Clock{env: []string{"LD_PRELOAD=" + shim, "CLOCKSHIM_OFFSET_FILE=" + f.Name()}, word: word}
}

// Env is the environment (for StartStandaloneEnv) of a server on this
// clock.
func (c *Clock) Env() []string { return c.env }

// Set sets the clock to the real one plus d (negative: behind), for every
// server on it, from their next reading on: a forward or backward jump of
// a running process's wall clock.
func (c *Clock) Set(d time.Duration) { atomic.StoreInt64(c.word, -d.Microseconds()) }

// Offset is the clock's offset from the real one.
func (c *Clock) Offset() time.Duration {
	return -time.Duration(atomic.LoadInt64(c.word)) * time.Microsecond
}
