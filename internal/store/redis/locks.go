package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// Locks are the first kind of session hold: lock_session.lua renews,
// checks or drops a session's lock by its token.
func init() {
	holdKinds[store.HoldLock] = holdKind{
		refresh: func(k keys, name, token string, deadline int64, renew bool) call {
			mode := "check"
			if renew {
				mode = "renew"
			}
			return call{lockSession, k.lock(name)[:1], []any{token, deadline, mode, ""}}
		},
		drop: func(k keys, name, token string) call {
			return call{lockSession, k.lock(name)[:1], []any{token, 0, "drop", k.channel(store.LockTopic(name))}}
		},
		decode: decodeLockSession,
	}
}

// decodeLockSession reads lock_session.lua's reply to "renew" or "check"
// (drop false), or to "drop".
func decodeLockSession(cmd *redis.Cmd, drop bool) (live bool, held time.Duration, err error) {
	r, err := replyOf(lockSession, cmd)
	if err != nil {
		return false, 0, err
	}
	live = r.code(codeOK, codeNo) == codeOK
	if live && drop {
		held = micros(r.int(1))
	}
	return live, held, r.done()
}

// AcquireLock implements store.Locks. A session-bound grant takes up to five
// steps over two slots: read the session's deadline; grant the lock until
// then; add it to the session's set as a pending binding, which fails if
// the session ended meanwhile (the lock is then released and the call is
// ErrSessionNotFound); confirm the binding; and, if a keepalive moved the
// session's deadline in between, renew the lock to it.
//
// Keepalives renew only confirmed bindings. If the add's or the confirm's
// reply is lost, the caller is told the outcome is uncertain and has no
// token, and a pending binding is never renewed: the lock ends at the
// deadline it was granted with (the lock service also releases it by its
// token), and the session reports it lost then.
func (s *Store) AcquireLock(ctx context.Context, req store.AcquireLock) (store.LockGrant, error) {
	var g store.LockGrant
	err := s.do(ctx, "AcquireLock", s.keys.lock(req.Name)[0], func(ctx context.Context) error {
		var sessDeadline int64
		full := false // the session is at its cap: only a held lock is answered
		if req.SessionID != "" {
			dl, taken, err := s.sessionCap(ctx, req.SessionID)
			if err != nil {
				return err
			}
			full = req.MaxSessionLocks > 0 && taken >= int64(req.MaxSessionLocks)
			sessDeadline = dl
		}
		lk := s.keys.lock(req.Name)
		cmd, replicated := s.evalReplicated(ctx, lockAcquire, lk, req.Token, req.Owner,
			req.TTL.Microseconds(), req.MaxHold.Microseconds(), req.SessionID, sessDeadline, s.timeSeen.Load(), boolArg(full))
		a, err := decodeAcquire(cmd)
		if err != nil {
			return err
		}
		switch a.code {
		case codeOK, codeNo:
			s.sawTime(a.now)
		}
		switch a.code {
		case codeSessionGone:
			return store.ErrSessionNotFound
		case codeAlreadyHeld:
			g = store.LockGrant{Acquired: true, AlreadyHeld: true, Token: a.token, Fence: a.fence,
				TTL: micros(a.deadline - a.now), ExpireTime: unixMicro(a.deadline)}
			return nil
		case codeFull:
			return store.ErrTooManyLocks
		case codeNo:
			g = store.LockGrant{Holder: a.holder, TTL: micros(a.deadline - a.now), ExpireTime: unixMicro(a.deadline)}
			return nil
		}
		if !replicated {
			return errNotReplicated // the caller releases it by its token
		}
		dl, now := a.deadline, a.now
		g = store.LockGrant{Acquired: true, Fence: a.fence, TTL: micros(dl - now), ExpireTime: unixMicro(dl)}
		if req.SessionID == "" {
			return nil
		}
		var hold int64
		if req.MaxHold > 0 {
			hold = now + req.MaxHold.Microseconds()
		}
		h := sessionHold{kind: store.HoldLock, name: req.Name,
			sessionEntry: sessionEntry{token: req.Token, fence: a.fence, holdUntil: hold, pending: true}}
		_, replicated, err = s.bindHold(ctx, req.SessionID, h, req.MaxSessionLocks)
		if errors.Is(err, store.ErrSessionNotFound) || errors.Is(err, store.ErrTooManyLocks) {
			// The session ended, or filled up, since it was read: undo the grant.
			if _, err := s.releaseLock(ctx, req.Name, req.Token, true); err != nil {
				return err
			}
			return err
		}
		if err != nil {
			return err
		}
		if !replicated {
			return errNotReplicated // a failover could lose the entry, and the lock with it
		}
		h.pending = false
		newDeadline, replicated, err := s.confirmHold(ctx, req.SessionID, h)
		if errors.Is(err, store.ErrSessionNotFound) {
			// The session ended, or lost the lock, since the add.
			if _, err := s.releaseLock(ctx, req.Name, req.Token, true); err != nil {
				return err
			}
			return err
		}
		if err != nil {
			return err
		}
		if !replicated {
			return errNotReplicated
		}
		if newDeadline > dl && (hold == 0 || hold > dl) {
			// A keepalive renewed the session between the read and the add,
			// without this lock: extend it to the session's deadline (an
			// extension only, so a later keepalive is never undone).
			held, _, err := decodeLockSession(s.eval(ctx, lockSession, lk[:1], req.Token, newDeadline, "renew", ""), false)
			if err != nil {
				return err
			}
			if !held {
				// Its lease ran out before it could be extended: it is gone.
				_ = s.unbindHold(ctx, req.SessionID, store.HoldLock, req.Name, req.Token)
				return errLostInFlight
			}
			dl = newDeadline
			if hold > 0 && hold < dl {
				dl = hold
			}
			g.TTL, g.ExpireTime = micros(dl-now), unixMicro(dl)
		}
		return nil
	})
	if err != nil {
		return store.LockGrant{}, err
	}
	return g, nil
}

