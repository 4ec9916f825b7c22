package session

import (
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/validate"
)

// Validate checks every rule, naming the configuration key of each bad one.
// server.NewServices refuses a Config that does not pass.
func (c Config) Validate() error {
	var v validate.Checks
	v.Positive("session.min_ttl", c.MinTTL)
	v.Ordered("session.min_ttl", c.MinTTL, "session.default_ttl", c.DefaultTTL)
	v.Ordered("session.default_ttl", c.DefaultTTL, "session.max_ttl", c.MaxTTL)
	v.Unlimited0("session.max_per_namespace", c.MaxPerNamespace)
	if n := c.MaxHolds; n < 1 || n > hold.MaxSessionHoldsLimit {
		v.Bad("session.max_holds", "must be between 1 and %d, got %d", hold.MaxSessionHoldsLimit, n)
	}
	return v.Err()
}
