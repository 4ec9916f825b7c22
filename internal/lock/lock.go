// Package lock is LockService's policy over internal/hold: a lock is a hold
// of kind store.HoldLock, exclusive or shared, with its defaults and
// bounds (lock.*).
package lock

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/waiter"
)

// Config holds the lock rules. Its zero value is not valid; start from
// DefaultConfig.
type Config struct {
	DefaultTTL   time.Duration `mapstructure:"default_ttl"` // ttl when unset
	MaxTTL       time.Duration `mapstructure:"max_ttl"`     // the longest ttl
	HoldLimit    time.Duration `mapstructure:"hold_limit"`  // the longest max_hold
	MaxWait      time.Duration `mapstructure:"-"`           // limits.max_wait
	MaxNameBytes int           `mapstructure:"-"`           // limits.max_name_bytes: the longest name and owner
	// MaxSessionHolds is session.max_holds: a lock counts among its
	// session's holds.
	MaxSessionHolds int `mapstructure:"-"`
	// MaxLocksPerSession is the deprecated name of session.max_holds,
	// still read (0: unset): cmd/coordd moves it there, with a warning.
	MaxLocksPerSession int `mapstructure:"max_locks_per_session"`
	// MaxSharedHolders caps a lock's shared holders at once (default 1000,
	// between 1 and MaxSharedHoldersLimit): GetLock lists them all, and a
	// release wakes at most this many.
	MaxSharedHolders int `mapstructure:"max_shared_holders"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	l := hold.DefaultLease()
	return Config{
		DefaultTTL: l.DefaultTTL, MaxTTL: l.MaxTTL, HoldLimit: l.HoldLimit,
		MaxWait: l.MaxWait, MaxNameBytes: l.MaxNameBytes, MaxSessionHolds: l.MaxSessionHolds,
		MaxSharedHolders: 1000,
	}
}

// MaxSharedHoldersLimit is the largest lock.max_shared_holders.
const MaxSharedHoldersLimit = 10000

// lease is c's rules of a lock's lease.
func (c Config) lease() hold.Lease {
	return hold.Lease{DefaultTTL: c.DefaultTTL, MaxTTL: c.MaxTTL, HoldLimit: c.HoldLimit, MaxWait: c.MaxWait,
		MaxNameBytes: c.MaxNameBytes, MaxSessionHolds: c.MaxSessionHolds}
}

// Service hands out locks: hold.Service's Renew, Release, Get and
// CheckFence for kind store.HoldLock, and Lock.
type Service struct {
	*hold.Service
	cfg Config
}

// New returns a Service on st, waiting through waiters; clk tells the
// store's time. Background clean-ups end when drain is closed.
func New(st store.Holds, waiters *hold.Waiters, clk clock.Clock, cfg Config, drain waiter.Drain) *Service {
	return &Service{Service: hold.New(store.HoldLock, st, waiters, clk, cfg.lease(), drain), cfg: cfg}
}

// Request asks for a lock. Durations of 0 are unset.
type Request struct {
	NS, Name, Owner, SessionID string
	TTL, Wait, MaxHold         time.Duration
	// Shared asks for a shared (read) hold; false: exclusive.
	Shared bool
}

// Lock acquires a lock, waiting up to r.Wait for a held one, in arrival
// order, writers first (store.Holds).
func (s *Service) Lock(ctx context.Context, r Request) (hold.Grant, error) {
	return s.Acquire(ctx, hold.Request{
		NS: r.NS, Name: r.Name, Owner: r.Owner, SessionID: r.SessionID, TTL: r.TTL, Wait: r.Wait, MaxHold: r.MaxHold,
		Shared: r.Shared, MaxHolders: s.cfg.MaxSharedHolders,
	}, "the lock")
}
