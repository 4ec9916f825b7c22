package memory

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// A session holds holds: each by its kind and name, with what the session
// remembers of it (enough to tell whether it still holds it and why not).
// What a session does with a hold (renew or check it to the session's
// deadline, drop it) is the same for every kind: refreshHold, dropHold.

type sessionRec struct {
	ttl      time.Duration
	deadline time.Time
	delay    time.Duration // lock-delay, copied into its holds at grant
	holds    map[holdKey]sessionHold
	stream   uint64           // the epoch of the stream that drives it
	seq      uint64           // the last loss report's Seq
	lost     []store.LostHold // unacknowledged loss reports, by Seq
}

// holdKey names a hold in its session.
type holdKey struct {
	kind store.HoldKind
	name string
}

// sessionHold is what a session remembers of one hold.
type sessionHold struct {
	token     string
	fence     uint64
	holdUntil time.Time // zero: no max hold
}

func (r *sessionRec) live(now time.Time) bool { return now.Before(r.deadline) }

// bind adds a hold to the session.
func (r *sessionRec) bind(kind store.HoldKind, name string, h sessionHold) {
	r.holds[holdKey{kind, name}] = h
}

// unbind takes a hold out of the session if token still has it, and
// returns it.
func (r *sessionRec) unbind(kind store.HoldKind, name, token string) (sessionHold, bool) {
	k := holdKey{kind, name}
	h, ok := r.holds[k]
	if !ok || h.token != token {
		return sessionHold{}, false
	}
	delete(r.holds, k)
	return h, true
}

// report adds a loss report.
func (r *sessionRec) report(l store.LostHold) {
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

// capHold caps deadline at holdUntil, if set.
func capHold(deadline, holdUntil time.Time) time.Time {
	if !holdUntil.IsZero() && holdUntil.Before(deadline) {
		return holdUntil
	}
	return deadline
}

// CreateSession implements store.Sessions.
func (s *Store) CreateSession(_ context.Context, id string, ttl time.Duration, max int, lockDelay time.Duration) (store.SessionState, error) {
	now := s.now()
	ttl = us(ttl)
	ns := store.Namespace(id)
	s.lk.Lock()
	defer s.lk.Unlock()
	if max > 0 && s.liveSessions(ns, now) >= max {
		return store.SessionState{}, store.ErrTooManySessions
	}
	r := &sessionRec{ttl: ttl, deadline: now.Add(ttl), delay: clampDelay(lockDelay),
		holds: make(map[holdKey]sessionHold), stream: 1}
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

// refreshSession reports a session's lost holds and expiry and, unless
// mode is modeCheck, renews it and its holds.
func (s *Store) refreshSession(ref store.SessionRef, ttl time.Duration, mode refreshMode) (store.SessionState, error) {
	o := s.begin()
	defer o.end()
	now := o.now
	r, err := s.session(ref, now)
	if err != nil {
		return store.SessionState{}, err
	}
	id := ref.ID
	r.ack(ref.Ack)
	if !r.live(now) {
		// Its holds become reports once; the session is remembered, and
		// reported expired, until its grace ends (its unacknowledged reports
		// with it).
		for k, h := range r.holds {
			reason := store.LostSessionExpired
			if !h.holdUntil.IsZero() && !h.holdUntil.After(r.deadline) {
				reason = store.LostMaxHold
			}
			r.report(store.LostHold{Kind: k.kind, Name: k.name, Fence: h.fence, Reason: reason})
			o.dropHold(k.kind, k.name, h.token)
			delete(r.holds, k)
		}
		// An expired session binds no more holds: only its reports are kept
		// for the grace, not the emptied map's table (maps never shrink).
		r.holds = nil
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
	for _, k := range sortedHolds(r.holds) {
		h := r.holds[k]
		reason := store.LostGone
		switch {
		case o.refreshHold(k.kind, k.name, h.token, r.deadline, mode != modeCheck):
			if u := h.holdUntil; !u.IsZero() && u.Before(r.deadline) && (st.NextLoss.IsZero() || u.Before(st.NextLoss)) {
				st.NextLoss = u
			}
			continue
		case !h.holdUntil.IsZero() && !now.Before(h.holdUntil):
			reason = store.LostMaxHold
		}
		r.report(store.LostHold{Kind: k.kind, Name: k.name, Fence: h.fence, Reason: reason})
		delete(r.holds, k)
		o.dropHold(k.kind, k.name, h.token)
	}
	st.Lost = lostCopy(r.lost)
	return st, nil
}

func lostCopy(l []store.LostHold) []store.LostHold {
	if len(l) == 0 {
		return nil
	}
	return append([]store.LostHold(nil), l...)
}

// sortedHolds returns a session's holds in order (by kind, then name), so
// that reports of one call get their sequence numbers in a stable order.
func sortedHolds(m map[holdKey]sessionHold) []holdKey {
	ks := make([]holdKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b holdKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	return ks
}

// CloseSession implements store.Sessions.
func (s *Store) CloseSession(_ context.Context, ref store.SessionRef) ([]store.ReleasedHold, error) {
	o := s.begin()
	defer o.end()
	r, err := s.session(ref, o.now)
	if err != nil {
		return nil, err
	}
	var released []store.ReleasedHold
	for k, h := range r.holds {
		if live, held := o.dropHold(k.kind, k.name, h.token); live {
			released = append(released, store.ReleasedHold{Kind: k.kind, Name: k.name, Held: held})
		}
	}
	s.dropSession(ref.ID)
	return released, nil
}

// sweepSessions deletes the sessions past their grace (and the holds they
// still had), looking at up to sweepBatch of them, and reports how many it
// deleted. It runs within o.
func (s *Store) sweepSessions(o *op) int {
	now := o.now
	n, seen := 0, 0
	for id, r := range s.sessions {
		if seen++; seen > sweepBatch {
			break
		}
		if !now.Before(r.deadline.Add(store.SessionGrace)) {
			for k, h := range r.holds {
				o.dropHold(k.kind, k.name, h.token)
			}
			s.dropSession(id)
			n++
		}
	}
	return n
}

// clampDelay bounds a session's lock-delay to [0, store.MaxLockDelay].
func clampDelay(d time.Duration) time.Duration {
	return min(max(us(d), 0), store.MaxLockDelay)
}
