package memory

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
)

type lockRec struct {
	token, owner, session string
	fence                 uint64
	acquired, deadline    time.Time
	holdUntil             time.Time // zero: no max hold
}

func (l *lockRec) live(now time.Time) bool { return now.Before(l.deadline) }

// The lock kind of session hold: a session's lock is renewed to the
// session's deadline, capped by its max hold, and dropped by its token.
func init() {
	holdKinds[store.HoldLock] = holdKind{refresh: refreshLock, drop: dropLock, topic: store.LockTopic}
}

// refreshLock is the lock kind's holdKind.refresh.
func refreshLock(s *Store, name, token string, deadline, now time.Time, renew bool) bool {
	l := s.locks[name]
	if l == nil || l.token != token || !l.live(now) {
		return false
	}
	if d := capHold(deadline, l.holdUntil); renew && d.After(l.deadline) {
		l.deadline = d
	}
	return true
}

// dropLock is the lock kind's holdKind.drop.
func dropLock(s *Store, name, token string, now time.Time) (bool, time.Duration) {
	l := s.locks[name]
	if l == nil || l.token != token {
		return false, 0
	}
	delete(s.locks, name)
	return l.live(now), now.Sub(l.acquired)
}

// AcquireLock implements store.Locks.
func (s *Store) AcquireLock(ctx context.Context, req store.AcquireLock) (store.LockGrant, error) {
	g, err := s.acquireLock(req)
	if err == nil && g.Acquired && !g.AlreadyHeld && req.SessionID != "" {
		s.hub.Notify(store.SessionTopic(req.SessionID))
	}
	return g, err
}

func (s *Store) acquireLock(req store.AcquireLock) (store.LockGrant, error) {
	now := s.now()
	s.lk.Lock()
	defer s.lk.Unlock()
	if l := s.locks[req.Name]; l != nil && l.live(now) {
		if req.SessionID != "" && l.session == req.SessionID {
			return store.LockGrant{Acquired: true, AlreadyHeld: true, Token: l.token, Fence: l.fence,
				TTL: l.deadline.Sub(now), ExpireTime: l.deadline}, nil
		}
		return store.LockGrant{Holder: l.owner, TTL: l.deadline.Sub(now), ExpireTime: l.deadline}, nil
	}
	var holdUntil time.Time
	if req.MaxHold > 0 {
		holdUntil = now.Add(us(req.MaxHold))
	}
	deadline := now.Add(us(req.TTL))
	var sess *sessionRec
	if req.SessionID != "" {
		sess = s.sessions[req.SessionID]
		if sess == nil || !sess.live(now) {
			return store.LockGrant{}, store.ErrSessionNotFound
		}
		if req.MaxSessionLocks > 0 && len(sess.holds)+len(sess.lost) >= req.MaxSessionLocks {
			return store.LockGrant{}, store.ErrTooManyLocks
		}
		deadline = sess.deadline
	}
	deadline = capHold(deadline, holdUntil)
	fence := max(s.lastFence+1, uint64(now.UnixMicro()))
	s.lastFence = fence
	s.locks[req.Name] = &lockRec{
		token: req.Token, owner: req.Owner, session: req.SessionID, fence: fence,
		acquired: now, deadline: deadline, holdUntil: holdUntil,
	}
	if sess != nil {
		sess.bind(store.HoldLock, req.Name, sessionHold{token: req.Token, fence: fence, holdUntil: holdUntil})
	}
	return store.LockGrant{Acquired: true, Fence: fence, TTL: deadline.Sub(now), ExpireTime: deadline}, nil
}

// RenewLock implements store.Locks.
func (s *Store) RenewLock(_ context.Context, name, token string, ttl time.Duration) (store.Lease, error) {
	now := s.now()
	s.lk.Lock()
	defer s.lk.Unlock()
	l := s.locks[name]
	if l == nil || l.token != token || !l.live(now) {
		return store.Lease{}, store.ErrLockNotHeld
	}
	if l.session != "" {
		return store.Lease{}, store.ErrLockSessionBound
	}
	l.deadline = capHold(now.Add(us(ttl)), l.holdUntil)
	return store.Lease{TTL: l.deadline.Sub(now), ExpireTime: l.deadline, Fence: l.fence}, nil
}

// ReleaseLock implements store.Locks.
func (s *Store) ReleaseLock(_ context.Context, name, token string) (bool, time.Duration, error) {
	now := s.now()
	s.lk.Lock()
	l := s.locks[name]
	if l == nil || l.token != token || !l.live(now) {
		s.lk.Unlock()
		return false, 0, nil
	}
	s.deleteLock(name, l)
	s.lk.Unlock()
	s.hub.Notify(store.LockTopic(name))
	return true, now.Sub(l.acquired), nil
}

// AbandonLock implements store.Locks.
func (s *Store) AbandonLock(_ context.Context, name, token string) error {
	now := s.now()
	s.lk.Lock()
	l := s.locks[name]
	if l == nil || l.token != token || !l.live(now) {
		s.lk.Unlock()
		return nil
	}
	delete(s.locks, name)
	if sess := s.sessions[l.session]; sess != nil {
		if h, ok := sess.unbind(store.HoldLock, name, token); ok {
			sess.report(store.LostHold{Kind: store.HoldLock, Name: name, Fence: h.fence, Reason: store.LostGone})
		}
	}
	s.lk.Unlock()
	s.hub.Notify(store.LockTopic(name))
	if l.session != "" {
		s.hub.Notify(store.SessionTopic(l.session))
	}
	return nil
}

// deleteLock removes lock name, and its entry in its session's set. s.lk must
// be held.
func (s *Store) deleteLock(name string, l *lockRec) {
	delete(s.locks, name)
	if sess := s.sessions[l.session]; sess != nil {
		sess.unbind(store.HoldLock, name, l.token)
	}
}

// GetLock implements store.Locks.
func (s *Store) GetLock(_ context.Context, name string) (store.LockInfo, error) {
	now := s.now()
	s.lk.Lock()
	defer s.lk.Unlock()
	l := s.locks[name]
	if l == nil || !l.live(now) {
		return store.LockInfo{}, nil
	}
	return store.LockInfo{
		Held: true, Owner: l.owner, Fence: l.fence, SessionBound: l.session != "",
		TTL: l.deadline.Sub(now), ExpireTime: l.deadline, AcquireTime: l.acquired,
	}, nil
}

// sweepLocks deletes expired locks (waking their waiters) and sessions past
// their grace, and reports how many of those it looked at had expired.
func (s *Store) sweepLocks() int {
	now := s.now()
	var expired []string
	n, seen := 0, 0
	s.lk.Lock()
	for name, l := range s.locks {
		if seen++; seen > sweepBatch {
			break
		}
		// A session's lock stays until its session reports it.
		if !l.live(now) && s.sessions[l.session] == nil {
			delete(s.locks, name)
			expired = append(expired, name)
			n++
		}
	}
	n += s.sweepSessions(now)
	s.lk.Unlock()
	for _, name := range expired {
		s.hub.Notify(store.LockTopic(name))
	}
	return n
}
