package storetest

// Faulty is a fault-injecting store for tests of the layers above the store
// (the domain packages and the server): it passes every call through to an
// inner store.Store except the calls of methods a test has given a Fault.
//
// Concurrency: the faults and call counts are guarded by one mutex, held only
// to look up (and count down) a method's fault, never across a call of the
// inner store or a delay, so that a slow method does not slow the others.

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// ErrInjected is the error a Fault without an Err of its own returns when it
// fails a call. It wraps store.ErrUnavailable: to the layers above it is an
// unreachable store, and the outcome of the call is unknown.
var ErrInjected = fmt.Errorf("storetest: injected fault: %w", store.ErrUnavailable)

// Fault says what a faulty method does instead of simply calling the inner
// store. The steps, in order:
//
//  1. Delay > 0: block for Delay; Delay < 0: block until ctx is done. If ctx
//     ends first, the call returns ctx.Err() without reaching the inner
//     store, as a store that honours cancellation would.
//  2. Fail: return Err without calling the inner store (the request was
//     lost on its way).
//  3. Otherwise call the inner store; then, if FailAfter, discard its answer
//     and return Err (the request was applied but the answer was lost: the
//     uncertain outcome).
//
// A zero Fault passes calls through unchanged. Fail and FailAfter together
// are FailAfter.
type Fault struct {
	Delay     time.Duration
	Fail      bool
	FailAfter bool
	// Err is what a failing call returns; nil means ErrInjected.
	Err error
	// Times > 0 limits the fault to the method's next Times calls, after
	// which the method passes calls through again; 0 means until cleared.
	Times int
}

// Faulty wraps a store.Store and injects the faults a test sets per method.
// Methods are named as in store.Store ("AcquireHold", "Allow", "Subscribe",
// ...). Close reaches the inner store's Close (subject to its fault, with a
// background context), so a test that hands a Faulty to code that closes its
// store closes the inner one too.
//
// The zero value is not usable; call NewFaulty.
type Faulty struct {
	inner store.Store

	mu     sync.Mutex
	faults map[string]Fault
	calls  map[string]int
}

var _ store.Store = (*Faulty)(nil)

// storeMethods is the set of store.Store's method names, which Set checks
// against so that a misspelt method does not silently inject nothing.
var storeMethods = func() map[string]bool {
	t := reflect.TypeFor[store.Store]()
	m := make(map[string]bool, t.NumMethod())
	for i := range t.NumMethod() {
		m[t.Method(i).Name] = true
	}
	return m
}()

// NewFaulty returns a Faulty around inner with no faults set.
func NewFaulty(inner store.Store) *Faulty {
	return &Faulty{inner: inner, faults: make(map[string]Fault), calls: make(map[string]int)}
}

// Inner returns the wrapped store, so that a test can look at the state
// behind the faults.
func (f *Faulty) Inner() store.Store { return f.inner }

// Set gives method the fault, replacing any it had. It panics if method is
// not a method of store.Store: that is a mistake in the test.
func (f *Faulty) Set(method string, fault Fault) {
	if !storeMethods[method] {
		panic(fmt.Sprintf("storetest.Faulty: %q is not a method of store.Store", method))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[method] = fault
}

// Fail makes every call of the methods fail with ErrInjected, without
// reaching the inner store.
func (f *Faulty) Fail(methods ...string) {
	for _, m := range methods {
		f.Set(m, Fault{Fail: true})
	}
}

// FailWith makes every call of method fail with err, without reaching the
// inner store.
func (f *Faulty) FailWith(method string, err error) { f.Set(method, Fault{Fail: true, Err: err}) }

// FailAfter makes every call of the methods reach the inner store and then
// fail with ErrInjected: the write happened, the answer was lost.
func (f *Faulty) FailAfter(methods ...string) {
	for _, m := range methods {
		f.Set(m, Fault{FailAfter: true})
	}
}

// Slow makes every call of method block for d (d < 0: until its ctx is done)
// before it reaches the inner store.
func (f *Faulty) Slow(method string, d time.Duration) { f.Set(method, Fault{Delay: d}) }

// Clear removes the faults of the methods, or of every method if none is
// named.
func (f *Faulty) Clear(methods ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(methods) == 0 {
		clear(f.faults)
		return
	}
	for _, m := range methods {
		delete(f.faults, m)
	}
}

// Calls reports how many times method has been called on f, faulted or not.
func (f *Faulty) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// CallCounts is how many times each method has been called so far.
func (f *Faulty) CallCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

// CallsSince lists the calls made since before (from CallCounts), e.g.
// "Enqueue x1", sorted.
func (f *Faulty) CallsSince(before map[string]int) []string {
	var made []string
	for name, n := range f.CallCounts() {
		if d := n - before[name]; d != 0 {
			made = append(made, fmt.Sprintf("%s x%d", name, d))
		}
	}
	sort.Strings(made)
	return made
}

// take counts a call of method and returns its fault, counting down Times.
func (f *Faulty) take(method string) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	fault, ok := f.faults[method]
	if !ok {
		return Fault{}, false
	}
	if fault.Times > 0 {
		if fault.Times == 1 {
			delete(f.faults, method)
		} else {
			g := fault
			g.Times--
			f.faults[method] = g
		}
	}
	return fault, true
}

