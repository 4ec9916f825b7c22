package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// ErrLocked is TryLock's and TryAcquire's answer when the lock (or every
// permit) is held by others.
var ErrLocked = errors.New("client: held by another")

// ErrNotHeld is Unlock's (Release's, Resign's) answer when the hold had
// already ended: lost, or never taken.
var ErrNotHeld = errors.New("client: not held")

// DefaultMaxWait is the longest wait a single call asks coordd for: its
// limits.max_wait by default. A longer wait is several calls (a new place
// at the back of the queue each time). A coordd with a lower limit refuses
// a longer wait with INVALID_ARGUMENT naming its limit (ErrorInfo metadata
// "limit"); the Session then remembers it and asks for no more, in this
// call and later ones, so HoldOptions.MaxWait need not be set to it.
const DefaultMaxWait = time.Minute

// HoldOptions are the options of a Mutex, a Semaphore and an Election.
type HoldOptions struct {
	// Owner is a label others see (GetLock, a contended Lock): not a
	// secret; empty: none.
	Owner string
	// MaxHold caps how long a grant may be held (0: no cap).
	MaxHold time.Duration
	// MaxWait is the longest wait one call asks coordd for (0:
	// DefaultMaxWait); lowered to coordd's limits.max_wait once it is
	// learned (see DefaultMaxWait).
	MaxWait time.Duration
}

func (o HoldOptions) maxWait() time.Duration {
	if o.MaxWait > 0 {
		return o.MaxWait
	}
	return DefaultMaxWait
}

// hold is what a Mutex, a Semaphore and an Election share: the grant they
// hold (at most one), its watcher, and taking and giving it back.
type hold struct {
	s    *Session
	kind coordv1.HoldKind
	name string
	opts HoldOptions

	op    sync.Mutex // one take or give at a time
	mu    sync.Mutex // guards what follows
	token string     // of the grant held; "" if none
	fence uint64
	w     *watcher
}

// take asks for a grant with call (wait: how long coordd may wait for it;
// granted, its token and fence), retried as acquire says. Held already (and
// not lost), it returns at once.
func (h *hold) take(ctx context.Context, wait bool, call func(ctx context.Context, wait time.Duration) (granted bool, token string, fence uint64, err error)) error {
	h.op.Lock()
	defer h.op.Unlock()
	if h.held() != "" {
		return nil
	}
	var token string
	var fence uint64
	err := acquire(ctx, h.s, wait, h.opts.maxWait(), func(ctx context.Context, wait time.Duration) (bool, error) {
		granted, t, f, err := call(ctx, wait)
		token, fence = t, f
		return granted, err
	})
	if err != nil {
		return err
	}
	w := h.s.watch(h.kind, h.name, fence)
	h.mu.Lock()
	h.token, h.fence, h.w = token, fence, w
	h.mu.Unlock()
	return nil
}

// give gives the grant back with call (given: whether the token held it),
// retried while transient; ErrNotHeld if nothing was held.
func (h *hold) give(ctx context.Context, call func(ctx context.Context, token string) (given bool, err error)) error {
	h.op.Lock()
	defer h.op.Unlock()
	h.mu.Lock()
	token, w := h.token, h.w
	h.mu.Unlock()
	if token == "" {
		return ErrNotHeld
	}
	var given bool
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		given, err = call(ctx, token)
		return err
	})
	if err != nil {
		return err
	}
	h.s.unwatch(h.kind, h.name, w)
	h.mu.Lock()
	h.token = ""
	h.mu.Unlock()
	if !given {
		return ErrNotHeld
	}
	return nil
}

// held returns the grant's token, or "" if none is held or it was lost.
func (h *hold) held() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.token == "" || closed(h.w.ch) {
		return ""
	}
	return h.token
}

// Fence is the fence of the grant held (0 if none): greater than every
// fence issued for the name before.
func (h *hold) Fence() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.token == "" {
		return 0
	}
	return h.fence
}

// Lost is closed when the grant held ends: coordd reported it lost (Err
// says why), the session ended, or it was given back. Nil if nothing is
// held.
func (h *hold) Lost() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.token == "" {
		return nil
	}
	return h.w.ch
}

// Err is why the grant held was lost, once Lost is closed (nil after it
// was given back).
func (h *hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil || !closed(h.w.ch) {
		return nil
	}
	return h.w.err
}

// Mutex is a lock bound to a session, exclusive or shared (a
// readers-writer lock's read side): granted in arrival order across every
// coordd instance, held while the session lives, released by Unlock or the
// session's end.
//
// A lock is a lease, not a proof of exclusion: guard every write it
// protects with Fence (reject a write whose fence is not greater than the
// last one accepted), and stop when Lost is closed.
//
// A Mutex holds at most one grant at a time; it is safe for use by several
// goroutines.
type Mutex struct {
	*hold
	lc     coordv1.LockServiceClient
	shared bool
}

// NewMutex returns an exclusive lock on name bound to s.
func NewMutex(s *Session, name string, opts HoldOptions) *Mutex {
	return &Mutex{hold: &hold{s: s, kind: coordv1.HoldKind_HOLD_KIND_LOCK, name: name, opts: opts}, lc: coordv1.NewLockServiceClient(s.cc)}
}

// NewSharedMutex returns a shared lock on name bound to s: shared holders
// coexist; an exclusive holder excludes them, and a waiting exclusive
// request goes before every shared request that comes after it.
func NewSharedMutex(s *Session, name string, opts HoldOptions) *Mutex {
	m := NewMutex(s, name, opts)
	m.shared = true
	return m
}

// Lock waits until the lock is granted or ctx ends (ctx's error, and
// nothing held). An uncertain outcome (coordd unreachable) is retried: a
// session gets its existing grant back. Locking a Mutex that holds a grant
// returns at once.
func (m *Mutex) Lock(ctx context.Context) error { return m.take(ctx, true, m.call) }

