package client

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// Semaphore is a counting semaphore bound to a session (Redisson's
// RPermitExpirableSemaphore, with fences): at most limit holders of name at
// once, granted in arrival order across every coordd instance, each permit
// held while the session lives, given back by Release or the session's end.
//
// Like a Mutex, a permit is a lease: guard what it protects with Fence and
// stop when Lost is closed. A Semaphore holds at most one permit at a time
// (one per session and name); it is safe for use by several goroutines.
type Semaphore struct {
	*hold
	sc    coordv1.SemaphoreServiceClient
	limit int32
}

// NewSemaphore returns the semaphore name with limit permits, bound to s.
// Every holder of name must ask with the same limit (coordd answers
// FAILED_PRECONDITION otherwise, while the name has holders).
func NewSemaphore(s *Session, name string, limit int32, opts HoldOptions) *Semaphore {
	return &Semaphore{
		hold: &hold{s: s, kind: coordv1.HoldKind_HOLD_KIND_SEMAPHORE, name: name, opts: opts},
		sc:   coordv1.NewSemaphoreServiceClient(s.cc), limit: limit,
	}
}

// Acquire waits until a permit is granted or ctx ends, as Mutex.Lock does.
func (m *Semaphore) Acquire(ctx context.Context) error { return m.take(ctx, true, m.call) }

// TryAcquire takes a permit if one is free now; ErrLocked if none is.
func (m *Semaphore) TryAcquire(ctx context.Context) error { return m.take(ctx, false, m.call) }

func (m *Semaphore) call(ctx context.Context, wait time.Duration) (bool, string, uint64, error) {
	req := &coordv1.AcquireRequest{Name: m.name, Limit: m.limit, SessionId: m.s.ID(), Owner: m.opts.Owner, Wait: durationpb.New(wait)}
	if m.opts.MaxHold > 0 {
		req.MaxHold = durationpb.New(m.opts.MaxHold)
	}
	resp, err := m.sc.Acquire(ctx, req)
	return resp.GetAcquired(), resp.GetToken(), resp.GetFence(), err
}

// Release gives the permit back, as Mutex.Unlock does.
func (m *Semaphore) Release(ctx context.Context) error {
	return m.give(ctx, func(ctx context.Context, token string) (bool, error) {
		resp, err := m.sc.Release(ctx, &coordv1.SemaphoreServiceReleaseRequest{Name: m.name, Token: token})
		return resp.GetReleased(), err
	})
}
