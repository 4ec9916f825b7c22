package hold_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
)

// waitResult is what a Wait returned.
type waitResult struct {
	handoff *store.Grant
	err     error
}

// waitFor starts a plain lock request with token tok waiting on name (the
// store may hand it off), recording its tries' grants in *g.
func (h *qharness) waitFor(ctx context.Context, name, tok string, wait time.Duration, g *store.Grant) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		hg, err := h.q.Wait(ctx, store.HoldLock, name, tok, wait, h.acquire(name, tok, g))
		out <- waitResult{hg, err}
	}()
	return out
}

// releaseHere releases tok's hold of name as this instance and delivers
// the hand-offs, as the lock service does.
func (h *qharness) releaseHere(t *testing.T, name, tok string) {
	t.Helper()
	rel, err := h.faulty.ReleaseHold(t.Context(), store.HoldLock, name, tok, h.q.Instance())
	if err != nil || !rel.Released {
		t.Fatalf("ReleaseHold: %+v, %v", rel, err)
	}
	h.q.Deliver(store.HoldLock, name, rel.Handoffs)
}

func receive(t *testing.T, c <-chan waitResult, what string) waitResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(prompt):
		t.Fatalf("%s: Wait did not return", what)
		return waitResult{}
	}
}

// TestQueuesHandoff: a release of this instance hands the lock to its
// waiters one by one, in arrival order, each Wait returning the hand-off's
// grant: no try beyond each waiter's first (queueing) one, no wake-up.
func TestQueuesHandoff(t *testing.T) {
	h := newQHarness(t)
	const name = "ns:a"
	holder := h.hold(t, name)
	const n = 5
	toks := make([]string, n)
	outs := make([]<-chan waitResult, n)
	grants := make([]store.Grant, n)
	for i := range n {
		toks[i] = token.New()
		outs[i] = h.waitFor(t.Context(), name, toks[i], long, &grants[i])
		eventually(t, "queued", func() bool { return h.waiters(t, name) == i+1 })
	}
	tries := h.faulty.Calls("AcquireHold")
	prev := holder
	var fence uint64
	for i := range n {
		h.releaseHere(t, name, prev)
		r := receive(t, outs[i], "the head waiter")
		if r.err != nil || r.handoff == nil || !r.handoff.Acquired || r.handoff.Fence <= fence || r.handoff.TTL != time.Hour {
			t.Fatalf("waiter %d: %+v, %v; want a hand-off's grant with a fence above %d", i, r.handoff, r.err, fence)
		}
		for j := i + 1; j < n; j++ {
			select {
			case r := <-outs[j]:
				t.Fatalf("waiter %d returned before its turn: %+v", j, r)
			default:
			}
		}
		fence, prev = r.handoff.Fence, toks[i]
	}
	if extra := h.faulty.Calls("AcquireHold") - tries; extra != 0 {
		t.Errorf("%d tries after the waiters queued, want 0: every grant was a hand-off", extra)
	}
}

