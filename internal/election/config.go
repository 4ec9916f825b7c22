package election

import (
	"time"

	"github.com/coordd/coordd/internal/hold"
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
	// MaxSessionHolds is session.max_holds: a leadership counts among its
	// session's holds.
	MaxSessionHolds int `mapstructure:"-"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	l := hold.DefaultLease()
	return Config{MaxValueBytes: 4096, MaxWait: l.MaxWait, MaxNameBytes: l.MaxNameBytes, MaxSessionHolds: l.MaxSessionHolds}
}

// MaxValueBytesLimit is the largest election.max_value_bytes (1 MiB).
const MaxValueBytesLimit = 1 << 20

// Validate checks every rule, naming the configuration key of each bad one.
func (c Config) Validate() error {
	var v validate.Checks
	if n := c.MaxValueBytes; n < 1 || n > MaxValueBytesLimit {
		v.Bad("election.max_value_bytes", "must be between 1 and %d, got %d", MaxValueBytesLimit, n)
	}
	hold.CheckLimits(&v, c.MaxWait, c.MaxNameBytes)
	return v.Err()
}
