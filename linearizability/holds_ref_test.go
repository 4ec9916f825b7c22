package linearizability

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// refHolds is a tiny in-test store.Holds built on the model itself, to
// try the recorder and the broken-store tests before the backends exist.
type refHolds struct {
	mu    sync.Mutex
	names map[string]hstate
	fence uint64
}

var errRef = errors.New("not in the reference")

func newRefHolds() *refHolds { return &refHolds{names: map[string]hstate{}} }

func (r *refHolds) AcquireHold(_ context.Context, req store.AcquireLock) (store.LockGrant, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := string(req.Kind) + ":" + req.Name
	s := r.names[key]
	in := hin{Kind: req.Kind, Shared: req.Shared, MaxHolders: req.MaxHolders, Limit: req.Limit}
	if req.Wait != nil {
		in.Ticket = req.Wait.Ticket
	}
	d := hvariant{}.decide(s, in)
	if d.mismatch {
		return store.LockGrant{}, store.ErrLimitMismatch
	}
	next := s.clone()
	if req.Kind == store.HoldSemaphore {
		next.Limit = d.limit
	}
	if d.eligible {
		r.fence++
		if i := next.queued(in.Ticket); i >= 0 {
			next.Queue = slices.Delete(next.Queue, i, i+1)
		}
		next.Holders = append(next.Holders, hholder{Token: req.Token, Owner: req.Owner, Fence: r.fence, Shared: req.Kind == store.HoldLock && req.Shared})
		next.Last = r.fence
		r.names[key] = next.settle()
		return store.LockGrant{Acquired: true, Token: req.Token, Fence: r.fence, TTL: req.TTL,
			Holders: len(next.Holders), Limit: next.Limit}, nil
	}
	g := store.LockGrant{Holders: len(s.Holders), Limit: next.Limit}
	if len(d.blocking) > 0 {
		g.Holder, g.RetryAt = d.blocking[0].Owner, time.Now().Add(ttl)
	}
	if req.Wait != nil {
		if next.queued(in.Ticket) < 0 {
			next.Queue = append(next.Queue, hticket{Ticket: in.Ticket, Shared: req.Kind == store.HoldLock && req.Shared})
		}
		g.Queued = true
	}
	r.names[key] = next.settle()
	return g, nil
}

func (r *refHolds) RenewHold(_ context.Context, kind store.HoldKind, name, token string, ttl time.Duration) (store.Lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.names[string(kind)+":"+name]
	i := s.holder(token)
	if i < 0 {
		return store.Lease{}, store.ErrLockNotHeld
	}
	return store.Lease{TTL: ttl, Fence: s.Holders[i].Fence}, nil
}

func (r *refHolds) ReleaseHold(_ context.Context, kind store.HoldKind, name, token string) (bool, time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := string(kind) + ":" + name
	s := r.names[key]
	i := s.holder(token)
	if i < 0 {
		return false, 0, nil
	}
	s = s.clone()
	s.Holders = slices.Delete(s.Holders, i, i+1)
	r.names[key] = s.settle()
	return true, time.Millisecond, nil
}

func (r *refHolds) AbandonHold(context.Context, store.HoldKind, string, string) error { return errRef }

func (r *refHolds) GetHolds(_ context.Context, kind store.HoldKind, name string) (store.LockInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.names[string(kind)+":"+name]
	hs := slices.Clone(s.Holders)
	slices.SortFunc(hs, func(a, b hholder) int { return int(a.Fence) - int(b.Fence) })
	info := store.LockInfo{Waiters: len(s.Queue), Limit: s.Limit}
	for _, x := range hs {
		info.Holders = append(info.Holders, store.HolderInfo{Owner: x.Owner, Fence: x.Fence, Shared: x.Shared})
	}
	if len(hs) > 0 {
		info.Held, info.Owner, info.Fence = true, hs[0].Owner, hs[0].Fence
	}
	return info, nil
}

func (r *refHolds) LeaveQueue(_ context.Context, kind store.HoldKind, name, ticket string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := string(kind) + ":" + name
	s := r.names[key]
	if i := s.queued(ticket); i >= 0 {
		s = s.clone()
		s.Queue = slices.Delete(s.Queue, i, i+1)
		r.names[key] = s.settle()
	}
	return nil
}

func (r *refHolds) RefreshTickets(context.Context, store.HoldKind, string, []string, time.Duration) ([]string, error) {
	return nil, errRef
}

func (r *refHolds) CheckFence(context.Context, store.HoldKind, string, uint64) (bool, error) {
	return false, errRef
}
