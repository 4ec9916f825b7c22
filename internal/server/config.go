package server

import "github.com/coordd/coordd/internal/validate"

// Validate checks every domain package's rules and the policies against the
// limiter's bounds, naming the configuration key of each bad value.
func (c Config) Validate() error {
	var v validate.Checks
	v.Add(c.Lock.Validate())
	v.Add(c.Semaphore.Validate())
	v.Add(c.Election.Validate())
	v.Add(c.Session.Validate())
	v.Add(c.Limiter.Validate())
	v.Add(c.Idem.Validate())
	v.Add(c.Queue.Validate())
	v.Add(c.Limiter.CheckPolicies(c.Policies))
	return v.Err()
}

// Validate checks the limits against abuse, naming the configuration key of
// each bad one.
func (l Limits) Validate() error {
	var v validate.Checks
	v.Unlimited0("limits.max_waiters_per_namespace", l.MaxWaitersPerNamespace)
	v.Unlimited0("limits.max_waiters_per_connection", l.MaxWaitersPerConnection)
	v.Unlimited0("limits.max_streams_per_namespace", l.MaxStreamsPerNamespace)
	v.Unlimited0("limits.max_streams_per_connection", l.MaxStreamsPerConnection)
	if l.MaxStreamMessageRate < 0 {
		v.Bad("limits.max_stream_messages_per_second", "must not be negative (0: no limit)")
	}
	if l.MaxSessions < -1 {
		v.Bad("limits.max_sessions", "must be -1 (no limit), 0 (derived from the memory coordd may use) or positive, got %d", l.MaxSessions)
	}
	if l.ShedStoreLatency < 0 {
		v.Bad("limits.shed_store_latency", "must not be negative (0: never shed), got %v", l.ShedStoreLatency)
	}
	return v.Err()
}
