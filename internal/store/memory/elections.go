package memory

import (
	"context"
	"slices"

	"github.com/coordd/coordd/internal/store"
)

// An election is the holdSet of (store.HoldElection, name): its leader is
// its one holder (always session-bound), its waiters are tickets as for an
// exclusive lock, and its meta has the revision and the log of changes.
// Every removal of the leader's holder (resign, session drop, expiry found
// by the clean-up that starts every op on the set, the sweep) logs "no
// leader" at once (removeHolder), so an op's first clean-up is the sync.

// change logs a change of h, the leader after it being l, and wakes the
// election's observers.
func (o *op) change(h *holdSet, l store.LeaderInfo) {
	h.rev++
	l.Rev = h.rev
	h.log = append(h.log, store.ElectionChange{Rev: h.rev, Leader: l})
	if len(h.log) > store.ElectionLogSize {
		h.log = slices.Delete(h.log, 0, len(h.log)-store.ElectionLogSize)
	}
	h.changedAt = o.now
	o.notify(store.ElectionTopic(h.key.name))
}

// leaderInfo describes x, h's leader.
func (h *holdSet) leaderInfo(x *holder) store.LeaderInfo {
	return store.LeaderInfo{HasLeader: true, Value: x.value, Fence: x.fence, ElectTime: x.acquired, ExpireTime: x.deadline, Rev: h.rev}
}

// current describes h's leader now (h may be nil).
func (h *holdSet) current(o *op) store.LeaderInfo {
	if h == nil {
		return store.LeaderInfo{}
	}
	if x := h.liveHolder(h.leader, o.now); h.leader != "" && x != nil {
		return cloneLeader(h.leaderInfo(x))
	}
	return store.LeaderInfo{Rev: h.rev}
}

func cloneLeader(l store.LeaderInfo) store.LeaderInfo {
	l.Value = slices.Clone(l.Value)
	return l
}

// Campaign implements store.Elections.
func (s *Store) Campaign(_ context.Context, req store.Campaign) (store.Campaigned, error) {
	if req.SessionID == "" {
		return store.Campaigned{}, store.ErrSessionNotFound
	}
	o := s.begin()
	defer o.end()
	h := o.set(store.HoldElection, req.Name, true)
	g, err := o.acquire(h, grantReq{
		HoldRequest: store.HoldRequest{Name: req.Name, Token: req.Token, SessionID: req.SessionID,
			MaxSessionHolds: req.MaxSessionHolds, Wait: req.Wait},
		kind: store.HoldElection, value: req.Value,
	})
	switch {
	case err != nil:
		return store.Campaigned{}, err
	case g.already:
		return store.Campaigned{Elected: true, AlreadyLeader: true, Token: g.x.token, Fence: g.x.fence, ExpireTime: g.x.deadline}, nil
	case g.ok:
		h.leader = g.x.token
		o.change(h, h.leaderInfo(g.x))
		return store.Campaigned{Elected: true, Fence: g.x.fence, ExpireTime: g.x.deadline}, nil
	}
	return store.Campaigned{Queued: g.queued, RetryAt: g.retryAt, Leader: h.current(o)}, nil
}

// Proclaim implements store.Elections.
func (s *Store) Proclaim(_ context.Context, name, token string, value []byte) error {
	o := s.begin()
	defer o.end()
	h := o.set(store.HoldElection, name, false)
	x := h.liveHolder(token, o.now)
	if x == nil || h.leader != token {
		return store.ErrNotLeader
	}
	x.value = slices.Clone(value)
	o.change(h, h.leaderInfo(x))
	return nil
}

// Leader implements store.Elections.
func (s *Store) Leader(_ context.Context, name string) (store.LeaderInfo, error) {
	o := s.begin()
	defer o.end()
	return o.set(store.HoldElection, name, false).current(o), nil
}

// ElectionChanges implements store.Elections.
func (s *Store) ElectionChanges(_ context.Context, name string, after uint64) (store.ElectionLog, error) {
	o := s.begin()
	defer o.end()
	h := o.set(store.HoldElection, name, false)
	out := store.ElectionLog{Current: h.current(o)}
	if h == nil || len(h.log) == 0 {
		return out, nil
	}
	if first := h.log[0].Rev; first > after+1 {
		out.Missed = first - after - 1
	}
	for _, c := range h.log {
		if c.Rev > after {
			c.Leader = cloneLeader(c.Leader)
			if cur := out.Current; cur.HasLeader && c.Leader.HasLeader && c.Leader.Fence == cur.Fence {
				// The live term's end follows its session's renewals;
				// a renewal is not a change.
				c.Leader.ExpireTime = cur.ExpireTime
			}
			out.Changes = append(out.Changes, c)
		}
	}
	return out, nil
}
