package election

import (
	"time"

	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/validate"
)

// Config holds the election rules. Its zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// MaxValueBytes bounds a leader's value (default 4096, between 1 and
	// MaxValueBytesLimit).
	MaxValueBytes int `mapstructure:"max_value_bytes"`

	MaxWait      time.Duration `mapstructure:"-"` // limits.max_wait
	MaxNameBytes int           `mapstructure:"-"` // limits.max_name_bytes
	// MaxSessionLocks is lock.max_locks_per_session: a leadership counts
	// among its session's holds.
	MaxSessionLocks int `mapstructure:"-"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	l := lock.DefaultConfig()
	return Config{MaxValueBytes: 4096, MaxWait: l.MaxWait, MaxNameBytes: l.MaxNameBytes, MaxSessionLocks: l.MaxSessionLocks}
}

// MaxValueBytesLimit is the largest election.max_value_bytes (1 MiB).
const MaxValueBytesLimit = 1 << 20

// Validate checks every rule, naming the configuration key of each bad one.
func (c Config) Validate() error {
	var v validate.Checks
	if n := c.MaxValueBytes; n < 1 || n > MaxValueBytesLimit {
		v.Bad("election.max_value_bytes", "must be between 1 and %d, got %d", MaxValueBytesLimit, n)
	}
	if n := c.MaxSessionLocks; n < 1 || n > lock.MaxSessionLocksLimit {
		v.Bad("lock.max_locks_per_session", "must be between 1 and %d, got %d", lock.MaxSessionLocksLimit, n)
	}
	if c.MaxWait < 0 {
		v.Bad("limits.max_wait", "must not be negative, got %v", c.MaxWait)
	}
	v.AtLeast1("limits.max_name_bytes", int64(c.MaxNameBytes))
	return v.Err()
}
