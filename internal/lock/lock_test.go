package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/waiter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ns = "ns"

// harness is a lock Service on a Faulty memory store driven by a fake clock.
type harness struct {
	svc    *lock.Service
	mem    *memory.Store
	faulty *storetest.Faulty
	clock  *clock.Fake
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c})
	f := storetest.NewFaulty(mem)
	drain := make(chan struct{})
	queues := waiter.NewQueues(f, f, drain)
	svc := lock.New(f, queues, c, lock.DefaultConfig(), drain)
	t.Cleanup(func() { close(drain); queues.Close(); svc.Wait(); _ = f.Close() })
	return &harness{svc: svc, mem: mem, faulty: f, clock: c}
}

// held reports the inner store's view of lock name, past every fault.
func (h *harness) held(t *testing.T, name string) store.LockInfo {
	t.Helper()
	info, err := h.mem.GetLock(t.Context(), store.Scope(ns, name))
	if err != nil {
		t.Fatalf("GetLock on the inner store: %v", err)
	}
	return info
}

// session creates a session on the inner store and returns its unscoped ID.
func (h *harness) session(t *testing.T) string {
	t.Helper()
	id := token.New()
	if _, err := h.mem.CreateSession(t.Context(), store.Scope(ns, id), time.Minute, 0, 0); err != nil {
		t.Fatal(err)
	}
	return id
}

// wantFree checks that nobody holds name and that a fresh Lock gets it.
func (h *harness) wantFree(t *testing.T, name string) {
	t.Helper()
	if info := h.held(t, name); info.Held {
		t.Fatalf("lock %q is held after the failed Lock: %+v", name, info)
	}
	h.faulty.Clear()
	g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: name, TTL: time.Minute})
	if err != nil || !g.Acquired {
		t.Fatalf("Lock after the fault cleared: %+v, %v; want acquired", g, err)
	}
}

func TestLockStoreFailureLeavesNothingHeld(t *testing.T) {
	for _, tc := range []struct {
		name           string
		fault          storetest.Fault
		wait           time.Duration
		session        bool
		applied        bool  // the inner store granted the lock before the fault
		wantErr        error // errors.Is
		notUnavailable bool  // and the error must not be ErrUnavailable
	}{
		{name: "fail after applying", fault: storetest.Fault{FailAfter: true}, applied: true, wantErr: store.ErrUnavailable},
		{name: "fail after applying, waiting", fault: storetest.Fault{FailAfter: true}, wait: time.Second, applied: true, wantErr: store.ErrUnavailable},
		{name: "fail after applying, session", fault: storetest.Fault{FailAfter: true}, session: true, applied: true, wantErr: store.ErrUnavailable},
		{name: "fail after applying, session, waiting", fault: storetest.Fault{FailAfter: true}, session: true, wait: time.Second, applied: true, wantErr: store.ErrUnavailable},
		{name: "fail", fault: storetest.Fault{Fail: true}, wantErr: store.ErrUnavailable},
		{name: "fail, waiting", fault: storetest.Fault{Fail: true}, wait: time.Second, wantErr: store.ErrUnavailable},
		{name: "fail, session", fault: storetest.Fault{Fail: true}, session: true, wantErr: store.ErrUnavailable},
		{name: "fail after applying with cancellation", fault: storetest.Fault{FailAfter: true, Err: context.Canceled}, applied: true, wantErr: context.Canceled, notUnavailable: true},
		{name: "slow until the deadline", fault: storetest.Fault{Delay: -1}, wantErr: context.DeadlineExceeded, notUnavailable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			req := lock.Request{NS: ns, Name: "a", Owner: "me", Wait: tc.wait}
			if tc.session {
				req.SessionID = h.session(t)
			} else {
				req.TTL = time.Minute
			}
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			h.faulty.Set("AcquireHold", tc.fault)
			g, err := h.svc.Lock(ctx, req)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Lock: %+v, %v; want error %v", g, err, tc.wantErr)
			}
			if tc.notUnavailable && errors.Is(err, store.ErrUnavailable) {
				t.Errorf("err = %v is ErrUnavailable", err)
			}
			if g != (lock.Grant{}) {
				t.Errorf("grant with an error = %+v, want zero (no token)", g)
			}
			if n := h.faulty.Calls("AbandonHold"); n != 1 {
				t.Errorf("AbandonLock called %d times, want 1 (the clean-up by token)", n)
			}
			if tc.session {
				// The lock left the session's set too: closing the session
				// releases nothing.
				names, err := h.mem.CloseSession(t.Context(), store.SessionRef{ID: store.Scope(ns, req.SessionID)})
				if err != nil || len(names) != 0 {
					t.Errorf("CloseSession = %q, %v; want no locks", names, err)
				}
			}
			if !tc.session && tc.applied {
				if n := h.mem.Len(); n != 0 {
					t.Errorf("the store holds %d records after the clean-up, want 0", n)
				}
			}
			h.wantFree(t, "a")
		})
	}
}

