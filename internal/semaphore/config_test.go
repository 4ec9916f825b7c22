package semaphore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/semaphore"
)

// TestConfigValidate: the defaults pass, and every bad value is an error
// that names its configuration key.
func TestConfigValidate(t *testing.T) {
	if err := semaphore.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	for _, tt := range []struct {
		name string
		set  func(*semaphore.Config)
		want string
	}{
		{"zero default_ttl", func(c *semaphore.Config) { c.DefaultTTL = 0 }, "semaphore.default_ttl: must be positive, got 0s"},
		{"zero max_ttl", func(c *semaphore.Config) { c.MaxTTL = 0 }, "semaphore.max_ttl: must be positive"},
		{"zero hold_limit", func(c *semaphore.Config) { c.HoldLimit = 0 }, "semaphore.hold_limit: must be positive"},
		{"default over max", func(c *semaphore.Config) { c.DefaultTTL, c.MaxTTL = 2*time.Hour, time.Hour }, "semaphore.default_ttl: (2h0m0s) must not exceed semaphore.max_ttl (1h0m0s)"},
		{"zero max_limit", func(c *semaphore.Config) { c.MaxLimit = 0 }, "semaphore.max_limit: must be between 1 and 10000, got 0"},
		{"max_limit too big", func(c *semaphore.Config) { c.MaxLimit = semaphore.MaxLimitLimit + 1 }, "semaphore.max_limit: must be between 1 and 10000, got 10001"},
		{"negative max wait", func(c *semaphore.Config) { c.MaxWait = -time.Second }, "limits.max_wait: must not be negative, got -1s"},
		{"zero name bytes", func(c *semaphore.Config) { c.MaxNameBytes = 0 }, "limits.max_name_bytes: must be at least 1, got 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := semaphore.DefaultConfig()
			tt.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
	c := semaphore.DefaultConfig()
	c.MaxLimit, c.MaxWait = semaphore.MaxLimitLimit, 0
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() at the bounds = %v, want nil", err)
	}
	if d := semaphore.DefaultConfig(); d.MaxLimit != 1000 {
		t.Errorf("default max_limit = %d, want 1000", d.MaxLimit)
	}
}
