package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

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
		full := false // the session is at its lock cap: only a held lock is answered
		if req.SessionID != "" {
			r, err := s.eval(ctx, sessionDeadline, s.keys.session(req.SessionID)).Slice()
			if err != nil {
				return err
			}
			if toInt(r[0]) == 0 {
				return store.ErrSessionNotFound
			}
			full = req.MaxSessionLocks > 0 && toInt(r[1]) >= int64(req.MaxSessionLocks)
			sessDeadline = toInt(r[0])
		}
		lk := s.keys.lock(req.Name)
		cmd, replicated := s.evalReplicated(ctx, lockAcquire, lk, req.Token, req.Owner,
			req.TTL.Microseconds(), req.MaxHold.Microseconds(), req.SessionID, sessDeadline, s.timeSeen.Load(), boolArg(full))
		r, err := cmd.Slice()
		if err != nil {
			return err
		}
		if len(r) == 4 {
			s.sawTime(toInt(r[3]))
		}
		switch toInt(r[0]) {
		case -1:
			return store.ErrSessionNotFound
		case -2:
			if len(r) < 5 {
				return fmt.Errorf("%w: lock_acquire replied %d values", errCorrupt, len(r))
			}
			tok, _ := r[1].(string)
			dl, now := toInt(r[3]), toInt(r[4])
			g = store.LockGrant{Acquired: true, AlreadyHeld: true, Token: tok, Fence: uint64(toInt(r[2])),
				TTL: micros(dl - now), ExpireTime: unixMicro(dl)}
			return nil
		case -3:
			return store.ErrTooManyLocks
		case 0:
			dl, now := toInt(r[2]), toInt(r[3])
			g = store.LockGrant{Holder: toStr(r[1]), TTL: micros(dl - now), ExpireTime: unixMicro(dl)}
			return nil
		}
		if !replicated {
			return errNotReplicated // the caller releases it by its token
		}
		fence, dl, now := toInt(r[1]), toInt(r[2]), toInt(r[3])
		g = store.LockGrant{Acquired: true, Fence: uint64(fence), TTL: micros(dl - now), ExpireTime: unixMicro(dl)}
		if req.SessionID == "" {
			return nil
		}
		var hold int64
		if req.MaxHold > 0 {
			hold = now + req.MaxHold.Microseconds()
		}
		entry := sessionEntry{token: req.Token, fence: uint64(fence), holdUntil: hold, pending: true}
		sk := s.keys.session(req.SessionID)
		cmd, replicated = s.evalReplicated(ctx, sessionAddLock, sk, req.Name, encodeEntry(entry), store.SessionGrace.Microseconds(), req.MaxSessionLocks)
		newDeadline, err := cmd.Int64()
		if err != nil {
			return err
		}
		if newDeadline <= 0 {
			// The session ended, or filled up, since it was read: undo the grant.
			if _, err := s.eval(ctx, lockRelease, lk[:1], req.Token, s.keys.channel(store.LockTopic(req.Name)), "1").Result(); err != nil {
				return err
			}
			if newDeadline < 0 {
				return store.ErrTooManyLocks
			}
			return store.ErrSessionNotFound
		}
		if !replicated {
			return errNotReplicated // a failover could lose the entry, and the lock with it
		}
		entry.pending = false
		cmd, replicated = s.evalReplicated(ctx, sessionConfirmLock, sk[:2], req.Name, req.Token, encodeEntry(entry),
			s.keys.channel(store.SessionTopic(req.SessionID)))
		if newDeadline, err = cmd.Int64(); err != nil {
			return err
		}
		if newDeadline <= 0 {
			// The session ended, or lost the lock, since the add.
			if _, err := s.eval(ctx, lockRelease, lk[:1], req.Token, s.keys.channel(store.LockTopic(req.Name)), "1").Result(); err != nil {
				return err
			}
			return store.ErrSessionNotFound
		}
		if !replicated {
			return errNotReplicated
		}
		if newDeadline > dl && (hold == 0 || hold > dl) {
			// A keepalive renewed the session between the read and the add,
			// without this lock: extend it to the session's deadline (an
			// extension only, so a later keepalive is never undone).
			held, err := s.eval(ctx, lockSession, lk[:1], req.Token, newDeadline, "renew", "").Int64()
			if err != nil {
				return err
			}
			if held == 0 {
				// Its lease ran out before it could be extended: it is gone.
				_ = s.eval(ctx, sessionRemoveLocks, sk[1:], req.Name, req.Token).Err()
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
	var released bool
	var held time.Duration
	err := s.do(ctx, "ReleaseLock", s.keys.lock(name)[0], func(ctx context.Context) error {
		lk := s.keys.lock(name)[:1]
		ch := s.keys.channel(store.LockTopic(name))
		r, err := s.eval(ctx, lockRelease, lk, token, ch, "0").Slice()
		if err != nil {
			return err
		}
		if toInt(r[0]) == 2 {
			if err := s.eval(ctx, sessionRemoveLocks, s.keys.session(toStr(r[1]))[1:], name, token).Err(); err != nil {
				return err
			}
			if r, err = s.eval(ctx, lockRelease, lk, token, ch, "1").Slice(); err != nil {
				return err
			}
		}
		if released = toInt(r[0]) == 1; released {
			held = micros(toInt(r[1]))
		}
		return nil
	})
	return released, held, err
}

// AbandonLock implements store.Locks: a lease is released; a session-bound
// lock's binding first becomes a loss report (waking the session's stream),
// then the lock is deleted.
func (s *Store) AbandonLock(ctx context.Context, name, token string) error {
	return s.do(ctx, "AbandonLock", s.keys.lock(name)[0], func(ctx context.Context) error {
		lk := s.keys.lock(name)[:1]
		ch := s.keys.channel(store.LockTopic(name))
		r, err := s.eval(ctx, lockRelease, lk, token, ch, "0").Slice()
		if err != nil || len(r) < 2 || r[0] != int64(2) {
			return err // released, or not held
		}
		ses, _ := r[1].(string)
		if err := s.eval(ctx, sessionMarkLost, s.keys.session(ses), s.keys.channel(store.SessionTopic(ses)),
			name, token, int(store.LostGone)).Err(); err != nil {
			return err
		}
		return s.eval(ctx, lockRelease, lk, token, ch, "1").Err()
	})
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
