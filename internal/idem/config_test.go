package idem_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/idem"
)

// TestConfigValidate: the defaults pass, and every bad value is an error
// that names its configuration key.
func TestConfigValidate(t *testing.T) {
	if err := idem.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	tests := []struct {
		name string
		set  func(*idem.Config)
		want string
	}{
		{"zero processing ttl", func(c *idem.Config) { c.DefaultProcessingTTL = 0 }, "idempotency.default_processing_ttl: must be positive, got 0s"},
		{"processing default over max", func(c *idem.Config) { c.DefaultProcessingTTL, c.MaxProcessingTTL = 2*time.Hour, time.Hour },
			"idempotency.default_processing_ttl: (2h0m0s) must not exceed idempotency.max_processing_ttl (1h0m0s)"},
		{"zero result ttl", func(c *idem.Config) { c.DefaultResultTTL = 0 }, "idempotency.default_result_ttl: must be positive, got 0s"},
		{"result default over max", func(c *idem.Config) { c.DefaultResultTTL, c.MaxResultTTL = 2*time.Hour, time.Hour },
			"idempotency.default_result_ttl: (2h0m0s) must not exceed idempotency.max_result_ttl (1h0m0s)"},
		{"zero result bytes", func(c *idem.Config) { c.MaxResultBytes = 0 }, "idempotency.max_result_bytes: must be at least 1, got 0"},
		{"zero fingerprint bytes", func(c *idem.Config) { c.MaxFingerprintBytes = 0 }, "idempotency.max_fingerprint_bytes: must be at least 1, got 0"},
		{"zero failure bytes", func(c *idem.Config) { c.MaxFailureBytes = 0 }, "idempotency.max_failure_bytes: must be at least 1, got 0"},
		{"negative max wait", func(c *idem.Config) { c.MaxWait = -time.Second }, "limits.max_wait: must not be negative, got -1s"},
		{"zero name bytes", func(c *idem.Config) { c.MaxNameBytes = 0 }, "limits.max_name_bytes: must be at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := idem.DefaultConfig()
			tt.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
