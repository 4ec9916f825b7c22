// Package hold is the machinery every kind of hold shares. A hold is a
// named lease with a fence and a queue of waiting tickets (store.Holds):
// locks, semaphore permits and leaderships are holds, and internal/lock,
// internal/semaphore and internal/election are thin policy packages over
// this one. Here are what they share: the rules of a lease (Lease),
// acquisition that waits in arrival order, with hand-offs, without polling
// (Waiters), the clean-up of grants whose outcome was uncertain (CleanUps),
// and renewal, release, description and fence checks of one kind (Service).
package hold

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

// Lease is the rules of one kind's leases. Each kind's Config fills it
// from its configuration section.
type Lease struct {
	DefaultTTL   time.Duration // a plain hold's ttl when unset
	MaxTTL       time.Duration // the longest ttl, of Acquire and Renew
	HoldLimit    time.Duration // the longest max_hold
	MaxWait      time.Duration // limits.max_wait
	MaxNameBytes int           // limits.max_name_bytes: the longest name and owner
	// MaxSessionHolds is session.max_holds: the holds of every kind a
	// session may have at once.
	MaxSessionHolds int
}

// DefaultLease is the documented defaults every kind starts from: a 30 s
// ttl, at most an hour, a max_hold of at most 24 hours; limits.max_wait
// 1m, limits.max_name_bytes 256, session.max_holds 100.
func DefaultLease() Lease {
	return Lease{DefaultTTL: 30 * time.Second, MaxTTL: time.Hour, HoldLimit: 24 * time.Hour, MaxWait: time.Minute,
		MaxNameBytes: 256, MaxSessionHolds: 100}
}

// MaxSessionHoldsLimit is the largest session.max_holds: every session
// script walks the session's holds, so they are always bounded.
const MaxSessionHoldsLimit = 10000

// Service is the operations of one kind of hold on a store.
type Service struct {
	kind     store.HoldKind
	st       store.Holds
	waiters  *Waiters
	clk      clock.Clock
	lease    Lease
	cleanUps *CleanUps
}

// New returns the Service of kind on st, waiting through waiters; clk tells
// the store's time (to turn its retry times into local ones). Background
// clean-ups end when drain is closed.
func New(kind store.HoldKind, st store.Holds, waiters *Waiters, clk clock.Clock, lease Lease, drain waiter.Drain) *Service {
	return &Service{kind: kind, st: st, waiters: waiters, clk: clk, lease: lease, cleanUps: NewCleanUps(st, kind, drain)}
}

// Request asks for a hold. Durations of 0 are unset.
type Request struct {
	NS, Name, Owner, SessionID string
	TTL, Wait, MaxHold         time.Duration
	// Shared asks for a shared lock; MaxHolders caps a lock's shared
	// holders (lock.max_shared_holders).
	Shared     bool
	MaxHolders int
	// Limit is a semaphore's number of permits.
	Limit int
}

// Grant is the outcome of Acquire.
type Grant struct {
	store.Grant
	Token string // set when acquired
	// Contended: the name was held when the call began (it then waited, or
	// gave up).
	Contended bool
}

// Acquire grants a hold of the service's kind, waiting up to r.Wait in
// arrival order (Waiters). A store failure or a cancellation is returned
// as is, after an attempt to end whatever the failed call may have
// granted (CleanUps). what names the hold in errors ("the lock").
func (s *Service) Acquire(ctx context.Context, r Request, what string) (Grant, error) {
	if err := validate.Name("name", r.Name, s.lease.MaxNameBytes); err != nil {
		return Grant{}, err
	}
	if err := validate.Label("owner", r.Owner, s.lease.MaxNameBytes); err != nil {
		return Grant{}, err
	}
	if err := s.lease.check(r.SessionID, &r.TTL, r.MaxHold, what); err != nil {
		return Grant{}, err
	}
	if err := validate.Wait("wait", r.Wait, s.lease.MaxWait); err != nil {
		return Grant{}, err
	}
	req := store.HoldRequest{
		Kind: s.kind, Name: store.Scope(r.NS, r.Name), Token: token.New(), Owner: r.Owner,
		TTL: r.TTL, MaxHold: r.MaxHold, Shared: r.Shared, MaxHolders: r.MaxHolders, Limit: r.Limit,
	}
	if r.SessionID != "" {
		req.SessionID = store.Scope(r.NS, r.SessionID)
		req.MaxSessionHolds = s.lease.MaxSessionHolds
	}
	g, contended, err := s.acquire(ctx, req, r.Wait)
	if err != nil {
		return Grant{}, err
	}
	out := Grant{Grant: g, Contended: contended && !g.AlreadyHeld}
	switch {
	case g.AlreadyHeld:
		out.Token = g.Token // the session's own grant: its ID is the capability
	case g.Acquired:
		out.Token = req.Token
	}
	return out, nil
}