// TryLock takes the lock if it is free now; ErrLocked if it is not.
func (m *Mutex) TryLock(ctx context.Context) error { return m.take(ctx, false, m.call) }

func (m *Mutex) call(ctx context.Context, wait time.Duration) (bool, string, uint64, error) {
	req := &coordv1.LockRequest{Name: m.name, SessionId: m.s.ID(), Owner: m.opts.Owner, Shared: m.shared, Wait: durationpb.New(wait)}
	if m.opts.MaxHold > 0 {
		req.MaxHold = durationpb.New(m.opts.MaxHold)
	}
	resp, err := m.lc.Lock(ctx, req)
	return resp.GetAcquired(), resp.GetToken(), resp.GetFence(), err
}

// Unlock releases the lock. ErrNotHeld: it was not held (lost, or never
// locked). An uncertain outcome is retried until ctx ends; if it ends
// first, the lock ends with the session.
func (m *Mutex) Unlock(ctx context.Context) error {
	return m.give(ctx, func(ctx context.Context, token string) (bool, error) {
		resp, err := m.lc.Release(ctx, &coordv1.ReleaseRequest{Name: m.name, Token: token})
		return resp.GetReleased(), err
	})
}

// acquire asks for a grant (try, with wait: how long coordd may wait) until
// it is granted: once if !wait, else until ctx ends, one call per maxWait
// or coordd's limit, whichever is lower (each call is a new request: its
// place in the queue is at the back). A wait coordd refuses as over its
// limit is asked again at once under the limit, which s keeps. Transient
// errors (an uncertain outcome) are retried.
func acquire(ctx context.Context, s *Session, wait bool, maxWait time.Duration, try func(ctx context.Context, wait time.Duration) (bool, error)) error {
	backoff := minBackoff
	for {
		select {
		case <-s.Done():
			return fmt.Errorf("client: the session is over: %w", s.Err())
		default:
		}
		w := time.Duration(0)
		if wait {
			w = s.waits.cap(maxWait)
			if dl, ok := ctx.Deadline(); ok {
				w = max(0, min(w, time.Until(dl)-callSlack))
			}
		}
		granted, err := try(ctx, w)
		switch {
		case err == nil && granted:
			return nil
		case err == nil && !wait:
			return ErrLocked
		case err == nil:
			backoff = minBackoff
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= callSlack {
				return context.DeadlineExceeded
			}
		case wait && ctx.Err() == nil && s.waits.learn(err, w):
		case !transient(err) || ctx.Err() != nil:
			return err
		default:
			if err := sleep(ctx, backoff/2+randDuration(backoff/2)); err != nil {
				return err
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// waitCap is coordd's limits.max_wait as learned from a wait it refused
// for being over it (nanoseconds; 0: not learned yet): later waits ask for
// no more. Each waiting call of this package (a hold's, Limiter.Wait's,
// Idempotent's, a Worker's Claim) waits in rounds of at most it, so that a
// coordd with a lower limit than the call's wait is waited on, not failed.
type waitCap struct{ limit atomic.Int64 }

// cap returns w, or the learned limit if that is lower.
func (c *waitCap) cap(w time.Duration) time.Duration {
	if l := time.Duration(c.limit.Load()); l > 0 {
		return min(w, l)
	}
	return w
}

// learn reports whether err is coordd's refusal of the wait w as over its
// limits.max_wait, naming a lower limit (INVALID_ARGUMENT with ErrorInfo
// metadata field "wait" and "limit", a Duration's JSON), and keeps that
// limit: the caller asks again at once.
func (c *waitCap) learn(err error, w time.Duration) bool {
	l := WaitLimit(err)
	if l <= 0 || l >= w {
		return false
	}
	c.limit.Store(int64(l))
	return true
}

// WaitLimit returns the limit that err, coordd's INVALID_ARGUMENT for a
// wait over limits.max_wait, names; 0 if err is not that or names none (a
// coordd older than the metadata).
func WaitLimit(err error) time.Duration {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return 0
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != "coordd" || info.GetMetadata()["field"] != "wait" {
			continue
		}
		if l, err := time.ParseDuration(info.GetMetadata()["limit"]); err == nil && l > 0 {
			return l
		}
	}
	return 0
}

// Overloaded returns how long coordd asked to wait before trying again
// when err is its RESOURCE_EXHAUSTED reason OVERLOADED (new work refused
// at capacity, e.g. a new session at limits.max_sessions), and whether it
// is. A refusal without a retry_after asks for a second.
func Overloaded(err error) (retryAfter time.Duration, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		info, isInfo := d.(*errdetails.ErrorInfo)
		if !isInfo || info.GetDomain() != "coordd" || info.GetReason() != "OVERLOADED" {
			continue
		}
		if r, err := time.ParseDuration(info.GetMetadata()["retry_after"]); err == nil && r > 0 {
			return r, true
		}
		return time.Second, true
	}
	return 0, false
}

// callSlack is how much earlier than ctx's deadline a wait ends, so that
// coordd's answer arrives before the deadline cancels the call.
const callSlack = 50 * time.Millisecond

// retry calls f until it succeeds, fails other than transiently, or ctx
// ends.
func retry(ctx context.Context, f func(ctx context.Context) error) error {
	backoff := minBackoff
	for {
		err := f(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		if err := sleep(ctx, backoff/2+randDuration(backoff/2)); err != nil {
			return err
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// transient reports whether err may pass if the call is made again:
// UNAVAILABLE (coordd or its store unreachable; the outcome unknown) and
// ABORTED.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted:
		return true
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func randDuration(d time.Duration) time.Duration { return rand.N(d + 1) }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
