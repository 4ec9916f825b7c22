// Package lock implements LockService's rules on top of store.Locks (the
// holds of kind HoldLock): defaults and bounds, fresh tokens, exclusive and shared
// holds, waiting for a held lock in arrival order without polling
// (waiter.Queues), fence checks, and the clean-up after an uncertain outcome
// (CleanUps, shared with the other kinds of hold).
package lock

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

// Config holds the lock rules. Its zero value is not valid; start from
// DefaultConfig.
type Config struct {
	DefaultTTL   time.Duration `mapstructure:"default_ttl"` // ttl when unset
	MaxTTL       time.Duration `mapstructure:"max_ttl"`     // the longest ttl
	HoldLimit    time.Duration `mapstructure:"hold_limit"`  // the longest max_hold
	MaxWait      time.Duration `mapstructure:"-"`           // the longest wait
	MaxNameBytes int           `mapstructure:"-"`           // the longest name and owner
	// MaxSessionLocks caps the locks one session holds at once, counting its
	// loss reports not yet acknowledged; between 1 and MaxSessionLocksLimit,
	// so that every session script does bounded work.
	MaxSessionLocks int `mapstructure:"max_locks_per_session"`
	// MaxSharedHolders caps a lock's shared holders at once (default 1000,
	// between 1 and MaxSharedHoldersLimit): GetLock lists them all, and a
	// release wakes at most this many.
	MaxSharedHolders int `mapstructure:"max_shared_holders"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		DefaultTTL:   30 * time.Second,
		MaxTTL:       time.Hour,
		HoldLimit:    24 * time.Hour,
		MaxWait:      time.Minute,
		MaxNameBytes: 256,

		MaxSessionLocks:  100,
		MaxSharedHolders: 1000,
	}
}

// MaxSessionLocksLimit is the largest lock.max_locks_per_session.
const MaxSessionLocksLimit = 10000

// MaxSharedHoldersLimit is the largest lock.max_shared_holders.
const MaxSharedHoldersLimit = 10000

// Store is what the service needs of a store: the Locks methods, and the
// Holds methods of kind HoldLock (ReleaseHold hands off, CheckFence).
type Store interface {
	store.Locks
	store.Holds
}

// Service hands out locks.
type Service struct {
	st       Store
	queues   *waiter.Queues
	clk      clock.Clock
	cfg      Config
	cleanUps *CleanUps
}

// New returns a Service on st, waiting through queues; clk tells the
// store's time (to turn its retry times into local ones). Background
// clean-ups end when drain is closed.
func New(st Store, queues *waiter.Queues, clk clock.Clock, cfg Config, drain waiter.Drain) *Service {
	return &Service{st: st, queues: queues, clk: clk, cfg: cfg, cleanUps: NewCleanUps(st.AbandonLock, drain)}
}

// Request asks for a lock. Durations of 0 are unset.
type Request struct {
	NS, Name, Owner, SessionID string
	TTL, Wait, MaxHold         time.Duration
	// Shared asks for a shared (read) hold; false: exclusive.
	Shared bool
}

// Grant is the outcome of Lock.
type Grant struct {
	store.LockGrant
	Token string // set when acquired
	// Contended: the lock was held when the call began (it then waited, or
	// gave up).
	Contended bool
}

func (s *Service) validate(r *Request) error {
	if err := validate.Name("name", r.Name, s.cfg.MaxNameBytes); err != nil {
		return err
	}
	if err := validate.Label("owner", r.Owner, s.cfg.MaxNameBytes); err != nil {
		return err
	}
	if err := ValidateLease(r.SessionID, &r.TTL, r.MaxHold, s.cfg, "the lock"); err != nil {
		return err
	}
	return validate.Wait("wait", r.Wait, s.cfg.MaxWait)
}

// ValidateLease checks a hold's session_id, ttl (set to cfg.DefaultTTL if
// unset without a session) and max_hold under cfg's bounds; what names the
// hold in the error ("the lock", "the permit").
func ValidateLease(sessionID string, ttl *time.Duration, maxHold time.Duration, cfg Config, what string) error {
	if sessionID != "" {
		if err := validate.Token("session_id", sessionID); err != nil {
			return err
		}
		if *ttl != 0 {
			return validate.Errorf("ttl", "must be unset with session_id: %s lives as long as its session", what)
		}
	} else if *ttl == 0 {
		*ttl = cfg.DefaultTTL
	}
	if sessionID == "" {
		if err := validate.Duration("ttl", *ttl, cfg.MaxTTL); err != nil {
			return err
		}
	}
	if maxHold != 0 {
		if err := validate.Duration("max_hold", maxHold, cfg.HoldLimit); err != nil {
			return err
		}
	}
	return nil
}

// Lock acquires a lock, waiting up to r.Wait for a held one, in arrival
// order (waiter.Queues). A store failure or a cancellation is returned as
// is, after an attempt to release whatever the failed call may have
// granted.
func (s *Service) Lock(ctx context.Context, r Request) (Grant, error) {
	if err := s.validate(&r); err != nil {
		return Grant{}, err
	}
	name := store.Scope(r.NS, r.Name)
	req := store.AcquireLock{
		Kind: store.HoldLock, Name: name, Token: token.New(), Owner: r.Owner,
		TTL: r.TTL, MaxHold: r.MaxHold, Shared: r.Shared, MaxHolders: s.cfg.MaxSharedHolders,
	}
	if r.SessionID != "" {
		req.SessionID = store.Scope(r.NS, r.SessionID)
		req.MaxSessionLocks = s.cfg.MaxSessionLocks
	}
	g, contended, err := Acquire(ctx, s.st.AcquireLock, s.queues, s.clk, s.cleanUps, req, r.Wait)
	if err != nil {
		return Grant{}, err
	}
	out := Grant{LockGrant: g, Contended: contended && !g.AlreadyHeld}
	switch {
	case g.AlreadyHeld:
		out.Token = g.Token // the session's own grant: its ID is the capability
	case g.Acquired:
		out.Token = req.Token
	}
	return out, nil
}

// AcquireFunc is one store attempt at a hold: the store's AcquireLock or
// AcquireHold.
type AcquireFunc func(ctx context.Context, req store.AcquireLock) (store.LockGrant, error)

// Acquire makes req (a hold of req.Kind) through acquire, waiting up to
// wait in queues, and, if it fails with an uncertain outcome, abandons
// whatever it may have granted through cleanUps. contended: not granted at
// the first try.
//
// A plain request (without a session) may be granted by a hand-off: a
// release or a give-up of another waiter of this instance grants it in the
// same store call, and the grant comes through queues (store.Holds).
func Acquire(ctx context.Context, acquire AcquireFunc, queues *waiter.Queues, clk clock.Clock, cleanUps *CleanUps, req store.AcquireLock, wait time.Duration) (g store.LockGrant, contended bool, err error) {
	handoffToken := ""
	if req.SessionID == "" {
		handoffToken = req.Token
	}
	handoff, err := queues.Wait(ctx, req.Kind, req.Name, handoffToken, wait, func(ctx context.Context, t *store.WaitTicket) (waiter.Result, error) {
		req.Wait = t
		var err error
		g, err = acquire(ctx, req)
		if err != nil {
			return waiter.Result{}, err
		}
		contended = contended || !g.Acquired
		return waiter.Result{Done: g.Acquired, Full: Full(req, g), RetryAt: LocalTime(clk, g.RetryAt)}, nil
	})
	if err != nil {
		if Uncertain(err) {
			// The store may have granted the hold before failing to say so.
			cleanUps.Abandon(req.Name, req.Token, req.Wait, req.TTL, req.SessionID != "")
		}
		return store.LockGrant{}, false, err
	}
	if handoff != nil {
		return *handoff, true, nil
	}
	return g, contended, nil
}

// Full reports whether grant g of req left no room for another holder of
// req's name (waiter.Result.Full): an exclusive lock, a shared lock at its
// MaxHolders, a semaphore whose permits are all held. A session's existing
// grant (AlreadyHeld) changed nothing, so it does not say.
func Full(req store.AcquireLock, g store.LockGrant) bool {
	if !g.Acquired || g.AlreadyHeld {
		return false
	}
	switch req.Kind {
	case store.HoldLock:
		return !req.Shared || (req.MaxHolders > 0 && g.Holders >= req.MaxHolders)
	case store.HoldSemaphore:
		return g.Limit > 0 && g.Holders >= g.Limit
	}
	return false
}

// Wait returns when every background clean-up has ended (they end when the
// drain channel closes); no clean-up starts after it is called.
func (s *Service) Wait() { s.cleanUps.Wait() }

// ValidateRelease checks the fields of a Release of any kind of hold: its
// name and token.
func ValidateRelease(name, tok string, maxNameBytes int) error {
	if err := validate.Name("name", name, maxNameBytes); err != nil {
		return err
	}
	return validate.Token("token", tok)
}

// ValidateRenew checks the fields of a Renew of any kind of hold: its name,
// token and ttl.
func ValidateRenew(name, tok string, ttl time.Duration, maxNameBytes int, maxTTL time.Duration) error {
	if err := ValidateRelease(name, tok, maxNameBytes); err != nil {
		return err
	}
	return validate.Duration("ttl", ttl, maxTTL)
}

// Renew extends a held lock's lease to ttl from now.
func (s *Service) Renew(ctx context.Context, ns, name, tok string, ttl time.Duration) (store.Lease, error) {
	if err := ValidateRenew(name, tok, ttl, s.cfg.MaxNameBytes, s.cfg.MaxTTL); err != nil {
		return store.Lease{}, err
	}
	return s.st.RenewLock(ctx, store.Scope(ns, name), tok, ttl)
}

// Release gives a lock back if tok holds it, and tells for how long it was
// held. Waiters of this instance that the release lets in are granted in
// the same store call (hand-offs).
func (s *Service) Release(ctx context.Context, ns, name, tok string) (bool, time.Duration, error) {
	if err := ValidateRelease(name, tok, s.cfg.MaxNameBytes); err != nil {
		return false, 0, err
	}
	return Release(ctx, s.st, s.queues, store.HoldLock, store.Scope(ns, name), tok)
}

// Release releases (kind, name)'s hold of tok and delivers the hand-offs
// the release made to this instance's waiters (queues).
func Release(ctx context.Context, st store.Holds, queues *waiter.Queues, kind store.HoldKind, name, tok string) (bool, time.Duration, error) {
	rel, err := st.ReleaseHold(ctx, kind, name, tok, queues.Instance())
	if err != nil {
		return false, 0, err
	}
	queues.Deliver(kind, name, rel.Handoffs)
	return rel.Released, rel.Held, nil
}

// Get describes a lock's holders and counts its waiters (never a token nor
// a session's ID).
func (s *Service) Get(ctx context.Context, ns, name string) (store.LockInfo, error) {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return store.LockInfo{}, err
	}
	return s.st.GetLock(ctx, store.Scope(ns, name))
}

// CheckFence reports whether a live holder of the lock has fence (Chubby's
// CheckSequencer).
func (s *Service) CheckFence(ctx context.Context, ns, name string, fence uint64) (bool, error) {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return false, err
	}
	if fence == 0 {
		return false, validate.Errorf("fence", "is required: a fence is at least 1")
	}
	return s.st.CheckFence(ctx, store.HoldLock, store.Scope(ns, name), fence)
}
