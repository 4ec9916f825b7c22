// Package semaphore implements SemaphoreService's rules on top of
// store.Holds (kind HoldSemaphore): a counting semaphore whose permits are
// leases with fences, bound to a session or not, granted in arrival order
// (waiter.Queues), with the same clean-up after an uncertain outcome as
// locks (lock.CleanUps).
package semaphore

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

// Service hands out semaphore permits.
type Service struct {
	st       store.Holds
	queues   *waiter.Queues
	clk      clock.Clock
	cfg      Config
	cleanUps *lock.CleanUps
}

// New returns a Service on st, waiting through queues; clk tells the
// store's time. Background clean-ups end when drain is closed.
func New(st store.Holds, queues *waiter.Queues, clk clock.Clock, cfg Config, drain waiter.Drain) *Service {
	return &Service{st: st, queues: queues, clk: clk, cfg: cfg, cleanUps: lock.NewCleanUps(lock.AbandonHold(st, store.HoldSemaphore), drain)}
}

// Request asks for a permit. Durations of 0 are unset.
type Request struct {
	NS, Name, Owner, SessionID string
	// Limit is the semaphore's number of permits, 1 to Config.MaxLimit; it
	// must match the limit of the semaphore's holders and waiters.
	Limit              int
	TTL, Wait, MaxHold time.Duration
}

// Grant is the outcome of Acquire: the store's answer (Holders, Limit, the
// blocking Holder when not acquired) and the permit's token.
type Grant struct {
	store.LockGrant
	Token string // set when acquired
	// Contended: no permit was free when the call began.
	Contended bool
}

func (s *Service) validate(r *Request) error {
	if err := validate.Name("name", r.Name, s.cfg.MaxNameBytes); err != nil {
		return err
	}
	if r.Limit <= 0 || r.Limit > s.cfg.MaxLimit {
		return validate.Errorf("limit", "is %d; it must be between 1 and %d", r.Limit, s.cfg.MaxLimit)
	}
	if err := validate.Label("owner", r.Owner, s.cfg.MaxNameBytes); err != nil {
		return err
	}
	if err := lock.ValidateLease(r.SessionID, &r.TTL, r.MaxHold, s.cfg.lease(), "the permit"); err != nil {
		return err
	}
	return validate.Wait("wait", r.Wait, s.cfg.MaxWait)
}

// Acquire takes a permit, waiting up to r.Wait for a free one, in arrival
// order. A limit other than the semaphore's is store.ErrLimitMismatch. A
// store failure or a cancellation is returned as is, after an attempt to
// release whatever the failed call may have granted.
func (s *Service) Acquire(ctx context.Context, r Request) (Grant, error) {
	if err := s.validate(&r); err != nil {
		return Grant{}, err
	}
	req := store.AcquireLock{
		Kind: store.HoldSemaphore, Name: store.Scope(r.NS, r.Name), Token: token.New(), Owner: r.Owner,
		TTL: r.TTL, MaxHold: r.MaxHold, Limit: r.Limit,
	}
	if r.SessionID != "" {
		req.SessionID = store.Scope(r.NS, r.SessionID)
		req.MaxSessionLocks = s.cfg.MaxSessionLocks
	}
	g, contended, err := lock.Acquire(ctx, s.st.AcquireHold, s.queues, s.clk, s.cleanUps, req, r.Wait)
	if err != nil {
		return Grant{}, err
	}
	out := Grant{LockGrant: g, Contended: contended && !g.AlreadyHeld}
	switch {
	case g.AlreadyHeld:
		out.Token = g.Token
	case g.Acquired:
		out.Token = req.Token
	}
	return out, nil
}

// Wait returns when every background clean-up has ended (they end when the
// drain channel closes); no clean-up starts after it is called.
func (s *Service) Wait() { s.cleanUps.Wait() }

// Renew extends a permit's lease to ttl from now.
func (s *Service) Renew(ctx context.Context, ns, name, tok string, ttl time.Duration) (store.Lease, error) {
	if err := lock.ValidateRenew(name, tok, ttl, s.cfg.MaxNameBytes, s.cfg.MaxTTL); err != nil {
		return store.Lease{}, err
	}
	return s.st.RenewHold(ctx, store.HoldSemaphore, store.Scope(ns, name), tok, ttl)
}

// Release gives a permit back if tok holds it, and tells for how long it
// was held; waiters of this instance that it lets in are granted in the
// same store call (hand-offs).
func (s *Service) Release(ctx context.Context, ns, name, tok string) (bool, time.Duration, error) {
	if err := lock.ValidateRelease(name, tok, s.cfg.MaxNameBytes); err != nil {
		return false, 0, err
	}
	return lock.Release(ctx, s.st, s.queues, store.HoldSemaphore, store.Scope(ns, name), tok)
}

// Get describes a semaphore: its limit, holders and waiters (never a token
// nor a session's ID).
func (s *Service) Get(ctx context.Context, ns, name string) (store.LockInfo, error) {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return store.LockInfo{}, err
	}
	return s.st.GetHolds(ctx, store.HoldSemaphore, store.Scope(ns, name))
}
