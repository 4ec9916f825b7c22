package queue

import "github.com/coordd/coordd/internal/validate"

// Validate checks every rule, naming the configuration key of each bad one
// (MaxWait and MaxNameBytes are limits.max_wait and limits.max_name_bytes).
// server.NewServices refuses a Config that does not pass.
func (c Config) Validate() error {
	var v validate.Checks
	v.Positive("queue.default_visibility_timeout", c.DefaultVisibility)
	v.Ordered("queue.default_visibility_timeout", c.DefaultVisibility, "queue.max_visibility_timeout", c.MaxVisibility)
	v.AtLeast1("queue.max_claim_messages", int64(c.MaxClaimMessages))
	v.AtLeast1("queue.default_max_attempts", int64(c.DefaultMaxAttempts))
	if c.DefaultMaxAttempts > c.MaxAttemptsLimit {
		v.Bad("queue.default_max_attempts", "(%d) must not exceed queue.max_attempts_limit (%d)", c.DefaultMaxAttempts, c.MaxAttemptsLimit)
	}
	v.AtLeast1("queue.max_payload_bytes", int64(c.MaxPayloadBytes))
	v.Positive("queue.max_delay", c.MaxDelay)
	v.Positive("queue.dedup_window", c.DedupWindow)
	v.AtLeast1("queue.max_messages", int64(c.MaxMessages))
	v.AtLeast1("queue.max_in_flight_limit", int64(c.MaxInFlightLimit))
	v.AtLeast1("queue.max_schedules_per_namespace", int64(c.MaxSchedulesPerNamespace))
	v.Positive("queue.dead_letter_ttl", c.DeadLetterTTL)
	v.Positive("queue.nack_backoff_base", c.BackoffBase)
	v.Ordered("queue.nack_backoff_base", c.BackoffBase, "queue.nack_backoff_max", c.BackoffMax)
	if c.MaxWait < 0 {
		v.Bad("limits.max_wait", "must not be negative, got %v", c.MaxWait)
	}
	v.AtLeast1("limits.max_name_bytes", int64(c.MaxNameBytes))
	checkPartitioned(&v, c.Partitioned, c.MaxNameBytes)
	return v.Err()
}