// TestQueuesHandoffDuringTry: a hand-off delivered while its waiter's try is
// in flight completes the wait when the try returns, with the hand-off's
// grant, whatever the try answered.
func TestQueuesHandoffDuringTry(t *testing.T) {
	h := newQHarness(t)
	var tickets atomic.Pointer[store.WaitTicket]
	in, release := make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	tok := token.New()
	out := make(chan waitResult, 1)
	go func() {
		g, err := h.q.Wait(t.Context(), store.HoldLock, "ns:a", tok, long, func(_ context.Context, tk *store.WaitTicket) (hold.Result, error) {
			tickets.Store(tk)
			if n.Add(1) == 1 {
				return hold.Result{RetryAt: time.Now().Add(10 * time.Millisecond)}, nil
			}
			close(in)
			<-release
			return hold.Result{}, nil // not granted, as the store saw it before the hand-off
		})
		out <- waitResult{g, err}
	}()
	<-in
	want := store.Grant{Acquired: true, Fence: 7, TTL: time.Minute}
	h.q.Deliver(store.HoldLock, "ns:a", []store.Handoff{
		{Ticket: token.New(), Token: tok, Grant: store.Grant{Acquired: true, Fence: 5}},         // another ticket: not its
		{Ticket: tickets.Load().Ticket, Token: token.New(), Grant: store.Grant{Acquired: true}}, // another token: not its
		{Ticket: tickets.Load().Ticket, Token: tok, Grant: want},
	})
	select {
	case r := <-out:
		t.Fatalf("Wait returned %+v with its try in flight", r)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	r := receive(t, out, "the waiter")
	if r.err != nil || r.handoff == nil || *r.handoff != want {
		t.Fatalf("Wait = %+v, %v; want the hand-off's grant %+v", r.handoff, r.err, want)
	}
}

// TestQueuesHandoffAfterGiveUp: a hand-off that comes after its waiter gave
// up (its LeaveQueue still on the way) is dropped, and the LeaveQueue finds
// it: the waiter answers with the grant, as with a try's; with its context
// done, it answers the context's error (its caller cleans up).
func TestQueuesHandoffAfterGiveUp(t *testing.T) {
	for _, canceled := range []bool{false, true} {
		t.Run(fmt.Sprint("canceled=", canceled), func(t *testing.T) {
			h := newQHarness(t)
			const name = "ns:a"
			holder := h.hold(t, name)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			wait := long
			if !canceled {
				wait = 100 * time.Millisecond
			}
			var g store.Grant
			out := h.waitFor(ctx, name, token.New(), wait, &g)
			eventually(t, "queued", func() bool { return h.waiters(t, name) == 1 })
			leaves := h.faulty.Calls("LeaveQueue")
			h.faulty.Slow("LeaveQueue", 300*time.Millisecond)
			if canceled {
				cancel()
			}
			eventually(t, "the waiter giving up", func() bool { return h.faulty.Calls("LeaveQueue") > leaves })
			h.releaseHere(t, name, holder) // hands the lock to the waiter's ticket: nobody to deliver to
			info, err := h.mem.GetHolds(t.Context(), store.HoldLock, name)
			if err != nil || len(info.Holders) != 1 {
				t.Fatalf("GetHolds after the hand-off: %+v, %v", info, err)
			}
			r := receive(t, out, "the waiter that gave up")
			if canceled {
				if !errors.Is(r.err, context.Canceled) || r.handoff != nil {
					t.Errorf("Wait = %+v, %v; want context.Canceled", r.handoff, r.err)
				}
				return
			}
			if r.err != nil || r.handoff == nil || r.handoff.Fence != info.Fence || g.Acquired {
				t.Errorf("Wait = %+v, %v (last try %+v); want the hand-off's grant, fence %d", r.handoff, r.err, g, info.Fence)
			}
		})
	}
}

// TestQueuesLeaveFailureIsUncertain: a waiter that may have been handed off
// (a plain request) and cannot leave the queue returns the error: whether
// it holds is unknown. One that cannot be handed off returns nil.
func TestQueuesLeaveFailureIsUncertain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tok       string
		uncertain bool
	}{{"plain", token.New(), true}, {"never handed off", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newQHarness(t)
			h.hold(t, "ns:a")
			h.faulty.Fail("LeaveQueue")
			var g store.Grant
			hg, err := h.q.Wait(t.Context(), store.HoldLock, "ns:a", tc.tok, 50*time.Millisecond, h.acquire("ns:a", token.New(), &g))
			if hg != nil || g.Acquired {
				t.Fatalf("Wait = %+v (last try %+v); want not acquired", hg, g)
			}
			if got := errors.Is(err, storetest.ErrInjected); got != tc.uncertain {
				t.Errorf("Wait's error %v; want the LeaveQueue's: %v", err, tc.uncertain)
			}
		})
	}
}
