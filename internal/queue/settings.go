package queue

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// Bounds of a claim rate.
const (
	MaxClaimRateLimit  = 1_000_000
	MinClaimRatePeriod = time.Millisecond
	MaxClaimRatePeriod = 24 * time.Hour
)

// Settings returns a queue's settings: those on its own name (a
// partitioned queue's pause is on every partition, its caps on its own
// name, which is partition 0 of 1).
func (s *Service) Settings(ctx context.Context, ns, queue string) (store.QueueSettings, error) {
	if err := s.checkQueue(queue); err != nil {
		return store.QueueSettings{}, err
	}
	return s.st.QueueSettings(ctx, store.Scope(ns, queue))
}

// Pause pauses (paused true) or resumes a queue: every partition of every
// partitioning that may hold its messages. A failure may leave some
// partitions changed; the call is safe to retry.
func (s *Service) Pause(ctx context.Context, ns, queue string, paused bool) (store.QueueSettings, error) {
	if err := s.checkQueue(queue); err != nil {
		return store.QueueSettings{}, err
	}
	parts, _, err := s.partitionsOf(ctx, store.Scope(ns, queue))
	if err != nil {
		return store.QueueSettings{}, err
	}
	var first store.QueueSettings
	for i, pt := range parts {
		c, err := s.st.PauseQueue(ctx, pt.name, paused)
		if err != nil {
			return store.QueueSettings{}, err
		}
		if i == 0 {
			first = c
		}
	}
	return first, nil
}

// Configure replaces a queue's caps (c.Paused is ignored).
func (s *Service) Configure(ctx context.Context, ns, queue string, c store.QueueSettings) (store.QueueSettings, error) {
	if err := s.checkQueue(queue); err != nil {
		return store.QueueSettings{}, err
	}
	if c.MaxInFlight < 0 || c.MaxInFlight > s.cfg.MaxInFlightLimit {
		return store.QueueSettings{}, validate.Errorf("max_in_flight", "is %d; it must be between 0 (no cap) and %d", c.MaxInFlight, s.cfg.MaxInFlightLimit)
	}
	if c.RateLimit != 0 || c.RatePeriod != 0 {
		if c.RateLimit < 1 || c.RateLimit > MaxClaimRateLimit {
			return store.QueueSettings{}, validate.Errorf("claim_rate.limit", "is %d; it must be between 1 and %d", c.RateLimit, MaxClaimRateLimit)
		}
		if c.RatePeriod < MinClaimRatePeriod || c.RatePeriod > MaxClaimRatePeriod || c.RatePeriod%time.Microsecond != 0 {
			return store.QueueSettings{}, validate.Errorf("claim_rate.period", "is %v; it must be whole microseconds between %v and %v", c.RatePeriod, MinClaimRatePeriod, MaxClaimRatePeriod)
		}
	}
	// A partitioned queue's caps are on its own name, which its claims
	// reserve from (ReserveClaims) before they claim from its partitions.
	return s.st.ConfigureQueue(ctx, store.Scope(ns, queue), c)
}
