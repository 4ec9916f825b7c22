package client_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/internal/backendtest"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
)

// The tests run against an in-process coordd on the store of
// -coordd.backend (scripts/test.sh runs them on memory and on the
// Cluster); the examples against one on the memory store, started by
// TestMain.
var backend = flag.String("coordd.backend", "memory", "store of the tests: memory, redis (standalone) or cluster")

// exampleConn is the examples' connection (they have no testing.T).
var exampleConn *grpc.ClientConn

func TestMain(m *testing.M) {
	flag.Parse()
	st := memory.New(memory.Options{})
	conn, stop, err := servertest.Start(st, clock.Real{}, servertest.WithConfig(testConfig))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleConn = conn
	code := m.Run()
	stop()
	_ = st.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testConfig lets sessions live as short as 100ms, and has a policy of 3 an
// hour (a sliding log: no window boundary for a test to cross).
func testConfig(c *server.Config) {
	c.Session.MinTTL = 100 * time.Millisecond
	c.Policies = map[string]limiter.Policy{
		"three-an-hour": {Limit: store.Limit{Algorithm: store.SlidingLog, Limit: 3, Period: time.Hour}},
	}
}

// serve starts coordd on the test's backend and returns a connection.
func serve(t *testing.T) *grpc.ClientConn {
	t.Helper()
	st, _ := backendtest.Open(t, *backend, clock.Real{}, "")
	t.Cleanup(func() { _ = st.Close() })
	return servertest.Serve(t, st, clock.Real{}, servertest.WithConfig(testConfig))
}

func newSession(t *testing.T, cc grpc.ClientConnInterface, opts ...client.SessionOption) *client.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.NewSession(ctx, cc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func getLock(t *testing.T, cc grpc.ClientConnInterface, name string) *coordv1.GetLockResponse {
	t.Helper()
	resp, err := coordv1.NewLockServiceClient(cc).GetLock(ctxT(t, 5*time.Second), &coordv1.GetLockRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A session keeps its lock past several TTLs, and its Close releases it at
// once.
func TestSessionKeepsItsHoldsAndCloseReleasesThem(t *testing.T) {
	cc := serve(t)
	s := newSession(t, cc, client.WithTTL(300*time.Millisecond))
	m := client.NewMutex(s, "kept", client.HoldOptions{Owner: "me"})
	if err := m.Lock(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // more than 3 TTLs
	if got := getLock(t, cc, "kept"); !got.GetHeld() || got.GetFence() != m.Fence() || got.GetOwner() != "me" {
		t.Fatalf("after 3 TTLs GetLock = %v, want held at fence %d by me", got, m.Fence())
	}
	select {
	case <-m.Lost():
		t.Fatalf("lost: %v", m.Err())
	default:
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := getLock(t, cc, "kept"); got.GetHeld() {
		t.Fatalf("after Close GetLock = %v, want free", got)
	}
	<-m.Lost() // the session's end ends the hold
	if s.Err() != nil {
		t.Fatalf("after a confirmed Close Err = %v, want nil", s.Err())
	}
}

// Mutexes of 6 sessions, 15 rounds each: never two inside at once, and
// each grant's fence above every earlier one.
func TestMutexExcludes(t *testing.T) {
	cc := serve(t)
	var inside atomic.Int32
	var mu sync.Mutex
	var last uint64
	var wg sync.WaitGroup
	for i := range 6 {
		s := newSession(t, cc, client.WithTTL(2*time.Second))
		m := client.NewMutex(s, "excl", client.HoldOptions{Owner: strconv.Itoa(i)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := m.Lock(ctx)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				mu.Lock()
				if f := m.Fence(); f <= last {
					t.Errorf("fence %d after %d", f, last)
				} else {
					last = f
				}
				mu.Unlock()
				inside.Add(-1)
				if err := m.Unlock(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestTryLockAndShared(t *testing.T) {
	cc := serve(t)
	a, b, c := newSession(t, cc), newSession(t, cc), newSession(t, cc)
	ra, rb := client.NewSharedMutex(a, "rw", client.HoldOptions{}), client.NewSharedMutex(b, "rw", client.HoldOptions{})
	w := client.NewMutex(c, "rw", client.HoldOptions{})
	ctx := ctxT(t, 10*time.Second)
	if err := ra.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rb.TryLock(ctx); err != nil {
		t.Fatalf("a second shared holder: %v", err)
	}
	if err := w.TryLock(ctx); !errors.Is(err, client.ErrLocked) {
		t.Fatalf("exclusive TryLock under two shared holders = %v, want ErrLocked", err)
	}
	if got := getLock(t, cc, "rw"); len(got.GetHolders()) != 2 {
		t.Fatalf("GetLock = %v, want 2 holders", got)
	}
	for _, m := range []*client.Mutex{ra, rb} {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.TryLock(ctx); err != nil {
		t.Fatalf("exclusive TryLock on a free lock: %v", err)
	}
	if err := ra.Unlock(ctx); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Unlock of nothing held = %v, want ErrNotHeld", err)
	}
}

// A Lock longer than one call's wait (MaxWait) waits in several calls.
func TestLockWaitsPastMaxWait(t *testing.T) {
	cc := serve(t)
	a, b := newSession(t, cc), newSession(t, cc)
	ma := client.NewMutex(a, "long", client.HoldOptions{})
	mb := client.NewMutex(b, "long", client.HoldOptions{MaxWait: 150 * time.Millisecond})
	if err := ma.Lock(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(700*time.Millisecond, func() { _ = ma.Unlock(context.Background()) })
	if err := mb.Lock(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Lock past MaxWait: %v", err)
	}
	if mb.Fence() <= ma.Fence() {
		t.Fatalf("fence %d after %d", mb.Fence(), ma.Fence())
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := ma.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held lock with a short deadline = %v, want DeadlineExceeded", err)
	}
}

// Against a coordd whose limits.max_wait (200ms) is below MaxWait (the
// default 1m), Lock and Acquire wait in rounds of coordd's limit, learned
// from its first refusal, instead of failing INVALID_ARGUMENT.
func TestWaitsPastServersMaxWait(t *testing.T) {
	const limit = 200 * time.Millisecond
	st, _ := backendtest.Open(t, *backend, clock.Real{}, "")
	t.Cleanup(func() { _ = st.Close() })
	cc := servertest.Serve(t, st, clock.Real{}, servertest.WithConfig(testConfig), servertest.WithConfig(func(c *server.Config) {
		c.Lock.MaxWait, c.Semaphore.MaxWait, c.Election.MaxWait = limit, limit, limit
	}))
	a, b := newSession(t, cc), newSession(t, cc)
	for _, kind := range []string{"lock", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			var held, waiter interface {
				Fence() uint64
			}
			var take func(context.Context) error
			var release func(context.Context) error
			switch kind {
			case "lock":
				ma, mb := client.NewMutex(a, "short-limit", client.HoldOptions{}), client.NewMutex(b, "short-limit", client.HoldOptions{})
				if err := ma.Lock(ctxT(t, 5*time.Second)); err != nil {
					t.Fatal(err)
				}
				held, waiter, take, release = ma, mb, mb.Lock, ma.Unlock
			case "semaphore":
				ma, mb := client.NewSemaphore(a, "short-limit", 1, client.HoldOptions{}), client.NewSemaphore(b, "short-limit", 1, client.HoldOptions{})
				if err := ma.Acquire(ctxT(t, 5*time.Second)); err != nil {
					t.Fatal(err)
				}
				held, waiter, take, release = ma, mb, mb.Acquire, ma.Release
			}
			time.AfterFunc(3*limit, func() { _ = release(context.Background()) })
			start := time.Now()
			if err := take(ctxT(t, 10*time.Second)); err != nil {
				t.Fatalf("waiting %v past coordd's limits.max_wait of %v: %v", 3*limit, limit, err)
			}
			if took := time.Since(start); took < 2*limit {
				t.Errorf("granted after %v, before the holder released at %v", took, 3*limit)
			}
			if waiter.Fence() <= held.Fence() {
				t.Errorf("fence %d after %d", waiter.Fence(), held.Fence())
			}
		})
	}
}

// Limiter.Wait, Idempotent and a Worker, whose waits (1m, 1m, 20s) are
// above this coordd's limits.max_wait (200ms), wait in rounds of its limit
// instead of failing INVALID_ARGUMENT.
func TestUnsessionedWaitsPastServersMaxWait(t *testing.T) {
	const limit = 200 * time.Millisecond
	st, _ := backendtest.Open(t, *backend, clock.Real{}, "")
	t.Cleanup(func() { _ = st.Close() })
	cc := servertest.Serve(t, st, clock.Real{}, servertest.WithConfig(testConfig), servertest.WithConfig(func(c *server.Config) {
		c.Limiter.MaxWait, c.Idem.MaxWait, c.Queue.MaxWait = limit, limit, limit
	}))
	t.Run("limiter", func(t *testing.T) {
		l := client.NewInlineLimiter(cc, coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, 1, 3*limit, 0)
		ctx := ctxT(t, 10*time.Second)
		if err := l.Wait(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := l.Wait(ctx, "k", 1); err != nil {
			t.Fatalf("waiting %v for a token past coordd's limits.max_wait of %v: %v", 3*limit, limit, err)
		}
		if took := time.Since(start); took < 2*limit {
			t.Errorf("allowed after %v, before the bucket had a token again", took)
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		started, finish := make(chan struct{}), make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, err := client.Idempotent(ctxT(t, 10*time.Second), cc, "slow", "f", client.IdempotentOptions{}, func(context.Context) ([]byte, error) {
				close(started)
				<-finish
				return []byte("done"), nil
			})
			first <- err
		}()
		select {
		case <-started:
		case err := <-first:
			t.Fatalf("the first caller ended without running fn: %v", err)
		}
		time.AfterFunc(3*limit, func() { close(finish) })
		res, err := client.Idempotent(ctxT(t, 10*time.Second), cc, "slow", "f", client.IdempotentOptions{}, func(context.Context) ([]byte, error) {
			return nil, errors.New("ran twice")
		})
		if err != nil || string(res) != "done" {
			t.Fatalf("waiting %v for the first caller's outcome past coordd's limits.max_wait of %v: %q, %v", 3*limit, limit, res, err)
		}
		if err := <-first; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("worker", func(t *testing.T) {
		got := make(chan string, 1)
		wctx, stop := context.WithCancel(ctxT(t, 10*time.Second))
		defer stop()
		w := client.NewWorker(cc, "later", func(_ context.Context, m client.Message) error {
			got <- string(m.Payload)
			return nil
		}, client.WorkerOptions{})
		ran := make(chan error, 1)
		go func() { ran <- w.Run(wctx) }()
		time.Sleep(3 * limit) // the Worker's first Claim has been refused by now, if it is to be
		if _, err := coordv1.NewQueueServiceClient(cc).Enqueue(wctx, &coordv1.EnqueueRequest{Queue: "later", Payload: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if p != "m" {
				t.Errorf("payload %q", p)
			}
		case err := <-ran:
			t.Fatalf("Run ended under a coordd with limits.max_wait %v: %v", limit, err)
		case <-wctx.Done():
			t.Fatal("the message was not handled")
		}
		stop()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
	})
}

// A lock that reaches its max hold is reported lost, by name and reason,
// on the Mutex and on the Session, while the session lives on.
func TestLostOnMaxHold(t *testing.T) {
	cc := serve(t)
	s := newSession(t, cc, client.WithTTL(time.Second))
	m := client.NewMutex(s, "capped", client.HoldOptions{MaxHold: 300 * time.Millisecond})
	if err := m.Lock(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("not lost 5s after a 300ms max hold")
	}
	var lost *client.LostError
	if !errors.As(m.Err(), &lost) || lost.Hold.Reason != coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD || lost.Hold.Name != "capped" {
		t.Fatalf("Err = %v, want a max-hold loss of capped", m.Err())
	}
	select {
	case l := <-s.Lost():
		if l.Name != "capped" || l.Kind != coordv1.HoldKind_HOLD_KIND_LOCK || l.Fence != lost.Hold.Fence {
			t.Fatalf("Session.Lost = %v", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Session.Lost delivered nothing")
	}
	if s.Err() != nil {
		t.Fatalf("the session ended: %v", s.Err())
	}
	if err := m.Unlock(ctxT(t, 5*time.Second)); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Unlock after the loss = %v, want ErrNotHeld", err)
	}
}

// A session whose coordd goes away ends (Done) within its TTL by the local
// clock, and its holds with it.
func TestSessionEndsWithoutCoordd(t *testing.T) {
	st, _ := backendtest.Open(t, *backend, clock.Real{}, "")
	t.Cleanup(func() { _ = st.Close() })
	cc, stop, err := servertest.Start(st, clock.Real{}, servertest.WithConfig(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cc, client.WithTTL(500*time.Millisecond), client.WithResumeTimeout(100*time.Millisecond))
	m := client.NewMutex(s, "orphan", client.HoldOptions{})
	if err := m.Lock(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	stop()
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("session not over 5s after coordd went away")
	}
	if d := time.Since(stopped); d > 2*time.Second {
		t.Errorf("over %v after coordd went away, want within about the TTL (500ms)", d)
	}
	<-m.Lost()
	if s.Err() == nil || m.Err() == nil {
		t.Fatalf("Err = %v, %v; want why", s.Err(), m.Err())
	}
}

func TestSemaphore(t *testing.T) {
	cc := serve(t)
	var sems []*client.Semaphore
	for range 3 {
		sems = append(sems, client.NewSemaphore(newSession(t, cc), "pool", 2, client.HoldOptions{}))
	}
	ctx := ctxT(t, 10*time.Second)
	for _, s := range sems[:2] {
		if err := s.TryAcquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := sems[2].TryAcquire(ctx); !errors.Is(err, client.ErrLocked) {
		t.Fatalf("third permit of 2 = %v, want ErrLocked", err)
	}
	time.AfterFunc(200*time.Millisecond, func() { _ = sems[0].Release(context.Background()) })
	if err := sems[2].Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if sems[2].Fence() == 0 {
		t.Fatal("no fence")
	}
}

func TestElection(t *testing.T) {
	cc := serve(t)
	a, b := client.NewElection(newSession(t, cc), "lead", client.HoldOptions{}), client.NewElection(newSession(t, cc), "lead", client.HoldOptions{})
	ctx := ctxT(t, 15*time.Second)
	observed := a.Observe(ctx)
	if o := <-observed; o.HasLeader {
		t.Fatalf("first observation %+v, want no leader", o)
	}
	if err := a.Campaign(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if o := <-observed; !o.HasLeader || string(o.Leader.Value) != "a" || o.Leader.Fence != a.Fence() {
		t.Fatalf("observed %+v, want a at fence %d", o, a.Fence())
	}
	if err := a.Proclaim(ctx, []byte("a2")); err != nil {
		t.Fatal(err)
	}
	if o := <-observed; string(o.Leader.Value) != "a2" {
		t.Fatalf("observed %+v, want a2", o)
	}
	elected := make(chan error, 1)
	go func() { elected <- b.Campaign(ctx, []byte("b")) }()
	time.Sleep(100 * time.Millisecond)
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-elected; err != nil {
		t.Fatal(err)
	}
	for o := range observed {
		if !o.HasLeader {
			continue // between a's resignation and b's election
		}
		if string(o.Leader.Value) != "b" || o.Leader.Fence != b.Fence() || b.Fence() <= a.Fence() {
			t.Fatalf("observed %+v; want b at fence %d > a's", o, b.Fence())
		}
		break
	}
	l, ok, err := b.Leader(ctx)
	if err != nil || !ok || string(l.Value) != "b" {
		t.Fatalf("Leader = %+v, %v, %v", l, ok, err)
	}
	if err := a.Proclaim(ctx, []byte("x")); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Proclaim after Resign = %v, want ErrNotHeld", err)
	}
}

func TestLimiter(t *testing.T) {
	cc := serve(t)
	ctx := ctxT(t, 10*time.Second)
	l := client.NewLimiter(cc, "three-an-hour")
	for i := range 4 {
		d, err := l.Allow(ctx, "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != (i < 3) {
			t.Fatalf("call %d: %+v", i, d)
		}
		if i == 3 && d.RetryAfter <= 0 {
			t.Fatalf("a denial without retry_after: %+v", d)
		}
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := l.Wait(short, "k", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait for an hour with 200ms = %v, want DeadlineExceeded", err)
	}
	// 10 a second, burst 1: 5 waits need about 400ms, and all pass.
	tb := client.NewInlineLimiter(cc, coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, 10, time.Second, 1)
	start := time.Now()
	for range 5 {
		if err := tb.Wait(ctx, "w", 1); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 350*time.Millisecond {
		t.Fatalf("5 waits at 10/s, burst 1, took %v: the limit was not applied", d)
	}
}

func TestIdempotent(t *testing.T) {
	cc := serve(t)
	ctx := ctxT(t, 20*time.Second)
	var runs atomic.Int32
	var wg sync.WaitGroup
	results := make([]string, 5)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := client.Idempotent(ctx, cc, "once", "fp", client.IdempotentOptions{ProcessingTTL: 300 * time.Millisecond}, func(ctx context.Context) ([]byte, error) {
				runs.Add(1)
				time.Sleep(500 * time.Millisecond) // past the processing TTL: extended
				return []byte("done"), nil
			})
			if err != nil {
				t.Error(err)
			}
			results[i] = string(r)
		}()
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("ran %d times, want once", runs.Load())
	}
	for i, r := range results {
		if r != "done" {
			t.Fatalf("caller %d got %q", i, r)
		}
	}

	// A retryable failure runs again; a terminal one is replayed.
	fails := 0
	fail := func(retryable bool) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) {
			fails++
			return nil, &client.Failure{Message: "no", Retryable: retryable}
		}
	}
	for _, retryable := range []bool{true, true, false, false} {
		_, err := client.Idempotent(ctx, cc, "failing", "fp", client.IdempotentOptions{}, fail(retryable))
		var f *client.Failure
		if !errors.As(err, &f) || f.Message != "no" {
			t.Fatalf("err = %v, want the failure", err)
		}
	}
	if fails != 3 {
		t.Fatalf("fn ran %d times, want 3 (two retryable failures, one terminal, replayed once)", fails)
	}
}

func TestWorker(t *testing.T) {
	cc := serve(t)
	qc := coordv1.NewQueueServiceClient(cc)
	ctx := ctxT(t, 30*time.Second)
	const n = 40
	for i := range n {
		if _, err := qc.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "jobs", Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var running, most atomic.Int32
	done := make(chan struct{})
	wctx, stop := context.WithCancel(ctx)
	w := client.NewWorker(cc, "jobs", func(ctx context.Context, m client.Message) error {
		r := running.Add(1)
		defer running.Add(-1)
		for {
			if old := most.Load(); r <= old || most.CompareAndSwap(old, r) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		seen[string(m.Payload)]++
		if m.Payload[0] == '7' && m.Attempt == 1 {
			return &client.Retry{Delay: time.Millisecond, Err: errors.New("first attempts of 7x fail")}
		}
		if len(seen) == n && seen["7"] == 2 {
			close(done)
		}
		return nil
	}, client.WorkerOptions{Concurrency: 4, Visibility: time.Second})
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	select {
	case <-done:
	case err := <-ran:
		t.Fatalf("Run ended: %v", err)
	case <-ctx.Done():
		t.Fatalf("handled %d of %d messages", len(seen), n)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if most.Load() > 4 {
		t.Fatalf("%d handlers at once, want at most 4", most.Load())
	}
	st, err := qc.Stats(ctx, &coordv1.StatsRequest{Queue: "jobs"})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetReady()+st.GetInFlight()+st.GetDelayed()+st.GetDead() != 0 {
		t.Fatalf("after the stop: %v, want every message acked", st)
	}
}

// A Worker honours its queue's pause and max_in_flight with no call of
// its own: a paused queue's messages wait (the Worker's Claim waits, and
// the resume wakes it); with 8 slots and max_in_flight 2, at most 2
// handlers run at once.
func TestWorkerHonoursPauseAndCaps(t *testing.T) {
	cc := serve(t)
	qc := coordv1.NewQueueServiceClient(cc)
	ctx := ctxT(t, 30*time.Second)
	if _, err := qc.PauseQueue(ctx, &coordv1.PauseQueueRequest{Queue: "capped"}); err != nil {
		t.Fatal(err)
	}
	if _, err := qc.ConfigureQueue(ctx, &coordv1.ConfigureQueueRequest{Queue: "capped", MaxInFlight: 2}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := range n {
		if _, err := qc.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "capped", Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var handled, running, most atomic.Int32
	done := make(chan struct{})
	wctx, stop := context.WithCancel(ctx)
	w := client.NewWorker(cc, "capped", func(ctx context.Context, m client.Message) error {
		r := running.Add(1)
		defer running.Add(-1)
		for {
			if old := most.Load(); r <= old || most.CompareAndSwap(old, r) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		if handled.Add(1) == n {
			close(done)
		}
		return nil
	}, client.WorkerOptions{Concurrency: 8, Visibility: 10 * time.Second})
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	time.Sleep(300 * time.Millisecond)
	if h := handled.Load(); h != 0 {
		t.Fatalf("%d messages handled from a paused queue", h)
	}
	if _, err := qc.ResumeQueue(ctx, &coordv1.ResumeQueueRequest{Queue: "capped"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case err := <-ran:
		t.Fatalf("Run ended: %v", err)
	case <-ctx.Done():
		t.Fatalf("handled %d of %d messages", handled.Load(), n)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if most.Load() > 2 {
		t.Fatalf("%d handlers at once under max_in_flight 2", most.Load())
	}
}

// A Worker stopped while a handler runs lets it finish and acks its
// message; a handler slower than the visibility timeout keeps its claim.
func TestWorkerGracefulStop(t *testing.T) {
	cc := serve(t)
	qc := coordv1.NewQueueServiceClient(cc)
	ctx := ctxT(t, 20*time.Second)
	if _, err := qc.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "slow", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	wctx, stop := context.WithCancel(ctx)
	w := client.NewWorker(cc, "slow", func(ctx context.Context, m client.Message) error {
		close(started)
		time.Sleep(800 * time.Millisecond) // past the 300ms visibility: extended
		return ctx.Err()
	}, client.WorkerOptions{Visibility: 300 * time.Millisecond})
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	<-started
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	st, err := qc.Stats(ctx, &coordv1.StatsRequest{Queue: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetReady()+st.GetInFlight()+st.GetDelayed() != 0 {
		t.Fatalf("after a graceful stop: %v, want the message acked", st)
	}
}

// TestNewSessionRetriesOverloaded: a coordd at limits.max_sessions refuses
// a new session with OVERLOADED; NewSession tries again after its
// retry_after until ctx ends, and gets the session once a slot frees.
func TestNewSessionRetriesOverloaded(t *testing.T) {
	st, _ := backendtest.Open(t, *backend, clock.Real{}, "")
	t.Cleanup(func() { _ = st.Close() })
	cc := servertest.Serve(t, st, clock.Real{}, servertest.WithConfig(testConfig), servertest.WithServerOptions(func(o *server.Options) {
		o.Limits.MaxSessions = 1
	}))
	first := newSession(t, cc)

	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := client.NewSession(short, cc)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "OVERLOADED") {
		t.Fatalf("NewSession at capacity = %v, want the deadline, naming the refusal", err)
	}
	if _, ok := client.Overloaded(err); ok {
		t.Fatal("Overloaded of a wrapped deadline error: the refusal is described, not returned")
	}

	var closing atomic.Bool
	go func() {
		time.Sleep(200 * time.Millisecond)
		closing.Store(true)
		_ = first.Close()
	}()
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	s, err := client.NewSession(ctx, cc)
	if err != nil {
		t.Fatalf("NewSession once a slot frees: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if !closing.Load() {
		t.Fatal("NewSession got a session before the only slot was given back")
	}
}
