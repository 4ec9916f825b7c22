package redistest_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/redistest"
)

// TestClockShimJumps: a running redis-server on a Clock answers TIME by
// it, and expires a key early when the clock jumps forward past the key's
// expiry and late when it steps back; a server on CLOCKSHIM_OFFSET_US
// alone (the failover suite's) is behind by that offset from its start.
func TestClockShimJumps(t *testing.T) {
	t.Parallel()
	shim := redistest.ClockShim(t)
	clk := redistest.NewClock(t, shim)
	s := redistest.StartStandaloneEnv(t, clk.Env()...)
	c := newClient(t, s.Addr())
	skew := func() time.Duration {
		t.Helper()
		now, err := c.Time(ctx(t)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return time.Until(now)
	}
	near := func(got, want time.Duration) bool { return got > want-time.Second && got < want+time.Second }
	for _, d := range []time.Duration{0, time.Hour, -10 * time.Minute, 0} {
		clk.Set(d)
		if got := skew(); !near(got, d) {
			t.Fatalf("Set(%v): TIME is %v off the real clock", d, got)
		}
	}

	clk.Set(0)
	if err := c.Set(ctx(t), "k", "v", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	clk.Set(-10 * time.Minute)
	if ttl := c.PTTL(ctx(t), "k").Val(); ttl < 10*time.Minute {
		t.Fatalf("PTTL after a step back of 10m: %v, want about 10m10s", ttl)
	}
	clk.Set(time.Minute)
	if n := c.Exists(ctx(t), "k").Val(); n != 0 {
		t.Fatalf("a key of 10s still exists after a jump forward of 1m (PTTL %v)", c.PTTL(ctx(t), "k").Val())
	}

	fixed := redistest.StartStandaloneEnv(t, "LD_PRELOAD="+shim,
		"CLOCKSHIM_OFFSET_US="+strconv.FormatInt((5*time.Second).Microseconds(), 10))
	now, err := newClient(t, fixed.Addr()).Time(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Until(now); !near(got, -5*time.Second) {
		t.Fatalf("CLOCKSHIM_OFFSET_US=5000000: TIME is %v off the real clock, want -5s", got)
	}
}