// acquired is lock_acquire.lua's reply.
type acquired struct {
	code          int64 // codeOK, codeNo, codeSessionGone, codeAlreadyHeld, codeFull
	token, holder string
	fence         uint64
	deadline, now int64
}

func decodeAcquire(cmd *redis.Cmd) (acquired, error) {
	r, err := replyOf(lockAcquire, cmd)
	if err != nil {
		return acquired{}, err
	}
	a := acquired{code: r.code(codeOK, codeNo, codeSessionGone, codeAlreadyHeld, codeFull)}
	switch a.code {
	case codeOK:
		a.fence, a.deadline, a.now = r.uint(1), r.int(2), r.int(3)
	case codeNo:
		a.holder, a.deadline, a.now = r.str(1), r.int(2), r.int(3)
	case codeAlreadyHeld:
		a.token, a.fence, a.deadline, a.now = r.str(1), r.uint(2), r.int(3), r.int(4)
	}
	return a, r.done()
}

// sawTime raises timeSeen to now. Fences are max(counter + 1, server time)
// (lua/lock_acquire.lua): after a failover that lost the last increments,
// only the clock keeps them above the fences the old master issued, and a
// promoted node whose clock is behind the old master's by more than the
// failover took would issue smaller ones. The lock script floors its fence
// at timeSeen + 1 when its clock is behind timeSeen, so that this coordd's
// fences never go backwards (as far as the grants it saw go: fences another
// instance got from the old master after this one last heard from it are
// not covered).
func (s *Store) sawTime(now int64) {
	for {
		seen := s.timeSeen.Load()
		if now <= seen || s.timeSeen.CompareAndSwap(seen, now) {
			return
		}
	}
}

// errLostInFlight: a session-bound lock was granted, but its lease ran out
// before it was bound to the session's: the caller must not believe it
// holds it. Rare (the session was about to expire, and a keepalive raced the
// acquire); reported as an uncertain outcome, to be retried.
var errLostInFlight = fmt.Errorf("%w: the lock's lease ran out while it was being bound to its session", store.ErrUnavailable)

// RenewLock implements store.Locks.
func (s *Store) RenewLock(ctx context.Context, name, token string, ttl time.Duration) (store.Lease, error) {
	var l store.Lease
	err := s.do(ctx, "RenewLock", s.keys.lock(name)[0], func(ctx context.Context) (err error) {
		l, err = decodeRenew(s.eval(ctx, lockRenew, s.keys.lock(name)[:1], token, ttl.Microseconds()))
		return err
	})
	return l, err
}

