package semaphore

import (
	"time"

	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/validate"
)

// Config holds the semaphore rules. Its zero value is not valid; start from
// DefaultConfig.
type Config struct {
	DefaultTTL time.Duration `mapstructure:"default_ttl"` // a permit's ttl when unset (default 30s)
	MaxTTL     time.Duration `mapstructure:"max_ttl"`     // the longest ttl (default 1h)
	HoldLimit  time.Duration `mapstructure:"hold_limit"`  // the longest max_hold (default 24h)
	// MaxLimit is the largest limit a semaphore may have (default 1000,
	// between 1 and MaxLimitLimit): GetSemaphore lists every holder, and a
	// release wakes at most this many.
	MaxLimit int `mapstructure:"max_limit"`

	MaxWait      time.Duration `mapstructure:"-"` // limits.max_wait
	MaxNameBytes int           `mapstructure:"-"` // limits.max_name_bytes: the longest name and owner
	// MaxSessionHolds is session.max_holds: a permit counts among its
	// session's holds.
	MaxSessionHolds int `mapstructure:"-"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	l := hold.DefaultLease()
	return Config{
		DefaultTTL: l.DefaultTTL, MaxTTL: l.MaxTTL, HoldLimit: l.HoldLimit, MaxLimit: 1000,
		MaxWait: l.MaxWait, MaxNameBytes: l.MaxNameBytes, MaxSessionHolds: l.MaxSessionHolds,
	}
}

// MaxLimitLimit is the largest semaphore.max_limit.
const MaxLimitLimit = 10000

// Validate checks every rule, naming the configuration key of each bad one.
func (c Config) Validate() error {
	var v validate.Checks
	v.Positive("semaphore.default_ttl", c.DefaultTTL)
	v.Positive("semaphore.max_ttl", c.MaxTTL)
	v.Positive("semaphore.hold_limit", c.HoldLimit)
	v.Ordered("semaphore.default_ttl", c.DefaultTTL, "semaphore.max_ttl", c.MaxTTL)
	if n := c.MaxLimit; n < 1 || n > MaxLimitLimit {
		v.Bad("semaphore.max_limit", "must be between 1 and %d, got %d", MaxLimitLimit, n)
	}
	hold.CheckLimits(&v, c.MaxWait, c.MaxNameBytes)
	return v.Err()
}

// lease is c's rules of a permit's lease.
func (c Config) lease() hold.Lease {
	return hold.Lease{DefaultTTL: c.DefaultTTL, MaxTTL: c.MaxTTL, HoldLimit: c.HoldLimit, MaxWait: c.MaxWait,
		MaxNameBytes: c.MaxNameBytes, MaxSessionHolds: c.MaxSessionHolds}
}