// do runs one call of method through its fault. discard, if not nil, is
// given a result that a FailAfter fault throws away (to close it).
func do[T any](ctx context.Context, f *Faulty, method string, call func() (T, error), discard func(T)) (T, error) {
	var zero T
	fault, ok := f.take(method)
	if !ok {
		return call()
	}
	if fault.Delay != 0 {
		if err := delay(ctx, fault.Delay); err != nil {
			return zero, err
		}
	}
	err := fault.Err
	if err == nil {
		err = ErrInjected
	}
	switch {
	case fault.FailAfter:
		v, callErr := call()
		if callErr == nil && discard != nil {
			discard(v)
		}
		return zero, err
	case fault.Fail:
		return zero, err
	}
	return call()
}

// delay blocks for d (d < 0: until ctx is done) and returns ctx.Err() if ctx
// ends first.
func delay(ctx context.Context, d time.Duration) error {
	if d < 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do0 is do for methods that return only an error.
func do0(ctx context.Context, f *Faulty, method string, call func() error) error {
	_, err := do(ctx, f, method, func() (struct{}, error) { return struct{}{}, call() }, nil)
	return err
}

// CreateSession implements store.Sessions.
func (f *Faulty) CreateSession(ctx context.Context, id string, ttl time.Duration, max int, lockDelay time.Duration) (store.SessionState, error) {
	return do(ctx, f, "CreateSession", func() (store.SessionState, error) { return f.inner.CreateSession(ctx, id, ttl, max, lockDelay) }, nil)
}

// ResumeSession implements store.Sessions.
func (f *Faulty) ResumeSession(ctx context.Context, id string, ttl time.Duration) (store.SessionState, error) {
	return do(ctx, f, "ResumeSession", func() (store.SessionState, error) { return f.inner.ResumeSession(ctx, id, ttl) }, nil)
}

// KeepAliveSession implements store.Sessions.
func (f *Faulty) KeepAliveSession(ctx context.Context, ref store.SessionRef, ttl time.Duration) (store.SessionState, error) {
	return do(ctx, f, "KeepAliveSession", func() (store.SessionState, error) { return f.inner.KeepAliveSession(ctx, ref, ttl) }, nil)
}

// CheckSession implements store.Sessions.
func (f *Faulty) CheckSession(ctx context.Context, ref store.SessionRef) (store.SessionState, error) {
	return do(ctx, f, "CheckSession", func() (store.SessionState, error) { return f.inner.CheckSession(ctx, ref) }, nil)
}

// CloseSession implements store.Sessions.
func (f *Faulty) CloseSession(ctx context.Context, ref store.SessionRef) ([]store.ReleasedHold, error) {
	return do(ctx, f, "CloseSession", func() ([]store.ReleasedHold, error) { return f.inner.CloseSession(ctx, ref) }, nil)
}

// Allow implements store.Limits.
func (f *Faulty) Allow(ctx context.Context, key string, limit store.Limit, cost int64, peek bool) (store.Decision, error) {
	return do(ctx, f, "Allow", func() (store.Decision, error) { return f.inner.Allow(ctx, key, limit, cost, peek) }, nil)
}

// AllowAll implements store.Limits.
func (f *Faulty) AllowAll(ctx context.Context, key string, limits []store.Limit, cost int64, peek bool) (store.Decision, error) {
	return do(ctx, f, "AllowAll", func() (store.Decision, error) { return f.inner.AllowAll(ctx, key, limits, cost, peek) }, nil)
}

// CountHits implements store.Limits.
func (f *Faulty) CountHits(ctx context.Context, hits []store.Hit) ([]store.HitCount, error) {
	return do(ctx, f, "CountHits", func() ([]store.HitCount, error) { return f.inner.CountHits(ctx, hits) }, nil)
}

// BeginIdempotent implements store.Idempotency.
func (f *Faulty) BeginIdempotent(ctx context.Context, req store.BeginIdempotent) (store.IdemState, error) {
	return do(ctx, f, "BeginIdempotent", func() (store.IdemState, error) { return f.inner.BeginIdempotent(ctx, req) }, nil)
}

// FinishIdempotent implements store.Idempotency.
func (f *Faulty) FinishIdempotent(ctx context.Context, req store.FinishIdempotent) error {
	return do0(ctx, f, "FinishIdempotent", func() error { return f.inner.FinishIdempotent(ctx, req) })
}

// ExtendIdempotent implements store.Idempotency.
func (f *Faulty) ExtendIdempotent(ctx context.Context, key, ownerToken string, ttl time.Duration) (time.Time, error) {
	return do(ctx, f, "ExtendIdempotent", func() (time.Time, error) { return f.inner.ExtendIdempotent(ctx, key, ownerToken, ttl) }, nil)
}

// Enqueue implements store.Queues.
func (f *Faulty) Enqueue(ctx context.Context, queue string, msg store.NewMessage) (store.Enqueued, error) {
	return do(ctx, f, "Enqueue", func() (store.Enqueued, error) { return f.inner.Enqueue(ctx, queue, msg) }, nil)
}

// Claim implements store.Queues.
func (f *Faulty) Claim(ctx context.Context, queue string, req store.Claim) (store.Claimed, error) {
	return do(ctx, f, "Claim", func() (store.Claimed, error) { return f.inner.Claim(ctx, queue, req) }, nil)
}

// Ack implements store.Queues.
func (f *Faulty) Ack(ctx context.Context, queue string, receipts []string) ([]bool, error) {
	return do(ctx, f, "Ack", func() ([]bool, error) { return f.inner.Ack(ctx, queue, receipts) }, nil)
}

// Nack implements store.Queues.
func (f *Faulty) Nack(ctx context.Context, queue, receipt string, delay time.Duration) (store.Nacked, error) {
	return do(ctx, f, "Nack", func() (store.Nacked, error) { return f.inner.Nack(ctx, queue, receipt, delay) }, nil)
}

// ExtendClaim implements store.Queues.
func (f *Faulty) ExtendClaim(ctx context.Context, queue, receipt string, visibility time.Duration) (time.Time, error) {
	return do(ctx, f, "ExtendClaim", func() (time.Time, error) { return f.inner.ExtendClaim(ctx, queue, receipt, visibility) }, nil)
}

// Stats implements store.Queues.
func (f *Faulty) Stats(ctx context.Context, queue string) (store.QueueStats, error) {
	return do(ctx, f, "Stats", func() (store.QueueStats, error) { return f.inner.Stats(ctx, queue) }, nil)
}

// Redrive implements store.Queues.
func (f *Faulty) Redrive(ctx context.Context, queue string, max int) (int, error) {
	return do(ctx, f, "Redrive", func() (int, error) { return f.inner.Redrive(ctx, queue, max) }, nil)
}

// RedriveIDs implements store.Queues.
func (f *Faulty) RedriveIDs(ctx context.Context, queue string, ids []string) (int, error) {
	return do(ctx, f, "RedriveIDs", func() (int, error) { return f.inner.RedriveIDs(ctx, queue, ids) }, nil)
}

// ListDead implements store.Queues.
func (f *Faulty) ListDead(ctx context.Context, queue string, after store.DeadPos, max, preview int) ([]store.DeadLetter, error) {
	return do(ctx, f, "ListDead", func() ([]store.DeadLetter, error) { return f.inner.ListDead(ctx, queue, after, max, preview) }, nil)
}

// PurgeDead implements store.Queues.
func (f *Faulty) PurgeDead(ctx context.Context, queue string, max int) (int64, int64, error) {
	type res struct{ purged, remaining int64 }
	r, err := do(ctx, f, "PurgeDead", func() (res, error) {
		p, rem, err := f.inner.PurgeDead(ctx, queue, max)
		return res{p, rem}, err
	}, nil)
	return r.purged, r.remaining, err
}

// PartitionName implements store.Queues: the inner store's (a name, not a
// call).
func (f *Faulty) PartitionName(queue string, p, k int) string {
	return f.inner.PartitionName(queue, p, k)
}

// QueueSettings implements store.Queues.
func (f *Faulty) QueueSettings(ctx context.Context, queue string) (store.QueueSettings, error) {
	return do(ctx, f, "QueueSettings", func() (store.QueueSettings, error) { return f.inner.QueueSettings(ctx, queue) }, nil)
}

// PauseQueue implements store.Queues.
func (f *Faulty) PauseQueue(ctx context.Context, queue string, paused bool) (store.QueueSettings, error) {
	return do(ctx, f, "PauseQueue", func() (store.QueueSettings, error) { return f.inner.PauseQueue(ctx, queue, paused) }, nil)
}

// ConfigureQueue implements store.Queues.
func (f *Faulty) ConfigureQueue(ctx context.Context, queue string, c store.QueueSettings) (store.QueueSettings, error) {
	return do(ctx, f, "ConfigureQueue", func() (store.QueueSettings, error) { return f.inner.ConfigureQueue(ctx, queue, c) }, nil)
}

// PutSchedule implements store.Schedules.
func (f *Faulty) PutSchedule(ctx context.Context, ns string, sc store.Schedule, max int) error {
	_, err := do(ctx, f, "PutSchedule", func() (struct{}, error) { return struct{}{}, f.inner.PutSchedule(ctx, ns, sc, max) }, nil)
	return err
}

// DeleteSchedule implements store.Schedules.
func (f *Faulty) DeleteSchedule(ctx context.Context, ns, queue, name string) (bool, error) {
	return do(ctx, f, "DeleteSchedule", func() (bool, error) { return f.inner.DeleteSchedule(ctx, ns, queue, name) }, nil)
}

// ListSchedules implements store.Schedules.
func (f *Faulty) ListSchedules(ctx context.Context, ns, queue string) ([]store.Schedule, error) {
	return do(ctx, f, "ListSchedules", func() ([]store.Schedule, error) { return f.inner.ListSchedules(ctx, ns, queue) }, nil)
}

// SchedulePayload implements store.Schedules.
func (f *Faulty) SchedulePayload(ctx context.Context, ns, queue, name string) ([]byte, bool, error) {
	type r struct {
		p  []byte
		ok bool
	}
	got, err := do(ctx, f, "SchedulePayload", func() (r, error) {
		p, ok, err := f.inner.SchedulePayload(ctx, ns, queue, name)
		return r{p, ok}, err
	}, nil)
	return got.p, got.ok, err
}

// ScheduleNamespaces implements store.Schedules.
func (f *Faulty) ScheduleNamespaces(ctx context.Context) ([]string, error) {
	return do(ctx, f, "ScheduleNamespaces", func() ([]string, error) { return f.inner.ScheduleNamespaces(ctx) }, nil)
}

// ScheduleTicked implements store.Schedules.
func (f *Faulty) ScheduleTicked(ctx context.Context, ns, queue, name string, t time.Time) error {
	_, err := do(ctx, f, "ScheduleTicked", func() (struct{}, error) { return struct{}{}, f.inner.ScheduleTicked(ctx, ns, queue, name, t) }, nil)
	return err
}

// RecordQueueActivity implements store.QueueActivity.
func (f *Faulty) RecordQueueActivity(ctx context.Context, ns string, minute time.Time, counts map[string]store.QueueCounts) error {
	_, err := do(ctx, f, "RecordQueueActivity", func() (struct{}, error) {
		return struct{}{}, f.inner.RecordQueueActivity(ctx, ns, minute, counts)
	}, nil)
	return err
}

// QueueHistory implements store.QueueActivity.
func (f *Faulty) QueueHistory(ctx context.Context, ns, queue string, since time.Time) ([]store.QueueMinute, error) {
	return do(ctx, f, "QueueHistory", func() ([]store.QueueMinute, error) { return f.inner.QueueHistory(ctx, ns, queue, since) }, nil)
}

// ActiveQueues implements store.QueueActivity.
func (f *Faulty) ActiveQueues(ctx context.Context, ns string) ([]string, error) {
	return do(ctx, f, "ActiveQueues", func() ([]string, error) { return f.inner.ActiveQueues(ctx, ns) }, nil)
}

// PutPolicy implements store.Policies.
func (f *Faulty) PutPolicy(ctx context.Context, ns string, p store.StoredPolicy, max int) (bool, error) {
	return do(ctx, f, "PutPolicy", func() (bool, error) { return f.inner.PutPolicy(ctx, ns, p, max) }, nil)
}

// DeletePolicy implements store.Policies.
func (f *Faulty) DeletePolicy(ctx context.Context, ns, name string) (bool, error) {
	return do(ctx, f, "DeletePolicy", func() (bool, error) { return f.inner.DeletePolicy(ctx, ns, name) }, nil)
}

// ListPolicies implements store.Policies.
func (f *Faulty) ListPolicies(ctx context.Context, ns string) ([]store.StoredPolicy, error) {
	return do(ctx, f, "ListPolicies", func() ([]store.StoredPolicy, error) { return f.inner.ListPolicies(ctx, ns) }, nil)
}

// PolicyVersions implements store.Policies.
func (f *Faulty) PolicyVersions(ctx context.Context, known int64) (int64, map[string]int64, error) {
	type r struct {
		v   int64
		nss map[string]int64
	}
	got, err := do(ctx, f, "PolicyVersions", func() (r, error) {
		v, nss, err := f.inner.PolicyVersions(ctx, known)
		return r{v, nss}, err
	}, nil)
	return got.v, got.nss, err
}

// ReserveClaims implements store.Queues.
func (f *Faulty) ReserveClaims(ctx context.Context, queue string, tokens []string, hold time.Duration) (store.Reserved, error) {
	return do(ctx, f, "ReserveClaims", func() (store.Reserved, error) { return f.inner.ReserveClaims(ctx, queue, tokens, hold) }, nil)
}

// ReleaseClaims implements store.Queues.
func (f *Faulty) ReleaseClaims(ctx context.Context, queue string, tokens []string, unused bool) error {
	_, err := do(ctx, f, "ReleaseClaims", func() (struct{}, error) { return struct{}{}, f.inner.ReleaseClaims(ctx, queue, tokens, unused) }, nil)
	return err
}

// HoldReservations implements store.Queues.
func (f *Faulty) HoldReservations(ctx context.Context, queue string, tokens []string, hold time.Duration) error {
	_, err := do(ctx, f, "HoldReservations", func() (struct{}, error) { return struct{}{}, f.inner.HoldReservations(ctx, queue, tokens, hold) }, nil)
	return err
}

// Partitionings implements store.Queues.
func (f *Faulty) Partitionings(ctx context.Context, queue string, k int) ([]int, error) {
	return do(ctx, f, "Partitionings", func() ([]int, error) { return f.inner.Partitionings(ctx, queue, k) }, nil)
}

// Subscribe implements store.Subscriber. A FailAfter fault closes the
// subscription it throws away.
func (f *Faulty) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	return do(ctx, f, "Subscribe", func() (*store.Subscription, error) { return f.inner.Subscribe(ctx, topic) },
		func(s *store.Subscription) { s.Close() })
}

// Close closes the inner store, subject to Close's fault (with a background
// context: a Delay < 0 would block forever).
func (f *Faulty) Close() error {
	return do0(context.Background(), f, "Close", f.inner.Close)
}
