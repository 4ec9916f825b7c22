// Package semaphore is SemaphoreService's policy over internal/hold: a
// counting semaphore's permits are holds of kind store.HoldSemaphore, at
// most its limit at once, with their defaults and bounds (semaphore.*).
package semaphore

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

// Service hands out semaphore permits: hold.Service's Renew, Release and
// Get for kind store.HoldSemaphore, and Acquire.
type Service struct {
	hold *hold.Service
	cfg  Config
}

// New returns a Service on st, waiting through waiters; clk tells the
// store's time. Background clean-ups end when drain is closed.
func New(st store.Holds, waiters *hold.Waiters, clk clock.Clock, cfg Config, drain waiter.Drain) *Service {
	return &Service{hold: hold.New(store.HoldSemaphore, st, waiters, clk, cfg.lease(), drain), cfg: cfg}
}

// Request asks for a permit. Durations of 0 are unset.
type Request struct {
	NS, Name, Owner, SessionID string
	// Limit is the semaphore's number of permits, 1 to Config.MaxLimit; it
	// must match the limit of the semaphore's holders and waiters
	// (store.ErrLimitMismatch otherwise).
	Limit              int
	TTL, Wait, MaxHold time.Duration
}

// Acquire takes a permit, waiting up to r.Wait for a free one, in arrival
// order.
func (s *Service) Acquire(ctx context.Context, r Request) (hold.Grant, error) {
	if r.Limit <= 0 || r.Limit > s.cfg.MaxLimit {
		return hold.Grant{}, validate.Errorf("limit", "is %d; it must be between 1 and %d", r.Limit, s.cfg.MaxLimit)
	}
	return s.hold.Acquire(ctx, hold.Request{
		NS: r.NS, Name: r.Name, Owner: r.Owner, SessionID: r.SessionID, TTL: r.TTL, Wait: r.Wait, MaxHold: r.MaxHold,
		Limit: r.Limit,
	}, "the permit")
}

// Renew extends a permit's lease to ttl from now.
func (s *Service) Renew(ctx context.Context, ns, name, tok string, ttl time.Duration) (store.Lease, error) {
	return s.hold.Renew(ctx, ns, name, tok, ttl)
}

// Release gives a permit back if tok holds it, and tells for how long it
// was held.
func (s *Service) Release(ctx context.Context, ns, name, tok string) (bool, time.Duration, error) {
	return s.hold.Release(ctx, ns, name, tok)
}

// Get describes a semaphore: its limit, holders and waiters.
func (s *Service) Get(ctx context.Context, ns, name string) (store.HoldInfo, error) {
	return s.hold.Get(ctx, ns, name)
}

// Wait returns when every background clean-up has ended.
func (s *Service) Wait() { s.hold.Wait() }
