package waiter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/waiter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// long is a wait no test should sit out: reaching it means a wake-up was
// missed.
const long = time.Minute

// prompt bounds how long a wake-up, drain or cancel may take to end a wait.
const prompt = 10 * time.Second

// hubSub is a store.Subscriber on a bare store.Hub.
type hubSub struct {
	hub *store.Hub
	err error // returned by Subscribe if not nil
}

func (s *hubSub) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	if s.err != nil {
		return nil, s.err
	}
	sub, _ := s.hub.Subscribe(topic, nil)
	return sub, nil
}

// tries is a Try that answers from a script, one step per call (the last
// step repeats), and reports each call on called.
type tries struct {
	n      atomic.Int32
	steps  []step
	called chan int // receives the call's number (from 1), if not nil
}

type step struct {
	done    bool
	retryIn time.Duration
	err     error
}

func (tr *tries) try(ctx context.Context) (bool, time.Duration, error) {
	n := int(tr.n.Add(1))
	st := tr.steps[min(n, len(tr.steps))-1]
	if tr.called != nil {
		select {
		case tr.called <- n:
		default:
		}
	}
	return st.done, st.retryIn, st.err
}

func newTries(steps ...step) *tries {
	return &tries{steps: steps, called: make(chan int, 16)}
}

// afterCall waits for try's call number n.
func (tr *tries) afterCall(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(prompt)
	for {
		select {
		case got := <-tr.called:
			if got >= n {
				return
			}
		case <-timeout:
			t.Fatalf("try was not called %d times within %v", n, prompt)
		}
	}
}

type result struct {
	err     error
	elapsed time.Duration
}

// start runs Wait in a goroutine.
func start(ctx context.Context, sub store.Subscriber, topic string, wait time.Duration, drain waiter.Drain, tr *tries) <-chan result {
	out := make(chan result, 1)
	go func() {
		t0 := time.Now()
		err := waiter.Wait(ctx, sub, topic, wait, drain, tr.try)
		out <- result{err, time.Since(t0)}
	}()
	return out
}

func await(t *testing.T, out <-chan result) result {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(prompt):
		t.Fatalf("Wait did not return within %v", prompt)
		return result{}
	}
}

func TestWaitNonPositiveTriesOnce(t *testing.T) {
	errTry := errors.New("try failed")
	for _, tc := range []struct {
		name string
		wait time.Duration
		st   step
	}{
		{"zero, not done", 0, step{}},
		{"zero, not done with a retry time", 0, step{retryIn: time.Millisecond}},
		{"negative, not done", -time.Second, step{}},
		{"zero, done", 0, step{done: true}},
		{"zero, error", 0, step{err: errTry}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h store.Hub
			// A failing Subscribe shows that no subscription is made.
			sub := &hubSub{hub: &h, err: errors.New("subscribe called")}
			tr := newTries(tc.st)
			err := waiter.Wait(t.Context(), sub, "t", tc.wait, nil, tr.try)
			if !errors.Is(err, tc.st.err) || (tc.st.err == nil && err != nil) {
				t.Errorf("err = %v, want %v", err, tc.st.err)
			}
			if n := tr.n.Load(); n != 1 {
				t.Errorf("try called %d times, want 1", n)
			}
		})
	}
}

func TestWaitTable(t *testing.T) {
	errTry := errors.New("try failed")
	for _, tc := range []struct {
		name    string
		wait    time.Duration
		steps   []step
		wantErr error
		wantN   int32
		minTime time.Duration // at least this long
		maxTime time.Duration // and well under this
	}{
		{
			name: "done at once", wait: long, steps: []step{{done: true}},
			wantN: 1, maxTime: prompt,
		},
		{
			name: "error at once", wait: long, steps: []step{{err: errTry}},
			wantErr: errTry, wantN: 1, maxTime: prompt,
		},
		{
			name: "error with done", wait: long, steps: []step{{done: true, err: errTry}},
			wantErr: errTry, wantN: 1, maxTime: prompt,
		},
		{
			name: "retryIn triggers a retry", wait: long,
			steps: []step{{retryIn: 20 * time.Millisecond}, {done: true}},
			wantN: 2, minTime: 20 * time.Millisecond, maxTime: prompt,
		},
		{
			name: "retries until done", wait: long,
			steps: []step{{retryIn: 5 * time.Millisecond}, {retryIn: 5 * time.Millisecond}, {done: true}},
			wantN: 3, minTime: 10 * time.Millisecond, maxTime: prompt,
		},
		{
			name: "error on a retry", wait: long,
			steps:   []step{{retryIn: time.Millisecond}, {err: errTry}},
			wantErr: errTry, wantN: 2, maxTime: prompt,
		},
		{
			name: "deadline without a retry time", wait: 50 * time.Millisecond, steps: []step{{}},
			wantN: 2, minTime: 50 * time.Millisecond, maxTime: prompt,
		},
		{
			name: "retryIn beyond the deadline", wait: 50 * time.Millisecond, steps: []step{{retryIn: long}},
			wantN: 2, minTime: 50 * time.Millisecond, maxTime: prompt,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h store.Hub
			tr := newTries(tc.steps...)
			r := await(t, start(t.Context(), &hubSub{hub: &h}, "t", tc.wait, nil, tr))
			if !errors.Is(r.err, tc.wantErr) || (tc.wantErr == nil && r.err != nil) {
				t.Errorf("err = %v, want %v", r.err, tc.wantErr)
			}
			if n := tr.n.Load(); n != tc.wantN {
				t.Errorf("try called %d times, want %d", n, tc.wantN)
			}
			if r.elapsed < tc.minTime || r.elapsed >= tc.maxTime {
				t.Errorf("took %v, want within [%v, %v)", r.elapsed, tc.minTime, tc.maxTime)
			}
			if n := h.Topics(); n != 0 {
				t.Errorf("%d topics still subscribed after Wait returned", n)
			}
		})
	}
}

