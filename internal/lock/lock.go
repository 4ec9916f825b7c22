// Package lock implements LockService's rules on top of store.Locks:
// defaults and bounds, fresh tokens, waiting for a held lock without polling,
// and the clean-up after an uncertain outcome.
package lock

import (
	"context"
	"errors"
	"sync"
	"time"

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
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		DefaultTTL:   30 * time.Second,
		MaxTTL:       time.Hour,
		HoldLimit:    24 * time.Hour,
		MaxWait:      time.Minute,
		MaxNameBytes: 256,

		MaxSessionLocks: 100,
	}
}

// MaxSessionLocksLimit is the largest lock.max_locks_per_session.
const MaxSessionLocksLimit = 10000

// Service hands out locks.
type Service struct {
	st       store.Locks
	sub      store.Subscriber
	cfg      Config
	drain    waiter.Drain
	cleanups sync.WaitGroup
	mu       sync.Mutex // guards closed and inFlight
	closed   bool       // Wait was called: no clean-up starts
	inFlight int
}

// New returns a Service. Waits end early when drain is closed.
func New(st store.Locks, sub store.Subscriber, cfg Config, drain waiter.Drain) *Service {
	return &Service{st: st, sub: sub, cfg: cfg, drain: drain}
}

// Request asks for a lock. Durations of 0 are unset.
type Request struct {
	NS, Name, Owner, SessionID string
	TTL, Wait, MaxHold         time.Duration
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
	if r.SessionID != "" {
		if err := validate.Token("session_id", r.SessionID); err != nil {
			return err
		}
		if r.TTL != 0 {
			return validate.Errorf("ttl", "must be unset with session_id: the lock lives as long as its session")
		}
	} else if r.TTL == 0 {
		r.TTL = s.cfg.DefaultTTL
	}
	if r.SessionID == "" {
		if err := validate.Duration("ttl", r.TTL, s.cfg.MaxTTL); err != nil {
			return err
		}
	}
	if r.MaxHold != 0 {
		if err := validate.Duration("max_hold", r.MaxHold, s.cfg.HoldLimit); err != nil {
			return err
		}
	}
	return validate.Wait("wait", r.Wait, s.cfg.MaxWait)
}

// Lock acquires a lock, waiting up to r.Wait for a held one. A store failure
// or a cancellation is returned as is, after an attempt to release whatever
// the failed call may have granted.
func (s *Service) Lock(ctx context.Context, r Request) (Grant, error) {
	if err := s.validate(&r); err != nil {
		return Grant{}, err
	}
	name := store.Scope(r.NS, r.Name)
	req := store.AcquireLock{
		Name: name, Token: token.New(), Owner: r.Owner,
		TTL: r.TTL, MaxHold: r.MaxHold,
	}
	if r.SessionID != "" {
		req.SessionID = store.Scope(r.NS, r.SessionID)
		req.MaxSessionLocks = s.cfg.MaxSessionLocks
	}
	var g store.LockGrant
	contended := false
	err := waiter.Wait(ctx, s.sub, store.LockTopic(name), r.Wait, s.drain, func(ctx context.Context) (bool, time.Duration, error) {
		var err error
		g, err = s.st.AcquireLock(ctx, req)
		if err != nil {
			return false, 0, err
		}
		contended = contended || !g.Acquired
		return g.Acquired, g.TTL, nil
	})
	if err != nil {
		if !errors.Is(err, store.ErrSessionNotFound) && !errors.Is(err, store.ErrTooManyLocks) {
			// The store may have granted the lock before failing to say so.
			life := r.TTL
			if r.SessionID != "" {
				life = cleanUpFor // a binding may live as long as its session
			}
			s.cleanUp(name, req.Token, life)
		}
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

// cleanUpFor bounds the background clean-up of an uncertain session-bound
// grant (a lease's is bounded by its TTL).
const cleanUpFor = time.Hour

// maxCleanUps bounds the background clean-ups in flight; past it, an
// uncertain grant is left to end by itself (at its TTL; a session-bound
// one, unconfirmed, at the deadline it was granted with).
const maxCleanUps = 10000

// cleanUp abandons a grant that a failed AcquireLock may have made: its
// token is known only to this call, so nobody else can. AbandonLock
// releases a lease, and turns a session-bound grant into a loss report, so
// that a stream that adopted it (AlreadyHeld) learns that it is gone. One
// try now; if the store cannot be reached, tries go on in the background,
// with backoff, until the store answers, the grant's life has passed, or
// the daemon drains.
func (s *Service) cleanUp(name, tok string, life time.Duration) {
	if s.abandonOnce(name, tok) {
		return
	}
	s.mu.Lock()
	if s.closed || s.inFlight >= maxCleanUps {
		s.mu.Unlock()
		return
	}
	s.inFlight++
	s.cleanups.Add(1)
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
			s.cleanups.Done()
		}()
		end := time.Now().Add(life)
		backoff := 50 * time.Millisecond
		for time.Now().Before(end) {
			t := time.NewTimer(backoff)
			select {
			case <-s.drain:
				t.Stop()
				return
			case <-t.C:
			}
			if s.abandonOnce(name, tok) {
				return
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}()
}

// abandonOnce tries AbandonLock once and reports whether the store answered.
func (s *Service) abandonOnce(name, tok string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.st.AbandonLock(ctx, name, tok) == nil
}

// Wait returns when every background clean-up has ended (they end when the
// drain channel closes); no clean-up starts after it is called.
func (s *Service) Wait() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cleanups.Wait()
}

// Renew extends a held lock's lease to ttl from now.
func (s *Service) Renew(ctx context.Context, ns, name, tok string, ttl time.Duration) (store.Lease, error) {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return store.Lease{}, err
	}
	if err := validate.Token("token", tok); err != nil {
		return store.Lease{}, err
	}
	if err := validate.Duration("ttl", ttl, s.cfg.MaxTTL); err != nil {
		return store.Lease{}, err
	}
	return s.st.RenewLock(ctx, store.Scope(ns, name), tok, ttl)
}

// Release gives a lock back if tok holds it, and tells for how long it was
// held.
func (s *Service) Release(ctx context.Context, ns, name, tok string) (bool, time.Duration, error) {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return false, 0, err
	}
	if err := validate.Token("token", tok); err != nil {
		return false, 0, err
	}
	return s.st.ReleaseLock(ctx, store.Scope(ns, name), tok)
}

// Get describes a lock's holder (never its token nor its session's ID).
func (s *Service) Get(ctx context.Context, ns, name string) (store.LockInfo, error) {
	if err := validate.Name("name", name, s.cfg.MaxNameBytes); err != nil {
		return store.LockInfo{}, err
	}
	return s.st.GetLock(ctx, store.Scope(ns, name))
}