// TestLockUncertainAfterWaiting: the failing AcquireLock is a retry after a
// wake-up, not the first try.
func TestLockUncertainAfterWaiting(t *testing.T) {
	h := newHarness(t)
	holder, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "holder", TTL: time.Minute})
	if err != nil || !holder.Acquired {
		t.Fatalf("holder: %+v, %v", holder, err)
	}
	type result struct {
		g   lock.Grant
		err error
	}
	out := make(chan result, 1)
	go func() {
		g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "waiter", TTL: time.Minute, Wait: 30 * time.Second})
		out <- result{g, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for h.faulty.Calls("AcquireHold") < 2 { // the holder's and the waiter's first try
		if time.Now().After(deadline) {
			t.Fatal("the waiter never tried")
		}
		time.Sleep(time.Millisecond)
	}
	h.faulty.FailAfter("AcquireHold")
	if ok, _, err := h.svc.Release(t.Context(), ns, "a", holder.Token); err != nil || !ok {
		t.Fatalf("holder's Release: %v, %v", ok, err)
	}
	var r result
	select {
	case r = <-out:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not return after the release")
	}
	if !errors.Is(r.err, store.ErrUnavailable) {
		t.Fatalf("waiter: %+v, %v; want ErrUnavailable", r.g, r.err)
	}
	h.wantFree(t, "a")
}

func TestLockSessionNotFound(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session func(t *testing.T, h *harness) string
	}{
		{"unknown", func(*testing.T, *harness) string { return token.New() }},
		{"expired", func(t *testing.T, h *harness) string {
			id := token.New()
			if _, err := h.mem.CreateSession(t.Context(), store.Scope(ns, id), time.Second, 0, 0); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(2 * time.Second)
			return id
		}},
		{"in another namespace", func(t *testing.T, h *harness) string {
			id := token.New()
			if _, err := h.mem.CreateSession(t.Context(), store.Scope("other", id), time.Minute, 0, 0); err != nil {
				t.Fatal(err)
			}
			return id
		}},
	} {
		for _, wait := range []time.Duration{0, time.Second} {
			t.Run(tc.name+"/wait "+wait.String(), func(t *testing.T) {
				h := newHarness(t)
				g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", SessionID: tc.session(t, h), Wait: wait})
				if !errors.Is(err, store.ErrSessionNotFound) || errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("Lock: %+v, %v; want ErrSessionNotFound", g, err)
				}
				if n := h.faulty.Calls("AbandonHold"); n != 0 {
					t.Errorf("AbandonLock called %d times after ErrSessionNotFound, want 0", n)
				}
				if info := h.held(t, "a"); info.Held {
					t.Errorf("lock held: %+v", info)
				}
			})
		}
	}
}

