package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/validate"
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
	queues := hold.NewWaiters(f, f, drain)
	svc := lock.New(f, queues, c, lock.DefaultConfig(), drain)
	t.Cleanup(func() { close(drain); queues.Close(); svc.Wait(); _ = f.Close() })
	return &harness{svc: svc, mem: mem, faulty: f, clock: c}
}

// held reports the inner store's view of lock name, past every fault.
func (h *harness) held(t *testing.T, name string) store.HoldInfo {
	t.Helper()
	info, err := h.mem.GetHolds(t.Context(), store.HoldLock, store.Scope(ns, name))
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
			if g != (hold.Grant{}) {
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
// wake-up, not the first try. The release is another instance's (the store's
// own ReleaseLock, which hands nothing off), so that it wakes the waiter.
func TestLockUncertainAfterWaiting(t *testing.T) {
	h := newHarness(t)
	holder, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "holder", TTL: time.Minute})
	if err != nil || !holder.Acquired {
		t.Fatalf("holder: %+v, %v", holder, err)
	}
	type result struct {
		g   hold.Grant
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
	if rel, err := h.faulty.ReleaseHold(t.Context(), store.HoldLock, store.Scope(ns, "a"), holder.Token, ""); err != nil || !rel.Released {
		t.Fatalf("holder's release: %+v, %v", rel, err)
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
			queues := hold.NewWaiters(f, f, drain)
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

// TestLockShared: shared holds coexist, each with its own token and a
// greater fence; an exclusive request waits for all of them, and a shared
// one that comes after a waiting exclusive one waits behind it.
func TestLockShared(t *testing.T) {
	h := newHarness(t)
	r1, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "r1", TTL: time.Minute, Shared: true})
	if err != nil || !r1.Acquired {
		t.Fatalf("first shared: %+v, %v", r1, err)
	}
	r2, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "r2", TTL: time.Minute, Shared: true})
	if err != nil || !r2.Acquired || r2.Token == r1.Token || r2.Fence <= r1.Fence {
		t.Fatalf("second shared: %+v, %v; want acquired with its own token and a greater fence than %d", r2, err, r1.Fence)
	}
	if g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "w", TTL: time.Minute}); err != nil || g.Acquired {
		t.Fatalf("exclusive beside shared holders: %+v, %v; want not acquired", g, err)
	}
	type result struct {
		g   hold.Grant
		err error
	}
	writer := make(chan result, 1)
	go func() {
		g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "w", TTL: time.Minute, Wait: 30 * time.Second})
		writer <- result{g, err}
	}()
	waitFor(t, "the writer's ticket", func() bool { return h.held(t, "a").Waiters == 1 })
	// A reader now waits behind the writer: writers are not starved.
	if g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "r3", TTL: time.Minute, Shared: true}); err != nil || g.Acquired {
		t.Fatalf("shared behind a waiting exclusive: %+v, %v; want not acquired", g, err)
	}
	info, err := h.svc.Get(t.Context(), ns, "a")
	if err != nil || len(info.Holders) != 2 || info.Waiters != 1 || !info.Holders[0].Shared || info.Holders[0].Owner != "r1" || info.Holders[1].Owner != "r2" {
		t.Fatalf("Get: %+v, %v; want r1 and r2 shared, one waiter", info, err)
	}
	for _, g := range []hold.Grant{r1, r2} {
		if ok, _, err := h.svc.Release(t.Context(), ns, "a", g.Token); err != nil || !ok {
			t.Fatalf("Release: %v, %v", ok, err)
		}
	}
	r := <-writer
	if r.err != nil || !r.g.Acquired || r.g.Fence <= r2.Fence || !r.g.Contended {
		t.Fatalf("writer: %+v, %v; want acquired after the readers, contended", r.g, r.err)
	}
}

// TestLockSharedHoldersCapped: lock.max_shared_holders reaches the store.
func TestLockSharedHoldersCapped(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	mem := memory.New(memory.Options{Clock: c})
	drain := make(chan struct{})
	queues := hold.NewWaiters(mem, mem, drain)
	cfg := lock.DefaultConfig()
	cfg.MaxSharedHolders = 2
	svc := lock.New(mem, queues, c, cfg, drain)
	t.Cleanup(func() { close(drain); queues.Close(); svc.Wait(); _ = mem.Close() })
	for i, want := range []bool{true, true, false} {
		g, err := svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", TTL: time.Minute, Shared: true})
		if err != nil || g.Acquired != want {
			t.Fatalf("shared %d: %+v, %v; want acquired %v", i, g, err, want)
		}
	}
}

