package memory

import (
	"context"
	"slices"
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

type sessionRec struct {
	ttl      time.Duration
	deadline time.Time
	locks    map[string]sessionLock // by lock name
	stream   uint64                 // the epoch of the stream that drives it
	seq      uint64                 // the last loss report's Seq
	lost     []store.LostLock       // unacknowledged loss reports, by Seq
}

// report adds a loss report.
func (r *sessionRec) report(l store.LostLock) {
	r.seq++
	l.Seq = r.seq
	r.lost = append(r.lost, l)
}

// ack forgets the loss reports up to seq.
func (r *sessionRec) ack(seq uint64) {
	i := 0
	for i < len(r.lost) && r.lost[i].Seq <= seq {
		i++
	}
	r.lost = r.lost[i:]
}

// sessionLock is what a session remembers of a lock, enough to tell whether
// it still holds it and why not.
type sessionLock struct {
	token     string
	fence     uint64
	holdUntil time.Time
}

func (r *sessionRec) live(now time.Time) bool { return now.Before(r.deadline) }

// capHold caps deadline at holdUntil, if set.
func capHold(deadline, holdUntil time.Time) time.Time {
	if !holdUntil.IsZero() && holdUntil.Before(deadline) {
		return holdUntil
	}
	return deadline
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
		if req.MaxSessionLocks > 0 && len(sess.locks)+len(sess.lost) >= req.MaxSessionLocks {
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
		sess.locks[req.Name] = sessionLock{token: req.Token, fence: fence, holdUntil: holdUntil}
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
		if sl, ok := sess.locks[name]; ok && sl.token == token {
			delete(sess.locks, name)
			sess.report(store.LostLock{Name: name, Fence: sl.fence, Reason: store.LostGone})
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
		if sl, ok := sess.locks[name]; ok && sl.token == l.token {
			delete(sess.locks, name)
		}
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

// CreateSession implements store.Sessions.
func (s *Store) CreateSession(_ context.Context, id string, ttl time.Duration, max int) (store.SessionState, error) {
	now := s.now()
	ttl = us(ttl)
	ns := store.Namespace(id)
	s.lk.Lock()
	defer s.lk.Unlock()
	if max > 0 && s.liveSessions(ns, now) >= max {
		return store.SessionState{}, store.ErrTooManySessions
	}
	r := &sessionRec{ttl: ttl, deadline: now.Add(ttl), locks: make(map[string]sessionLock), stream: 1}
	s.sessions[id] = r
	if s.byNS[ns] == nil {
		s.byNS[ns] = make(map[string]struct{})
	}
	s.byNS[ns][id] = struct{}{}
	return store.SessionState{ID: id, Stream: 1, TTL: ttl, ExpireTime: r.deadline}, nil
}

// dropSession forgets session id. s.lk must be held.
func (s *Store) dropSession(id string) {
	delete(s.sessions, id)
	ns := store.Namespace(id)
	if ids := s.byNS[ns]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(s.byNS, ns)
		}
	}
}

// liveSessions counts the live sessions of namespace ns, forgetting the IDs
// of those that no longer exist. s.lk must be held.
func (s *Store) liveSessions(ns string, now time.Time) int {
	n := 0
	for id := range s.byNS[ns] {
		switch r := s.sessions[id]; {
		case r == nil:
			delete(s.byNS[ns], id)
		case r.live(now):
			n++
		}
	}
	return n
}

// ResumeSession implements store.Sessions.
func (s *Store) ResumeSession(_ context.Context, id string, ttl time.Duration) (store.SessionState, error) {
	st, err := s.refreshSession(store.SessionRef{ID: id}, us(ttl), modeResume)
	if err == nil && !st.Expired {
		s.hub.Notify(store.SessionTopic(id))
	}
	return st, err
}

// KeepAliveSession implements store.Sessions.
func (s *Store) KeepAliveSession(_ context.Context, ref store.SessionRef, ttl time.Duration) (store.SessionState, error) {
	return s.refreshSession(ref, us(ttl), modeRenew)
}

// CheckSession implements store.Sessions.
func (s *Store) CheckSession(_ context.Context, ref store.SessionRef) (store.SessionState, error) {
	return s.refreshSession(ref, 0, modeCheck)
}

type refreshMode int

const (
	modeCheck refreshMode = iota
	modeRenew
	modeResume
)

// session finds the session ref names, as of now. s.lk must be held.
func (s *Store) session(ref store.SessionRef, now time.Time) (*sessionRec, error) {
	r := s.sessions[ref.ID]
	if r == nil || !now.Before(r.deadline.Add(store.SessionGrace)) {
		return nil, store.ErrSessionNotFound
	}
	if ref.Stream != 0 && ref.Stream != r.stream {
		return nil, store.ErrSuperseded
	}
	return r, nil
}

// refreshSession reports a session's lost locks and expiry and, unless
// mode is modeCheck, renews it and its locks.
func (s *Store) refreshSession(ref store.SessionRef, ttl time.Duration, mode refreshMode) (store.SessionState, error) {
	now := s.now()
	s.lk.Lock()
	defer s.lk.Unlock()
	r, err := s.session(ref, now)
	if err != nil {
		return store.SessionState{}, err
	}
	id := ref.ID
	r.ack(ref.Ack)
	if !r.live(now) {
		// Its locks become reports once; the session is remembered, and
		// reported expired, until its grace ends (its unacknowledged reports
		// with it).
		for name, sl := range r.locks {
			reason := store.LostSessionExpired
			if !sl.holdUntil.IsZero() && !sl.holdUntil.After(r.deadline) {
				reason = store.LostMaxHold
			}
			r.report(store.LostLock{Name: name, Fence: sl.fence, Reason: reason})
			if l := s.locks[name]; l != nil && l.token == sl.token {
				delete(s.locks, name)
			}
			delete(r.locks, name)
		}
		// An expired session binds no more locks: only its reports are kept
		// for the grace, not the emptied map's table (maps never shrink).
		r.locks = nil
		return store.SessionState{ID: id, Stream: r.stream, ExpireTime: r.deadline, Expired: true, Lost: lostCopy(r.lost)}, nil
	}
	if mode == modeResume {
		r.stream++
	}
	if mode != modeCheck {
		if ttl > 0 {
			r.ttl = ttl
		}
		if d := now.Add(r.ttl); d.After(r.deadline) {
			r.deadline = d // never shortened (store.Sessions)
		}
	}
	st := store.SessionState{ID: id, Stream: r.stream, TTL: r.deadline.Sub(now), ExpireTime: r.deadline}
	for _, name := range sortedNames(r.locks) {
		sl := r.locks[name]
		l := s.locks[name]
		switch {
		case l != nil && l.token == sl.token && l.live(now):
			if d := capHold(r.deadline, l.holdUntil); mode != modeCheck && d.After(l.deadline) {
				l.deadline = d
			}
			if h := l.holdUntil; !h.IsZero() && h.Before(r.deadline) && (st.NextLoss.IsZero() || h.Before(st.NextLoss)) {
				st.NextLoss = h
			}
			continue
		case !sl.holdUntil.IsZero() && !now.Before(sl.holdUntil):
			r.report(store.LostLock{Name: name, Fence: sl.fence, Reason: store.LostMaxHold})
		default:
			r.report(store.LostLock{Name: name, Fence: sl.fence, Reason: store.LostGone})
		}
		delete(r.locks, name)
		if l != nil && l.token == sl.token {
			delete(s.locks, name)
		}
	}
	st.Lost = lostCopy(r.lost)
	return st, nil
}

func lostCopy(l []store.LostLock) []store.LostLock {
	if len(l) == 0 {
		return nil
	}
	return append([]store.LostLock(nil), l...)
}

// sortedNames returns a session's lock names in order, so that reports of
// one call get their sequence numbers in a stable order.
func sortedNames(m map[string]sessionLock) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CloseSession implements store.Sessions.
func (s *Store) CloseSession(_ context.Context, ref store.SessionRef) ([]store.ReleasedLock, error) {
	now := s.now()
	s.lk.Lock()
	r, err := s.session(ref, now)
	if err != nil {
		s.lk.Unlock()
		return nil, err
	}
	var released []store.ReleasedLock
	for name, sl := range r.locks {
		if l := s.locks[name]; l != nil && l.token == sl.token {
			if l.live(now) {
				released = append(released, store.ReleasedLock{Name: name, Held: now.Sub(l.acquired)})
			}
			delete(s.locks, name)
		}
	}
	s.dropSession(ref.ID)
	s.lk.Unlock()
	for _, l := range released {
		s.hub.Notify(store.LockTopic(l.Name))
	}
	return released, nil
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
	seen = 0
	for id, r := range s.sessions {
		if seen++; seen > sweepBatch {
			break
		}
		if !now.Before(r.deadline.Add(store.SessionGrace)) {
			for name, sl := range r.locks {
				if l := s.locks[name]; l != nil && l.token == sl.token {
					delete(s.locks, name)
				}
			}
			s.dropSession(id)
			n++
		}
	}
	s.lk.Unlock()
	for _, name := range expired {
		s.hub.Notify(store.LockTopic(name))
	}
	return n
}
