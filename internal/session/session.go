// Package session implements SessionService's rules on top of
// store.Sessions: session IDs, TTL defaults and bounds, names scoped to the
// caller's namespace, and the protocol of a KeepAlive stream (Run:
// heartbeats, acknowledged loss reports, pushes, expiry, half-close,
// superseding), which the server's handler only converts to and from the
// wire.
package session

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
)

// Config holds the session rules.
type Config struct {
	DefaultTTL time.Duration `mapstructure:"default_ttl"` // a new session's TTL when unset
	MinTTL     time.Duration `mapstructure:"min_ttl"`
	MaxTTL     time.Duration `mapstructure:"max_ttl"`
	// MaxPerNamespace caps the live sessions of one namespace; 0: no cap.
	MaxPerNamespace int `mapstructure:"max_per_namespace"`
	// MaxHolds caps the holds of every kind (locks, permits, leaderships)
	// one session has at once, its unacknowledged loss reports included;
	// 1 to hold.MaxSessionHoldsLimit, so that every session script does
	// bounded work.
	MaxHolds int `mapstructure:"max_holds"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{DefaultTTL: 10 * time.Second, MinTTL: time.Second, MaxTTL: 5 * time.Minute, MaxPerNamespace: 10000,
		MaxHolds: hold.DefaultLease().MaxSessionHolds}
}

// Service manages sessions.
type Service struct {
	st  store.Sessions
	sub store.Subscriber
	cfg Config
}

// New returns a Service.
func New(st store.Sessions, sub store.Subscriber, cfg Config) *Service {
	return &Service{st: st, sub: sub, cfg: cfg}
}

// Subscribe wakes the returned subscription when a lock is bound to the
// session or another stream resumes it (store.SessionTopic).
func (s *Service) Subscribe(ctx context.Context, ns, id string) (*store.Subscription, error) {
	return s.sub.Subscribe(ctx, store.SessionTopic(store.Scope(ns, id)))
}

// CheckTTL validates a requested TTL; 0 (unset) is valid.
func (s *Service) CheckTTL(ttl time.Duration) error {
	if ttl == 0 {
		return nil
	}
	if ttl < s.cfg.MinTTL || ttl > s.cfg.MaxTTL {
		return validate.Errorf("ttl", "is %v; it must be between %v and %v", ttl, s.cfg.MinTTL, s.cfg.MaxTTL)
	}
	return nil
}

// Open creates a session (id "") or resumes an existing one on a new
// stream, which supersedes the stream that drove it until now. lockDelay
// (0 to store.MaxLockDelay; 0: none) is a new session's lock-delay: how
// long the holds it loses by expiring stay ungranted; a resumed session
// keeps the one it was created with (lockDelay is still checked).
func (s *Service) Open(ctx context.Context, ns, id string, ttl, lockDelay time.Duration) (store.SessionState, error) {
	if err := s.CheckTTL(ttl); err != nil {
		return store.SessionState{}, err
	}
	if err := CheckLockDelay(lockDelay); err != nil {
		return store.SessionState{}, err
	}
	if id != "" {
		if err := validate.Token("session_id", id); err != nil {
			return store.SessionState{}, err
		}
		st, err := s.st.ResumeSession(store.Urgent(ctx), store.Scope(ns, id), ttl)
		return unscope(ns, st), err
	}
	if ttl == 0 {
		ttl = s.cfg.DefaultTTL
	}
	id = token.New()
	st, err := s.st.CreateSession(ctx, store.Scope(ns, id), ttl, s.cfg.MaxPerNamespace, lockDelay)
	return unscope(ns, st), err
}

// CheckLockDelay validates a requested lock-delay: 0 (none) to
// store.MaxLockDelay.
func CheckLockDelay(d time.Duration) error {
	return validate.Wait("lock_delay", d, store.MaxLockDelay)
}

// KeepAlive renews a session and its locks; ttl 0 keeps its TTL. ref is the
// stream's view of the session (unscoped ID, epoch, acknowledged reports).
func (s *Service) KeepAlive(ctx context.Context, ns string, ref store.SessionRef, ttl time.Duration) (store.SessionState, error) {
	if err := s.CheckTTL(ttl); err != nil {
		return store.SessionState{}, err
	}
	st, err := s.st.KeepAliveSession(store.Urgent(ctx), scope(ns, ref), ttl)
	return unscope(ns, st), err
}

// Check reports a session's expiry and lost holds without renewing it.
func (s *Service) Check(ctx context.Context, ns string, ref store.SessionRef) (store.SessionState, error) {
	st, err := s.st.CheckSession(store.Urgent(ctx), scope(ns, ref))
	return unscope(ns, st), err
}

// Close ends a session and releases its holds, returning them.
func (s *Service) Close(ctx context.Context, ns string, ref store.SessionRef) ([]store.ReleasedHold, error) {
	released, err := s.st.CloseSession(ctx, scope(ns, ref))
	for i := range released {
		released[i].Name = store.Unscope(ns, released[i].Name)
	}
	return released, err
}

func scope(ns string, ref store.SessionRef) store.SessionRef {
	ref.ID = store.Scope(ns, ref.ID)
	return ref
}

func unscope(ns string, st store.SessionState) store.SessionState {
	st.ID = store.Unscope(ns, st.ID)
	for i := range st.Lost {
		st.Lost[i].Name = store.Unscope(ns, st.Lost[i].Name)
	}
	return st
}
