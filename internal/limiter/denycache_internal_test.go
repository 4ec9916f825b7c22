package limiter

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// TestDenyCacheDropsExpired: denials expire within maxAge, and the cache
// drops them as it takes new ones, instead of keeping them until it is
// full: 10,000 denials, then 10,000 more once the first have expired,
// leave about 10,000 entries (sampled, so a little more), not 20,000 (the default size is 100,000, so
// a busy coordd would otherwise hold that many long-dead denials).
func TestDenyCacheDropsExpired(t *testing.T) {
	c := newDenyCache(100_000, time.Second)
	now := time.Unix(1_800_000_000, 0)
	deny := store.Decision{Allowed: false, Limit: 1, RetryAfter: time.Second, ResetAfter: time.Second}
	lim := store.Limit{Algorithm: store.FixedWindow, Limit: 1, Period: time.Second}
	put := func(prefix string) {
		for i := range 10_000 {
			c.put(denyKey{key: fmt.Sprint(prefix, i), limit: lim}, 1, deny, now)
		}
	}
	put("a")
	if n := c.len(); n != 10_000 {
		t.Fatalf("after 10,000 denials: %d entries", n)
	}
	now = now.Add(2 * time.Second) // every one of them expired
	put("b")
	if n := c.len(); n > 12_500 {
		t.Errorf("after 10,000 more denials, the first expired: %d entries, want about 10,000", n)
	}
}
