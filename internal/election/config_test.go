package election_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/election"
)

// TestConfigValidate: the defaults pass, and every bad value is an error
// that names its configuration key.
func TestConfigValidate(t *testing.T) {
	if err := election.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	if d := election.DefaultConfig(); d.MaxValueBytes != 4096 {
		t.Errorf("default max_value_bytes = %d, want 4096", d.MaxValueBytes)
	}
	for _, tt := range []struct {
		name string
		set  func(*election.Config)
		want string
	}{
		{"zero max_value_bytes", func(c *election.Config) { c.MaxValueBytes = 0 }, "election.max_value_bytes: must be between 1 and 1048576, got 0"},
		{"max_value_bytes over 1 MiB", func(c *election.Config) { c.MaxValueBytes = 1<<20 + 1 }, "election.max_value_bytes: must be between 1 and 1048576, got 1048577"},
		{"negative max wait", func(c *election.Config) { c.MaxWait = -time.Second }, "limits.max_wait: must not be negative, got -1s"},
		{"zero name bytes", func(c *election.Config) { c.MaxNameBytes = 0 }, "limits.max_name_bytes: must be at least 1, got 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := election.DefaultConfig()
			tt.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
	c := election.DefaultConfig()
	c.MaxValueBytes = election.MaxValueBytesLimit
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() at the bounds = %v, want nil", err)
	}
}
