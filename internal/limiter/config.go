package limiter

import (
	"fmt"

	"github.com/coordd/coordd/internal/store"
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
	v.AtLeast1("ratelimit.max_policies_per_namespace", int64(c.MaxPoliciesPerNamespace))
	v.AtLeast1("ratelimit.expected_instances", int64(c.ExpectedInstances))
	return v.Err()
}

// CheckPolicies checks named policies against c's bounds: the one check of
// New, SetPolicies (a reload) and the configuration. The error names the
// first bad one's key (ratelimit.policies.<name>.limit, or
// ratelimit.policies.<name>.limits[i].limit).
func (c Config) CheckPolicies(policies map[string]Policy) error {
	for name, p := range policies {
		if err := validate.Name("policy", name, c.MaxNameBytes); err != nil {
			return fmt.Errorf("ratelimit.policies: %w", err)
		}
		if err := c.checkPolicy("ratelimit.policies."+name, "", p); err != nil {
			return err
		}
	}
	return nil
}

// CheckPolicy checks a runtime policy (RateLimitService.PutPolicy) as
// CheckPolicies checks a config policy, naming the API's fields in the
// error (policy.name, policy.limit.period, policy.limits[1].limit.limit).
func (c Config) CheckPolicy(name string, p Policy) error {
	if err := validate.Name("policy.name", name, c.MaxNameBytes); err != nil {
		return err
	}
	return c.checkPolicy("policy", ".limit", p)
}

// checkPolicy checks one policy: its limit, or its several limits (at most
// store.MaxLimits, each named, names and parameters distinct). Fields are
// named under field; a limit's own fields under its field and then
// limitField ("" in the config, where a limit's fields are the policy's;
// ".limit" in the API, where they are in a Limit message).
func (c Config) checkPolicy(field, limitField string, p Policy) error {
	if p.OnStoreFailure < 0 || p.OnStoreFailure > FailLocal {
		return validate.Errorf(field+".on_store_failure", "is %d, not one of the OnStoreFailure values", p.OnStoreFailure)
	}
	if len(p.Limits) == 0 {
		if err := c.CheckLimit(field+limitField, p.Limit); err != nil {
			return err
		}
		switch q := p.LocalQuota; {
		case q < 0:
			return validate.Errorf(field+".local_quota", "is %d; it must not be negative (0: none)", q)
		case q > 0 && p.Limit.Algorithm != store.FixedWindow && p.Limit.Algorithm != store.TokenBucket:
			return validate.Errorf(field+".local_quota", "applies to the fixed_window and token_bucket algorithms")
		case q > p.Limit.Capacity():
			return validate.Errorf(field+".local_quota", "is %d, above the limit's capacity %d", q, p.Limit.Capacity())
		}
		return nil
	}
	if p.LocalQuota != 0 {
		return validate.Errorf(field+".local_quota", "applies to a policy of one limit, not of several")
	}
	if p.Limit != (store.Limit{}) {
		return validate.Errorf(field+".limits", "and the policy's own algorithm, limit, period and burst are both set; set one")
	}
	if len(p.Limits) > store.MaxLimits {
		return validate.Errorf(field+".limits", "has %d limits; a policy has at most %d", len(p.Limits), store.MaxLimits)
	}
	for i, l := range p.Limits {
		f := fmt.Sprintf("%s.limits[%d]", field, i)
		if err := validate.Name(f+".name", l.Name, c.MaxNameBytes); err != nil {
			return err
		}
		if err := c.CheckLimit(f+limitField, l.Limit); err != nil {
			return err
		}
		for _, o := range p.Limits[:i] {
			switch {
			case o.Name == l.Name:
				return validate.Errorf(f+".name", "%q is already the name of another limit of the policy", l.Name)
			case o.Limit == l.Limit:
				return validate.Errorf(f, "is the same limit as %q", o.Name)
			}
		}
	}
	return nil
}
