package redlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
)

// TestFenceAboveAnotherInstancesCounters: a grant's fence is proposed in
// its first round; when a majority's counters are at or above the
// proposal (another instance, whose clock runs ahead, granted the name
// last), the grant's second round writes their maximum + 1, which a later
// grant's proposal must then pass: fences strictly increase either way.
// With the counters ahead on a minority only, the first round's majority
// decides.
func TestFenceAboveAnotherInstancesCounters(t *testing.T) {
	ms := masters(t, 5)
	st := open(t, addrsOf(ms), nil)
	ctx := context.Background()
	first, err := lock(t, st, "x", 10*time.Second)
	if err != nil || !first.Acquired {
		t.Fatalf("first grant: %+v, %v", first, err)
	}
	if _, err := st.ReleaseHold(ctx, store.HoldLock, "x", first.Token, ""); err != nil {
		t.Fatal(err)
	}
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	for i, n := range []int{1, 3, 5} { // a majority, and then everyone
		for _, m := range ms[:n] {
			c := redis.NewClient(redistest.Options(m.Addr()))
			err := c.Set(ctx, "rl:{rl:x}:f", strconv.FormatUint(ahead+uint64(i)*1000, 10), time.Hour).Err()
			_ = c.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		g, err := lock(t, st, "x", 10*time.Second)
		if err != nil || !g.Acquired {
			t.Fatalf("grant with %d counters ahead: %+v, %v", n, g, err)
		}
		if n >= 3 && g.Fence <= ahead+uint64(i)*1000 {
			t.Fatalf("%d of 5 counters at %d, and the grant's fence is %d: not above a majority's counter", n, ahead+uint64(i)*1000, g.Fence)
		}
		if g.Fence <= first.Fence {
			t.Fatalf("fence %d after %d", g.Fence, first.Fence)
		}
		if info, err := st.GetHolds(ctx, store.HoldLock, "x"); err != nil || info.Fence != g.Fence {
			t.Fatalf("GetHolds: %+v, %v; want fence %d", info, err, g.Fence)
		}
		if _, err := st.ReleaseHold(ctx, store.HoldLock, "x", g.Token, ""); err != nil {
			t.Fatal(err)
		}
		next, err := lock(t, st, "x", 10*time.Second)
		if err != nil || !next.Acquired || next.Fence <= g.Fence {
			t.Fatalf("the grant after: %+v, %v; want a fence above %d", next, err, g.Fence)
		}
		if _, err := st.ReleaseHold(ctx, store.HoldLock, "x", next.Token, ""); err != nil {
			t.Fatal(err)
		}
		first = next
	}
}

// TestOneDownCostsNoValidity: with one master refusing connections, a
// grant of a 500 ms lease answers most of it as validity: every grant
// waits for every master, and the refused one answers at once (one dial,
// not go-redis's default of 5 tries 100 ms apart, which left 77-88 ms).
func TestOneDownCostsNoValidity(t *testing.T) {
	ms := masters(t, 5)
	st := open(t, addrsOf(ms), nil)
	ms[0].Kill()
	for i := range 3 {
		g, err := lock(t, st, "quick"+strconv.Itoa(i), 500*time.Millisecond)
		if err != nil || !g.Acquired {
			t.Fatalf("grant %d with one master down: %+v, %v", i, g, err)
		}
		if g.TTL < 250*time.Millisecond {
			t.Fatalf("grant %d with one master down: validity %v of a 500ms lease: the grant took %v", i, g.TTL, 500*time.Millisecond-g.TTL)
		}
	}
}
