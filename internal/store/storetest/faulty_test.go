package storetest_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFaultyConformance: a Faulty without faults is its inner store.
func TestFaultyConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		c := clock.NewFake(time.Unix(1_800_000_000, 0))
		m := memory.New(memory.Options{Clock: c})
		f := storetest.NewFaulty(m)
		t.Cleanup(func() { _ = f.Close() })
		return storetest.Harness{Store: f, Clock: c,
			Residue: func(horizon time.Duration, names ...string) ([]string, error) { return m.Keeps(horizon, names...), nil }}
	})
}

func newFaulty(t *testing.T) (*storetest.Faulty, *memory.Store) {
	t.Helper()
	mem := memory.New(memory.Options{Clock: clock.NewFake(time.Unix(1_800_000_000, 0))})
	f := storetest.NewFaulty(mem)
	t.Cleanup(func() { _ = f.Close() })
	return f, mem
}

func acquire(ctx context.Context, f *storetest.Faulty, name string) (store.Grant, error) {
	return f.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: token.New(), TTL: time.Minute})
}

func held(t *testing.T, mem *memory.Store, name string) bool {
	t.Helper()
	info, err := mem.GetHolds(t.Context(), store.HoldLock, name)
	if err != nil {
		t.Fatal(err)
	}
	return info.Held
}

func TestFaultyModes(t *testing.T) {
	errMine := errors.New("mine")
	for _, tc := range []struct {
		name    string
		fault   storetest.Fault
		wantErr error // nil: the call succeeds
		applied bool
	}{
		{"zero fault passes through", storetest.Fault{}, nil, true},
		{"fail", storetest.Fault{Fail: true}, store.ErrUnavailable, false},
		{"fail with an error", storetest.Fault{Fail: true, Err: errMine}, errMine, false},
		{"fail after applying", storetest.Fault{FailAfter: true}, store.ErrUnavailable, true},
		{"fail after applying with an error", storetest.Fault{FailAfter: true, Err: errMine}, errMine, true},
		{"both is fail after", storetest.Fault{Fail: true, FailAfter: true}, store.ErrUnavailable, true},
		{"slow", storetest.Fault{Delay: 10 * time.Millisecond}, nil, true},
		{"slow, then fail", storetest.Fault{Delay: 10 * time.Millisecond, Fail: true}, store.ErrUnavailable, false},
		{"slow, then fail after", storetest.Fault{Delay: 10 * time.Millisecond, FailAfter: true}, store.ErrUnavailable, true},
		{"hang until the deadline", storetest.Fault{Delay: -1}, context.DeadlineExceeded, false},
		{"slower than the deadline", storetest.Fault{Delay: time.Hour, FailAfter: true}, context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, mem := newFaulty(t)
			f.Set("AcquireHold", tc.fault)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			g, err := acquire(ctx, f, "a")
			if tc.fault.Delay > 0 && tc.fault.Delay < time.Second && time.Since(start) < tc.fault.Delay {
				t.Errorf("returned after %v, before the delay of %v", time.Since(start), tc.fault.Delay)
			}
			if tc.wantErr == nil {
				if err != nil || !g.Acquired {
					t.Fatalf("AcquireHold = %+v, %v; want acquired", g, err)
				}
			} else {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if g != (store.Grant{}) {
					t.Errorf("a failed call returned %+v, want the zero value", g)
				}
			}
			if got := held(t, mem, "a"); got != tc.applied {
				t.Errorf("applied = %v, want %v", got, tc.applied)
			}
			if n := f.Calls("AcquireHold"); n != 1 {
				t.Errorf("Calls = %d, want 1", n)
			}
		})
	}
}

func TestFaultyErrInjected(t *testing.T) {
	if !errors.Is(storetest.ErrInjected, store.ErrUnavailable) {
		t.Fatal("ErrInjected does not wrap store.ErrUnavailable")
	}
	f, _ := newFaulty(t)
	f.Fail("GetHolds")
	if _, err := f.GetHolds(t.Context(), store.HoldLock, "a"); err != storetest.ErrInjected {
		t.Fatalf("err = %v, want ErrInjected", err)
	}
}