// acquire makes req, waiting up to wait, and, if it fails with an
// uncertain outcome, abandons whatever it may have granted. contended: not
// granted at the first try. A plain request (without a session) may be
// granted by a hand-off: a release or a give-up of another waiter of this
// instance grants it in the same store call, and the grant comes through
// the waiters.
func (s *Service) acquire(ctx context.Context, req store.HoldRequest, wait time.Duration) (g store.Grant, contended bool, err error) {
	handoffToken := ""
	if req.SessionID == "" {
		handoffToken = req.Token
	}
	handoff, err := s.waiters.Wait(ctx, req.Kind, req.Name, handoffToken, wait, func(ctx context.Context, t *store.WaitTicket) (Result, error) {
		req.Wait = t
		var err error
		g, err = s.st.AcquireHold(ctx, req)
		if err != nil {
			return Result{}, err
		}
		contended = contended || !g.Acquired
		return Result{Done: g.Acquired, Full: full(req, g), RetryAt: LocalTime(s.clk, g.RetryAt)}, nil
	})
	if err != nil {
		if Uncertain(err) {
			// The store may have granted the hold before failing to say so.
			s.cleanUps.Abandon(req.Name, req.Token, req.Wait, req.TTL, req.SessionID != "")
		}
		return store.Grant{}, false, err
	}
	if handoff != nil {
		return *handoff, true, nil
	}
	return g, contended, nil
}

// full reports whether grant g of req left no room for another holder of
// req's name (Result.Full): an exclusive lock, a shared lock at its
// MaxHolders, a semaphore whose permits are all held. A session's existing
// grant (AlreadyHeld) changed nothing, so it does not say.
func full(req store.HoldRequest, g store.Grant) bool {
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

// check checks a hold's session_id, ttl (set to DefaultTTL if unset
// without a session) and max_hold; what names the hold in the error.
func (l Lease) check(sessionID string, ttl *time.Duration, maxHold time.Duration, what string) error {
	if sessionID != "" {
		if err := validate.Token("session_id", sessionID); err != nil {
			return err
		}
		if *ttl != 0 {
			return validate.Errorf("ttl", "must be unset with session_id: %s lives as long as its session", what)
		}
	} else {
		if *ttl == 0 {
			*ttl = l.DefaultTTL
		}
		if err := validate.Duration("ttl", *ttl, l.MaxTTL); err != nil {
			return err
		}
	}
	if maxHold != 0 {
		return validate.Duration("max_hold", maxHold, l.HoldLimit)
	}
	return nil
}

// checkToken checks a name and a hold's token.
func (l Lease) checkToken(name, tok string) error {
	if err := validate.Name("name", name, l.MaxNameBytes); err != nil {
		return err
	}
	return validate.Token("token", tok)
}

// Renew extends a plain hold's lease to ttl from now.
func (s *Service) Renew(ctx context.Context, ns, name, tok string, ttl time.Duration) (store.Lease, error) {
	if err := s.lease.checkToken(name, tok); err != nil {
		return store.Lease{}, err
	}
	if err := validate.Duration("ttl", ttl, s.lease.MaxTTL); err != nil {
		return store.Lease{}, err
	}
	return s.st.RenewHold(ctx, s.kind, store.Scope(ns, name), tok, ttl)
}

// Release gives a hold back if tok holds it, and tells for how long it was
// held. Waiters of this instance that the release lets in are granted in
// the same store call (hand-offs) and answered here.
func (s *Service) Release(ctx context.Context, ns, name, tok string) (bool, time.Duration, error) {
	if err := s.lease.checkToken(name, tok); err != nil {
		return false, 0, err
	}
	scoped := store.Scope(ns, name)
	rel, err := s.st.ReleaseHold(ctx, s.kind, scoped, tok, s.waiters.Instance())
	if err != nil {
		return false, 0, err
	}
	s.waiters.Deliver(s.kind, scoped, rel.Handoffs)
	return rel.Released, rel.Held, nil
}

// Get describes a name's live holders and counts its waiters (never a
// token nor a session's ID).
func (s *Service) Get(ctx context.Context, ns, name string) (store.HoldInfo, error) {
	if err := validate.Name("name", name, s.lease.MaxNameBytes); err != nil {
		return store.HoldInfo{}, err
	}
	return s.st.GetHolds(ctx, s.kind, store.Scope(ns, name))
}

// CheckFence reports whether a live holder of the name has fence (Chubby's
// CheckSequencer).
func (s *Service) CheckFence(ctx context.Context, ns, name string, fence uint64) (bool, error) {
	if err := validate.Name("name", name, s.lease.MaxNameBytes); err != nil {
		return false, err
	}
	if fence == 0 {
		return false, validate.Errorf("fence", "is required: a fence is at least 1")
	}
	return s.st.CheckFence(ctx, s.kind, store.Scope(ns, name), fence)
}

// Wait returns when every background clean-up has ended (they end when the
// drain channel closes); no clean-up starts after it is called.
func (s *Service) Wait() { s.cleanUps.Wait() }

// CheckLimits checks the limits every kind's Config copies from the
// limits section (limits.max_wait, limits.max_name_bytes), naming their
// keys. (session.max_holds, copied too, is the session section's to
// check.)
func CheckLimits(v *validate.Checks, maxWait time.Duration, maxNameBytes int) {
	if maxWait < 0 {
		v.Bad("limits.max_wait", "must not be negative, got %v", maxWait)
	}
	v.AtLeast1("limits.max_name_bytes", int64(maxNameBytes))
}