// decodeRenew reads lock_renew.lua's reply.
func decodeRenew(cmd *redis.Cmd) (store.Lease, error) {
	r, err := replyOf(lockRenew, cmd)
	if err != nil {
		return store.Lease{}, err
	}
	switch r.code(codeOK, codeNo, codeSessionBound) {
	case codeNo:
		return store.Lease{}, store.ErrLockNotHeld
	case codeSessionBound:
		return store.Lease{}, store.ErrLockSessionBound
	}
	dl, fence, now := r.int(1), r.uint(2), r.int(3)
	return store.Lease{TTL: micros(dl - now), ExpireTime: unixMicro(dl), Fence: fence}, r.done()
}

// ReleaseLock implements store.Locks. A session-bound lock leaves its
// session's set first and is deleted second, so that a keepalive in between
// never reports it lost.
func (s *Store) ReleaseLock(ctx context.Context, name, token string) (bool, time.Duration, error) {
	var rel released
	err := s.do(ctx, "ReleaseLock", s.keys.lock(name)[0], func(ctx context.Context) (err error) {
		if rel, err = s.releaseLock(ctx, name, token, false); err != nil || rel.code != codeSessionBound {
			return err
		}
		if err := s.unbindHold(ctx, rel.session, store.HoldLock, name, token); err != nil {
			return err
		}
		rel, err = s.releaseLock(ctx, name, token, true)
		return err
	})
	if err != nil || rel.code != codeOK {
		return false, 0, err
	}
	return true, rel.held, nil
}

// AbandonLock implements store.Locks: a lease is released; a session-bound
// lock's binding first becomes a loss report (waking the session's stream),
// then the lock is deleted.
func (s *Store) AbandonLock(ctx context.Context, name, token string) error {
	return s.do(ctx, "AbandonLock", s.keys.lock(name)[0], func(ctx context.Context) error {
		rel, err := s.releaseLock(ctx, name, token, false)
		if err != nil || rel.code != codeSessionBound {
			return err // released, or not held
		}
		if err := s.holdGone(ctx, rel.session, store.HoldLock, name, token); err != nil {
			return err
		}
		_, err = s.releaseLock(ctx, name, token, true)
		return err
	})
}

// releaseLock runs lock_release.lua: it deletes lock name if token holds
// it live, and wakes its waiters; a session-bound one only if bound (its
// session's entry is gone), else it is answered codeSessionBound.
func (s *Store) releaseLock(ctx context.Context, name, token string, bound bool) (released, error) {
	return decodeRelease(s.eval(ctx, lockRelease, s.keys.lock(name)[:1], token, s.keys.channel(store.LockTopic(name)), boolArg(bound)))
}

// released is lock_release.lua's reply.
type released struct {
	code    int64         // codeOK, codeNo or codeSessionBound
	held    time.Duration // codeOK: how long it had been held
	session string        // codeSessionBound: the session's ID
}

func decodeRelease(cmd *redis.Cmd) (released, error) {
	r, err := replyOf(lockRelease, cmd)
	if err != nil {
		return released{}, err
	}
	rel := released{code: r.code(codeOK, codeNo, codeSessionBound)}
	switch rel.code {
	case codeOK:
		rel.held = micros(r.int(1))
	case codeSessionBound:
		rel.session = r.str(1)
	}
	return rel, r.done()
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// GetLock implements store.Locks.
func (s *Store) GetLock(ctx context.Context, name string) (store.LockInfo, error) {
	var info store.LockInfo
	err := s.do(ctx, "GetLock", s.keys.lock(name)[0], func(ctx context.Context) (err error) {
		info, err = decodeGet(s.eval(ctx, lockGet, s.keys.lock(name)[:1]))
		return err
	})
	return info, err
}

// decodeGet reads lock_get.lua's reply.
func decodeGet(cmd *redis.Cmd) (store.LockInfo, error) {
	r, err := replyOf(lockGet, cmd)
	if err != nil {
		return store.LockInfo{}, err
	}
	if r.code(codeOK, codeNo) != codeOK {
		return store.LockInfo{}, r.done() // free, or a bad code
	}
	owner, fence, ses, dl, acq, now := r.str(1), r.uint(2), r.str(3), r.int(4), r.int(5), r.int(6)
	return store.LockInfo{
		Held: true, Owner: owner, Fence: fence, SessionBound: ses != "",
		TTL: micros(dl - now), ExpireTime: unixMicro(dl), AcquireTime: unixMicro(acq),
	}, r.done()
}