func TestFaultyOnlyTheChosenMethod(t *testing.T) {
	f, _ := newFaulty(t)
	f.Fail("AcquireHold", "Enqueue")
	if _, err := acquire(t.Context(), f, "a"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AcquireHold: %v, want ErrUnavailable", err)
	}
	if _, err := f.GetHolds(t.Context(), store.HoldLock, "a"); err != nil {
		t.Fatalf("GetLock: %v", err)
	}
	if _, _, err := storetest.ReleaseLock(t.Context(), f, "a", token.New()); err != nil {
		t.Fatalf("ReleaseHold: %v", err)
	}
	if _, err := f.Enqueue(t.Context(), "q", store.NewMessage{ID: token.New(), MaxAttempts: 1}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Enqueue: %v, want ErrUnavailable", err)
	}
	if _, err := f.Stats(t.Context(), "q"); err != nil {
		t.Fatalf("Stats: %v", err)
	}
}

func TestFaultyTimesAndClear(t *testing.T) {
	f, _ := newFaulty(t)
	f.Set("GetHolds", storetest.Fault{Fail: true, Times: 2})
	for i, wantErr := range []bool{true, true, false, false} {
		_, err := f.GetHolds(t.Context(), store.HoldLock, "a")
		if (err != nil) != wantErr {
			t.Fatalf("call %d: err = %v, want error %v", i+1, err, wantErr)
		}
	}
	f.Fail("GetHolds", "Stats")
	f.Clear("GetHolds")
	if _, err := f.GetHolds(t.Context(), store.HoldLock, "a"); err != nil {
		t.Fatalf("GetLock after Clear(GetLock): %v", err)
	}
	if _, err := f.Stats(t.Context(), "q"); err == nil {
		t.Fatal("Stats after Clear(GetLock): the fault is gone")
	}
	f.Clear()
	if _, err := f.Stats(t.Context(), "q"); err != nil {
		t.Fatalf("Stats after Clear(): %v", err)
	}
	if n := f.Calls("GetHolds"); n != 5 {
		t.Errorf("Calls(GetLock) = %d, want 5", n)
	}
}

// hubStore is a memory store whose subscriptions come from a Hub the test
// can count.
type hubStore struct {
	*memory.Store
	hub *store.Hub
}

func (s hubStore) Subscribe(_ context.Context, topic string) (*store.Subscription, error) {
	sub, _ := s.hub.Subscribe(topic, nil)
	return sub, nil
}

func TestFaultySubscribeFailAfterClosesTheSubscription(t *testing.T) {
	_, mem := newFaulty(t)
	var hub store.Hub
	f := storetest.NewFaulty(hubStore{Store: mem, hub: &hub})
	f.FailAfter("Subscribe")
	sub, err := f.Subscribe(t.Context(), "t")
	if sub != nil || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Subscribe = %v, %v; want nil, ErrUnavailable", sub, err)
	}
	if n := hub.Topics(); n != 0 {
		t.Fatalf("%d topics subscribed after a failed-after Subscribe, want 0", n)
	}
	f.Clear()
	sub, err = f.Subscribe(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	hub.Notify("t")
	select {
	case <-sub.C():
	default:
		t.Fatal("no wake-up through the Faulty's subscription")
	}
}

func TestFaultySetUnknownMethodPanics(t *testing.T) {
	f, _ := newFaulty(t)
	defer func() {
		if recover() == nil {
			t.Error("Set(\"Acquire\") did not panic")
		}
	}()
	f.Set("Acquire", storetest.Fault{Fail: true})
}

func TestFaultyInner(t *testing.T) {
	f, mem := newFaulty(t)
	if f.Inner() != store.Store(mem) {
		t.Fatal("Inner() is not the wrapped store")
	}
}

// TestFaultyConcurrent is for the race detector.
func TestFaultyConcurrent(t *testing.T) {
	f, _ := newFaulty(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			f.Set("GetHolds", storetest.Fault{Fail: i%2 == 0, Times: 3})
			f.Clear("GetHolds")
		}
	}()
	for i := 0; i < 200; i++ {
		_, _ = f.GetHolds(t.Context(), store.HoldLock, "a")
		_ = f.Calls("GetHolds")
	}
	<-done
}

// TestFaultyEmbedsNoStore: Faulty writes out every method of store.Store,
// so that each can be given a fault and a new method of the interface
// fails to compile until it can.
func TestFaultyEmbedsNoStore(t *testing.T) {
	rt := reflect.TypeOf(storetest.Faulty{})
	for i := 0; i < rt.NumField(); i++ {
		if rt.Field(i).Anonymous {
			t.Errorf("Faulty embeds %s: its methods could not be faulted", rt.Field(i).Type)
		}
	}
}
