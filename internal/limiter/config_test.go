package limiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
)

// TestConfigValidate: the defaults pass, and every bad bound is an error
// that names its configuration key.
func TestConfigValidate(t *testing.T) {
	if err := limiter.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	tests := []struct {
		name string
		set  func(*limiter.Config)
		want string
	}{
		{"zero max_limit", func(c *limiter.Config) { c.MaxLimit = 0 }, "ratelimit.max_limit: must be at least 1, got 0"},
		{"zero max_log_limit", func(c *limiter.Config) { c.MaxLogLimit = 0 }, "ratelimit.max_log_limit: must be at least 1, got 0"},
		{"zero max_period", func(c *limiter.Config) { c.MaxPeriod = 0 }, "ratelimit.max_period: must be positive, got 0s"},
		{"negative deny cache", func(c *limiter.Config) { c.DenyCacheSize = -1 }, "ratelimit.deny_cache_size: must not be negative (0: no cache)"},
		{"deny cache without max age", func(c *limiter.Config) { c.DenyCacheMaxAge = 0 }, "ratelimit.deny_cache_max_age: must be positive with a deny cache"},
		{"zero name bytes", func(c *limiter.Config) { c.MaxNameBytes = 0 }, "limits.max_name_bytes: must be at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := limiter.DefaultConfig()
			tt.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
	c := limiter.DefaultConfig()
	c.DenyCacheSize, c.DenyCacheMaxAge = 0, 0 // no cache: no max age needed
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() without a deny cache = %v, want nil", err)
	}
}

// TestConfigCheckPolicies: policies are checked against the bounds, each
// error naming the policy's key; New and SetPolicies make the same check.
func TestConfigCheckPolicies(t *testing.T) {
	cfg := limiter.DefaultConfig()
	cfg.MaxNameBytes = 8
	ok := store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Second}
	tests := []struct {
		name     string
		policies map[string]limiter.Policy
		want     string // "": valid
	}{
		{"none", nil, ""},
		{"valid", map[string]limiter.Policy{"api": {Limit: ok}}, ""},
		{"limit 0", map[string]limiter.Policy{"p": {Limit: store.Limit{Algorithm: store.FixedWindow, Period: time.Second}}}, "ratelimit.policies.p.limit"},
		{"no algorithm", map[string]limiter.Policy{"p": {Limit: store.Limit{Limit: 5, Period: time.Second}}}, "ratelimit.policies.p.algorithm"},
		{"period over max_period", map[string]limiter.Policy{"p": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: 1000 * time.Hour}}}, "ratelimit.policies.p.period"},
		{"name too long", map[string]limiter.Policy{"longer-than-8": {Limit: ok}}, "ratelimit.policies: policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cfg.CheckPolicies(tt.policies)
			_, newErr := limiter.New(nil, cfg, tt.policies)
			if tt.want == "" {
				if err != nil || newErr != nil {
					t.Fatalf("CheckPolicies = %v, New = %v; want nil", err, newErr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckPolicies = %v, want an error naming %q", err, tt.want)
			}
			if newErr == nil || newErr.Error() != err.Error() {
				t.Fatalf("New = %v, want CheckPolicies' error %v", newErr, err)
			}
		})
	}
}

// TestAlgorithmName: every algorithm's name parses back to it (the metrics'
// algorithm label is this name).
func TestAlgorithmName(t *testing.T) {
	for _, a := range []store.Algorithm{store.FixedWindow, store.SlidingWindow, store.SlidingLog, store.TokenBucket, store.LeakyBucket} {
		name := limiter.AlgorithmName(a)
		if got, err := limiter.ParseAlgorithm(name); err != nil || got != a {
			t.Errorf("ParseAlgorithm(AlgorithmName(%v) = %q) = %v, %v", a, name, got, err)
		}
	}
	if name := limiter.AlgorithmName(0); name != "" {
		t.Errorf("AlgorithmName(0) = %q, want \"\"", name)
	}
	if name := limiter.AlgorithmName(store.TokenBucket); name != "token_bucket" {
		t.Errorf("AlgorithmName(TokenBucket) = %q, want token_bucket", name)
	}
}
