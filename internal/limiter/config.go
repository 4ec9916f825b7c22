package limiter

import (
	"fmt"

	"github.com/coordd/coordd/internal/validate"
)

// Validate checks every bound, naming the configuration key of each bad one
// (MaxNameBytes is limits.max_name_bytes). server.NewServices refuses a
// Config that does not pass.
func (c Config) Validate() error {
	var v validate.Checks
	v.AtLeast1("ratelimit.max_limit", c.MaxLimit)
	v.AtLeast1("ratelimit.max_log_limit", c.MaxLogLimit)
	v.Positive("ratelimit.max_period", c.MaxPeriod)
	if c.DenyCacheSize < 0 {
		v.Bad("ratelimit.deny_cache_size", "must not be negative (0: no cache)")
	}
	if c.DenyCacheSize > 0 && c.DenyCacheMaxAge <= 0 {
		v.Bad("ratelimit.deny_cache_max_age", "must be positive with a deny cache")
	}
	v.AtLeast1("limits.max_name_bytes", int64(c.MaxNameBytes))
	return v.Err()
}

// CheckPolicies checks named policies against c's bounds: the one check of
// New, SetPolicies (a reload) and the configuration. The error names the
// first bad one's key (ratelimit.policies.<name>.limit).
func (c Config) CheckPolicies(policies map[string]Policy) error {
	for name, p := range policies {
		if err := validate.Name("policy", name, c.MaxNameBytes); err != nil {
			return fmt.Errorf("ratelimit.policies: %w", err)
		}
		if err := c.CheckLimit("ratelimit.policies."+name, p.Limit); err != nil {
			return err
		}
	}
	return nil
}
