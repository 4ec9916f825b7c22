package idem

import "github.com/coordd/coordd/internal/validate"

// Validate checks every rule, naming the configuration key of each bad one
// (MaxWait and MaxNameBytes are limits.max_wait and limits.max_name_bytes).
// server.NewServices refuses a Config that does not pass.
func (c Config) Validate() error {
	var v validate.Checks
	v.Positive("idempotency.default_processing_ttl", c.DefaultProcessingTTL)
	v.Ordered("idempotency.default_processing_ttl", c.DefaultProcessingTTL, "idempotency.max_processing_ttl", c.MaxProcessingTTL)
	v.Positive("idempotency.default_result_ttl", c.DefaultResultTTL)
	v.Ordered("idempotency.default_result_ttl", c.DefaultResultTTL, "idempotency.max_result_ttl", c.MaxResultTTL)
	v.AtLeast1("idempotency.max_result_bytes", int64(c.MaxResultBytes))
	v.AtLeast1("idempotency.max_fingerprint_bytes", int64(c.MaxFingerprintBytes))
	v.AtLeast1("idempotency.max_failure_bytes", int64(c.MaxFailureBytes))
	if c.MaxWait < 0 {
		v.Bad("limits.max_wait", "must not be negative, got %v", c.MaxWait)
	}
	v.AtLeast1("limits.max_name_bytes", int64(c.MaxNameBytes))
	return v.Err()
}
