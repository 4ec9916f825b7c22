package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/token"
)

// TestFenceFloorWhenClockIsBehind: a failover that loses the last fence
// increments and promotes a node whose clock is behind the old master's by
// more than the failover took. The fence counter alone is behind, and so is
// the server time, so fences would go backwards; the store floors them at
// the highest server time it has seen + 1. (failover TestReplicationLoss
// does this with real processes: a replica under redistest.ClockShim.)
func TestFenceFloorWhenClockIsBehind(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	clk := clock.NewFake(t0)
	st, err := redis.Open(context.Background(), redis.Config{
		Mode: "standalone", Addrs: []string{redistest.StartStandalone(t).Addr()}, Clock: clk, Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	lock := func(name string) store.Grant {
		t.Helper()
		g, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), Owner: "o", TTL: time.Second})
		if err != nil || !g.Acquired {
			t.Fatalf("AcquireLock %s: %+v, %v", name, g, err)
		}
		return g
	}
	first := lock("a")
	if want := uint64(t0.UnixMicro()); first.Fence != want {
		t.Fatalf("first fence %d, want the clock's %d", first.Fence, want)
	}
	// The failover: everything since the last replication is gone (here,
	// everything), and the new master's clock is 5 s behind.
	if err := st.Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(-5 * time.Second))
	second := lock("a")
	if second.Fence <= first.Fence {
		t.Errorf("after a failover to a node 5s behind: fence %d, not above the %d granted before", second.Fence, first.Fence)
	}
	// Leases are still counted on the store's clock.
	if second.TTL != time.Second || !second.ExpireTime.Equal(t0.Add(-4*time.Second)) {
		t.Errorf("grant on the clock behind: ttl %v expire %v, want 1s and %v", second.TTL, second.ExpireTime, t0.Add(-4*time.Second))
	}
	// Once the clock is past what was seen, fences are its time again.
	clk.Set(t0.Add(time.Second))
	if g := lock("b"); g.Fence != uint64(t0.Add(time.Second).UnixMicro()) {
		t.Errorf("fence %d once the clock is ahead again, want its time %d", g.Fence, t0.Add(time.Second).UnixMicro())
	}
}
