package lock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/lock"
)

// TestConfigValidate: the defaults pass, and every bad value is an error
// that names its configuration key.
func TestConfigValidate(t *testing.T) {
	if err := lock.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	tests := []struct {
		name string
		set  func(*lock.Config)
		want string
	}{
		{"zero default_ttl", func(c *lock.Config) { c.DefaultTTL = 0 }, "lock.default_ttl: must be positive, got 0s"},
		{"negative max_ttl", func(c *lock.Config) { c.MaxTTL = -time.Second }, "lock.max_ttl: must be positive, got -1s"},
		{"zero hold_limit", func(c *lock.Config) { c.HoldLimit = 0 }, "lock.hold_limit: must be positive"},
		{"default over max", func(c *lock.Config) { c.DefaultTTL, c.MaxTTL = 2*time.Hour, time.Hour }, "lock.default_ttl: (2h0m0s) must not exceed lock.max_ttl (1h0m0s)"},
		{"no shared holders", func(c *lock.Config) { c.MaxSharedHolders = 0 }, "lock.max_shared_holders: must be between 1 and 10000, got 0"},
		{"too many shared holders", func(c *lock.Config) { c.MaxSharedHolders = lock.MaxSharedHoldersLimit + 1 }, "lock.max_shared_holders: must be between 1 and 10000, got 10001"},
		{"negative max wait", func(c *lock.Config) { c.MaxWait = -time.Second }, "limits.max_wait: must not be negative, got -1s"},
		{"zero name bytes", func(c *lock.Config) { c.MaxNameBytes = 0 }, "limits.max_name_bytes: must be at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := lock.DefaultConfig()
			tt.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
	c := lock.DefaultConfig()
	c.MaxSessionHolds, c.MaxWait, c.MaxSharedHolders = hold.MaxSessionHoldsLimit, 0, lock.MaxSharedHoldersLimit
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() at the bounds = %v, want nil", err)
	}
	c.MaxSharedHolders = 1
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() with max_shared_holders 1 = %v, want nil", err)
	}
}
