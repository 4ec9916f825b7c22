package lock

import (
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/validate"
)

// Validate checks every rule, naming the configuration key of each bad one
// (MaxWait and MaxNameBytes are limits.max_wait and limits.max_name_bytes).
// server.NewServices refuses a Config that does not pass.
func (c Config) Validate() error {
	var v validate.Checks
	v.Positive("lock.default_ttl", c.DefaultTTL)
	v.Positive("lock.max_ttl", c.MaxTTL)
	v.Positive("lock.hold_limit", c.HoldLimit)
	v.Ordered("lock.default_ttl", c.DefaultTTL, "lock.max_ttl", c.MaxTTL)
	if n := c.MaxSharedHolders; n < 1 || n > MaxSharedHoldersLimit {
		// A release wakes, and GetLock lists, every shared holder: bounded.
		v.Bad("lock.max_shared_holders", "must be between 1 and %d, got %d", MaxSharedHoldersLimit, n)
	}
	hold.CheckLimits(&v, c.MaxWait, c.MaxNameBytes)
	return v.Err()
}
