package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/session"
)

// TestConfigValidate: the defaults pass, and every bad value is an error
// that names its configuration key.
func TestConfigValidate(t *testing.T) {
	if err := session.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	tests := []struct {
		name string
		set  func(*session.Config)
		want string
	}{
		{"zero min_ttl", func(c *session.Config) { c.MinTTL = 0 }, "session.min_ttl: must be positive, got 0s"},
		{"min over default", func(c *session.Config) { c.MinTTL, c.DefaultTTL = time.Minute, 10*time.Second }, "session.min_ttl: (1m0s) must not exceed session.default_ttl (10s)"},
		{"default over max", func(c *session.Config) { c.DefaultTTL, c.MaxTTL = time.Hour, time.Minute }, "session.default_ttl: (1h0m0s) must not exceed session.max_ttl (1m0s)"},
		{"negative max_per_namespace", func(c *session.Config) { c.MaxPerNamespace = -1 }, "session.max_per_namespace: must not be negative (0: no limit), got -1"},
		{"unbounded max_holds", func(c *session.Config) { c.MaxHolds = 0 }, "session.max_holds: must be between 1 and 10000, got 0"},
		{"max_holds over its limit", func(c *session.Config) { c.MaxHolds = 10001 }, "session.max_holds: must be between 1 and 10000, got 10001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := session.DefaultConfig()
			tt.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
	c := session.DefaultConfig()
	c.MaxPerNamespace, c.MinTTL, c.MaxTTL = 0, c.DefaultTTL, c.DefaultTTL
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() at the bounds = %v, want nil", err)
	}
}