func TestWaitNotifyWakes(t *testing.T) {
	var h store.Hub
	tr := newTries(step{}, step{done: true})
	out := start(t.Context(), &hubSub{hub: &h}, "lock:a", long, nil, tr)
	tr.afterCall(t, 1)
	// The subscription was made before the first try, so this Notify cannot
	// be lost even if Wait has not reached its select yet.
	h.Notify("lock:a")
	r := await(t, out)
	if r.err != nil {
		t.Fatalf("err = %v", r.err)
	}
	if n := tr.n.Load(); n != 2 {
		t.Errorf("try called %d times, want 2", n)
	}
	if n := h.Topics(); n != 0 {
		t.Errorf("%d topics still subscribed after Wait returned", n)
	}
}

func TestWaitNotifyOfAnotherTopicDoesNotWake(t *testing.T) {
	var h store.Hub
	const wait = 200 * time.Millisecond
	tr := newTries(step{})
	out := start(t.Context(), &hubSub{hub: &h}, "lock:a", wait, nil, tr)
	tr.afterCall(t, 1)
	h.Notify("lock:b")
	h.Notify("idem:a")
	r := await(t, out)
	if r.err != nil {
		t.Fatalf("err = %v", r.err)
	}
	// One try at the start and one at the deadline: the other topics'
	// wake-ups caused none.
	if n := tr.n.Load(); n != 2 {
		t.Errorf("try called %d times, want 2", n)
	}
	if r.elapsed < wait {
		t.Errorf("returned after %v, before the wait of %v", r.elapsed, wait)
	}
}

func TestWaitEveryNotifyRetries(t *testing.T) {
	var h store.Hub
	tr := newTries(step{}, step{}, step{}, step{done: true})
	out := start(t.Context(), &hubSub{hub: &h}, "q", long, nil, tr)
	for i := 1; i <= 3; i++ {
		tr.afterCall(t, i)
		h.Notify("q")
	}
	if r := await(t, out); r.err != nil {
		t.Fatalf("err = %v", r.err)
	}
	if n := tr.n.Load(); n != 4 {
		t.Errorf("try called %d times, want 4", n)
	}
}

func TestWaitDrain(t *testing.T) {
	t.Run("closed while waiting", func(t *testing.T) {
		var h store.Hub
		drain := make(chan struct{})
		tr := newTries(step{})
		out := start(t.Context(), &hubSub{hub: &h}, "t", long, drain, tr)
		tr.afterCall(t, 1)
		close(drain)
		r := await(t, out)
		if r.err != nil {
			t.Errorf("err = %v, want nil", r.err)
		}
		if n := tr.n.Load(); n != 1 {
			t.Errorf("try called %d times, want 1", n)
		}
		if n := h.Topics(); n != 0 {
			t.Errorf("%d topics still subscribed after Wait returned", n)
		}
	})
	t.Run("closed before", func(t *testing.T) {
		var h store.Hub
		drain := make(chan struct{})
		close(drain)
		tr := newTries(step{})
		r := await(t, start(t.Context(), &hubSub{hub: &h}, "t", long, drain, tr))
		if r.err != nil {
			t.Errorf("err = %v, want nil", r.err)
		}
		if n := tr.n.Load(); n != 1 {
			t.Errorf("try called %d times, want 1 (a drained wait still tries once)", n)
		}
	})
}

func TestWaitContext(t *testing.T) {
	t.Run("canceled while waiting", func(t *testing.T) {
		var h store.Hub
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		tr := newTries(step{})
		out := start(ctx, &hubSub{hub: &h}, "t", long, nil, tr)
		tr.afterCall(t, 1)
		cancel()
		r := await(t, out)
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", r.err)
		}
		if n := h.Topics(); n != 0 {
			t.Errorf("%d topics still subscribed after Wait returned", n)
		}
	})
	t.Run("deadline before the wait", func(t *testing.T) {
		var h store.Hub
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		tr := newTries(step{})
		r := await(t, start(ctx, &hubSub{hub: &h}, "t", long, nil, tr))
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want context.DeadlineExceeded", r.err)
		}
	})
}

// TestWaitSubscribeError: a wait that cannot subscribe still tries, and
// re-checks by itself instead of waiting for a wake-up that cannot come.
func TestWaitSubscribeError(t *testing.T) {
	var h store.Hub
	errSub := errors.New("subscribe failed")
	tr := newTries(step{done: true})
	if err := waiter.Wait(t.Context(), &hubSub{hub: &h, err: errSub}, "t", long, nil, tr.try); err != nil {
		t.Errorf("err = %v, want nil: the first try is done", err)
	}
	if n := tr.n.Load(); n != 1 {
		t.Errorf("try called %d times, want 1", n)
	}
	tr = newTries(step{}, step{done: true})
	start := time.Now()
	if err := waiter.Wait(t.Context(), &hubSub{hub: &h, err: errSub}, "t", long, nil, tr.try); err != nil {
		t.Errorf("err = %v, want nil: the second try is done", err)
	}
	if n, took := tr.n.Load(), time.Since(start); n != 2 || took < waiter.PollWithoutWakeups/2 || took > 5*waiter.PollWithoutWakeups {
		t.Errorf("try called %d times in %v, want 2, about PollWithoutWakeups (%v) apart", n, took, waiter.PollWithoutWakeups)
	}
}