// TestLockWaitersInArrivalOrder: waiting Lock calls are granted in the
// order they came, and a waiter's ticket is gone when it gives up.
func TestLockWaitersInArrivalOrder(t *testing.T) {
	h := newHarness(t)
	holder, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", TTL: time.Minute})
	if err != nil || !holder.Acquired {
		t.Fatal(holder, err)
	}
	const n = 8
	order := make(chan int, n)
	errs := make(chan error, n)
	before := h.faulty.Calls("AcquireHold")
	for i := range n {
		go func() {
			g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "w", TTL: time.Minute, Wait: 30 * time.Second})
			if err != nil || !g.Acquired {
				errs <- fmt.Errorf("waiter %d: %+v, %v", i, g, err)
				return
			}
			order <- i
			if _, _, err := h.svc.Release(context.Background(), ns, "a", g.Token); err != nil {
				errs <- err
			}
			errs <- nil
		}()
		waitFor(t, "the waiter's ticket", func() bool { return h.held(t, "a").Waiters == i+1 })
	}
	if _, _, err := h.svc.Release(t.Context(), ns, "a", holder.Token); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if got := <-order; got != i {
			t.Errorf("grant %d went to waiter %d", i, got)
		}
	}
	// An exclusive grant is Full (waiter.Result): no try after it that
	// cannot succeed, so a waiter costs its first try and its grant (the
	// slack: a fallback round, if the test is slowed down by a second).
	if tries := h.faulty.Calls("AcquireHold") - before; tries > 2*n+2 {
		t.Errorf("%d AcquireLock calls for %d waiters, want at most %d", tries, n, 2*n+2)
	}
	// A waiter that gives up leaves no ticket behind.
	holder, _ = h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", TTL: time.Minute})
	if g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", TTL: time.Minute, Wait: 20 * time.Millisecond}); err != nil || g.Acquired {
		t.Fatalf("waiter that times out: %+v, %v", g, err)
	}
	if w := h.held(t, "a").Waiters; w != 0 {
		t.Errorf("%d tickets after the waiter gave up, want 0", w)
	}
	_ = holder
}

func TestCheckFence(t *testing.T) {
	h := newHarness(t)
	g, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", TTL: time.Minute})
	if err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	for _, tc := range []struct {
		ns, name string
		fence    uint64
		want     bool
	}{
		{ns, "a", g.Fence, true},
		{ns, "a", g.Fence + 1, false},
		{ns, "a", g.Fence - 1, false},
		{ns, "b", g.Fence, false},
		{"other", "a", g.Fence, false},
	} {
		if ok, err := h.svc.CheckFence(t.Context(), tc.ns, tc.name, tc.fence); err != nil || ok != tc.want {
			t.Errorf("CheckFence(%q, %q, %d) = %v, %v; want %v", tc.ns, tc.name, tc.fence, ok, err, tc.want)
		}
	}
	if _, _, err := h.svc.Release(t.Context(), ns, "a", g.Token); err != nil {
		t.Fatal(err)
	}
	if ok, err := h.svc.CheckFence(t.Context(), ns, "a", g.Fence); err != nil || ok {
		t.Errorf("CheckFence after the release = %v, %v; want false", ok, err)
	}
}

// TestBadRequests: every bad field is INVALID_ARGUMENT naming it, before
// any store call.
func TestBadRequests(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("x", lock.DefaultConfig().MaxNameBytes+1)
	for _, tc := range []struct {
		field string
		call  func() error
	}{
		{"name", func() error { _, err := h.svc.Lock(t.Context(), lock.Request{NS: ns}); return err }},
		{"name", func() error { _, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: long}); return err }},
		{"owner", func() error {
			_, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Owner: "a\u202e"})
			return err
		}},
		{"session_id", func() error {
			_, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", SessionID: "nope"})
			return err
		}},
		{"ttl", func() error {
			_, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", SessionID: token.New(), TTL: time.Second})
			return err
		}},
		{"ttl", func() error {
			_, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", TTL: 2 * time.Hour})
			return err
		}},
		{"max_hold", func() error {
			_, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", MaxHold: 48 * time.Hour})
			return err
		}},
		{"wait", func() error { _, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Wait: -1}); return err }},
		{"wait", func() error {
			_, err := h.svc.Lock(t.Context(), lock.Request{NS: ns, Name: "a", Wait: time.Hour})
			return err
		}},
		{"fence", func() error { _, err := h.svc.CheckFence(t.Context(), ns, "a", 0); return err }},
		{"name", func() error { _, err := h.svc.CheckFence(t.Context(), ns, "", 1); return err }},
		{"name", func() error { _, err := h.svc.Get(t.Context(), ns, ""); return err }},
		{"token", func() error { _, _, err := h.svc.Release(t.Context(), ns, "a", "x"); return err }},
		{"ttl", func() error { _, err := h.svc.Renew(t.Context(), ns, "a", token.New(), 0); return err }},
	} {
		before := h.faulty.CallCounts()
		err := tc.call()
		var fe *validate.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("err = %v, want a FieldError for %q", err, tc.field)
		}
		if made := h.faulty.CallsSince(before); len(made) != 0 {
			t.Errorf("%s: store calls %v before the check", tc.field, made)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