// TestLockCanceledWaiterLeavesHolder: the clean-up after a cancelled wait
// releases by the waiter's own token, so it never touches the holder's lock.
func TestLockCanceledWaiterLeavesHolder(t *testing.T) {
	h := newHarness(t)
	holder, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "holder", TTL: time.Minute})
	if err != nil || !holder.Acquired {
		t.Fatalf("holder: %+v, %v", holder, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = h.svc.Lock(ctx, lock.Request{NS: ns, Name: "a", Owner: "waiter", TTL: time.Minute, Wait: 30 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter: %v, want context.DeadlineExceeded", err)
	}
	if n := h.faulty.Calls("AbandonHold"); n != 1 {
		t.Errorf("AbandonLock called %d times, want 1 (the clean-up)", n)
	}
	info := h.held(t, "a")
	if !info.Held || info.Owner != "holder" || info.Fence != holder.Fence {
		t.Fatalf("after the waiter's clean-up: %+v; want still held by holder with fence %d", info, holder.Fence)
	}
	if ok, _, err := h.svc.Release(t.Context(), ns, "a", holder.Token); err != nil || !ok {
		t.Fatalf("holder's Release: %v, %v; want released", ok, err)
	}
}

// TestLockFailedCleanUp: when the clean-up fails too, Lock still reports the
// acquire's failure; the orphaned lease then ends with its TTL.
func TestLockFailedCleanUp(t *testing.T) {
	h := newHarness(t)
	h.faulty.FailAfter("AcquireHold")
	h.faulty.Fail("AbandonHold")
	_, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", TTL: time.Second})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Lock: %v, want ErrUnavailable", err)
	}
	h.clock.Advance(time.Second)
	h.wantFree(t, "a")
}

func TestLockNotAcquiredIsNotAnError(t *testing.T) {
	h := newHarness(t)
	holder, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "holder", TTL: time.Minute})
	if err != nil || !holder.Acquired || !token.Valid(holder.Token) || holder.Fence == 0 {
		t.Fatalf("holder: %+v, %v", holder, err)
	}
	g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "other", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if g.Acquired || g.Token != "" || g.Fence != 0 || g.Holder != "holder" || g.TTL != time.Minute {
		t.Fatalf("contended Lock: %+v; want not acquired, holder %q with 1m left", g, "holder")
	}
	if n := h.faulty.Calls("AbandonHold"); n != 0 {
		t.Errorf("AbandonLock called %d times for a plain contention, want 0", n)
	}
}

// TestUncertainGrantCleanedUpInTheBackground: when the clean-up of an
// uncertain grant cannot reach the store either, it goes on trying in the
// background until the store answers, so that the lock is released long
// before its lease (here an hour) would end it. (Before, one try was all:
// the lock stayed held for its whole TTL, or, session-bound, for as long as
// the session lived.)
func TestUncertainGrantCleanedUpInTheBackground(t *testing.T) {
	for _, session := range []bool{false, true} {
		t.Run(map[bool]string{false: "lease", true: "session"}[session], func(t *testing.T) {
			c := clock.NewFake(time.Unix(1_800_000_000, 0))
			mem := memory.New(memory.Options{Clock: c})
			f := storetest.NewFaulty(mem)
			drain := make(chan struct{})
			queues := waiter.NewQueues(f, f, drain)
			svc := lock.New(f, queues, c, lock.DefaultConfig(), drain)
			t.Cleanup(func() { close(drain); queues.Close(); svc.Wait(); _ = f.Close() })
			h := &harness{svc: svc, mem: mem, faulty: f, clock: c}
			req := lock.Request{NS: ns, Name: "a", Owner: "me"}
			if session {
				req.SessionID = h.session(t)
			} else {
				req.TTL = time.Hour
			}
			f.Set("AcquireHold", storetest.Fault{FailAfter: true})
			f.Set("AbandonHold", storetest.Fault{Fail: true})
			if _, err := svc.Lock(t.Context(), req); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("Lock = %v, want ErrUnavailable", err)
			}
			if !h.held(t, "a").Held {
				t.Fatal("the uncertain grant is not in the store; the test tests nothing")
			}
			deadline := time.Now().Add(5 * time.Second)
			for f.Calls("AbandonHold") < 3 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := f.Calls("AbandonHold"); n < 3 {
				t.Fatalf("AbandonLock tried %d times in 5s while the store was unreachable, want retries", n)
			}
			if !h.held(t, "a").Held {
				t.Fatal("released while every AbandonLock failed")
			}
			f.Clear() // the store is back
			for h.held(t, "a").Held && time.Now().Before(deadline.Add(5*time.Second)) {
				time.Sleep(10 * time.Millisecond)
			}
			if info := h.held(t, "a"); info.Held {
				t.Fatalf("the uncertain grant is still held after the store came back: %+v", info)
			}
			svc.Wait() // the clean-up ended once it was done, before the drain
		})
	}
}
