package redis

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
)

// TestLimitKeysOutliveAStepBack checks the physical expiries that
// store/ratelimit.go asks for, so that a step back of Redis's clock (a
// failover to a master whose clock is behind) still finds a limiter's
// state: a fixed window's key lives a period past its window, on Redis's own
// TIME; a sliding log's keys live until its latest entry + P, also when the
// clock stepped back below that entry.
func TestLimitKeysOutliveAStepBack(t *testing.T) {
	addr := redistest.Standalone(t)
	ctx := context.Background()
	t.Run("fixed window", func(t *testing.T) {
		s, c, _ := rgStandalone(t, addr, nil, Config{}) // Redis's TIME, no slack
		l := store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Hour}
		if d, err := s.Allow(ctx, "k", l, 1, false); err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v", d, err)
		}
		ttl, err := c.PTTL(ctx, s.keys.limit("k", l)[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		// The window ends within the hour; its key must live an hour more.
		if ttl <= l.Period || ttl > 2*l.Period+time.Second {
			t.Errorf("the fixed window's key expires in %v, want between %v and %v: a period past its window", ttl, l.Period, 2*l.Period)
		}
	})
	t.Run("sliding log", func(t *testing.T) {
		clk := clock.NewFake(rgT0)
		s, c, _ := rgStandalone(t, addr, clk, Config{}) // slack: an hour on every expiry
		l := store.Limit{Algorithm: store.SlidingLog, Limit: 5, Period: time.Second}
		if _, err := s.Allow(ctx, "k", l, 1, false); err != nil {
			t.Fatal(err)
		}
		clk.Advance(-500 * time.Millisecond)
		d, err := s.Allow(ctx, "k", l, 1, false)
		if err != nil || d != (store.Decision{Allowed: true, Remaining: 3, ResetAfter: 1500 * time.Millisecond}) {
			t.Fatalf("Allow 500ms before the first entry = %+v, %v; want allowed, reset after 1.5s", d, err)
		}
		for _, k := range s.keys.limit("k", l) {
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := time.Hour + 1500*time.Millisecond; ttl < want-time.Second || ttl > want+10*time.Millisecond {
				t.Errorf("%s expires in %v, want about %v (the slack + the latest entry's end)", k, ttl, want)
			}
		}
	})
}
