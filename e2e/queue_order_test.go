package e2e

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// waiters is GetLock's count of name's waiters, asked on in.
func (in *instance) waiters(t *testing.T, name string) uint32 {
	t.Helper()
	info, err := in.locks.GetLock(testContext(t, 5*time.Second), &coordv1.GetLockRequest{Name: name})
	if err != nil {
		t.Fatalf("GetLock on %s: %v", in.Name, err)
	}
	return info.GetWaiters()
}

// waitWaiters waits until name has n waiters.
func (in *instance) waitWaiters(t *testing.T, name string, n uint32) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for in.waiters(t, name) != n {
		if time.Now().After(end) {
			t.Fatalf("%s: %d waiters after 10s; want %d", name, in.waiters(t, name), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestFIFOAcrossInstances queues 40 waiters alternately on two coordd
// processes, each once the one before is queued: they are granted in that
// order.
func TestFIFOAcrossInstances(t *testing.T) {
	const n = 40
	a, b := startPair(t)
	ctx := testContext(t, 60*time.Second)
	name := "fifo"
	first, err := a.locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(time.Minute)})
	if err != nil || !first.GetAcquired() {
		t.Fatalf("Lock = %v, %v", first, err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		on := []*instance{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := on.locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(time.Minute), Wait: durationpb.New(50 * time.Second)})
			if err != nil || !g.GetAcquired() {
				t.Errorf("waiter %d on %s: Lock = %v, %v", i, on.Name, g, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if _, err := on.locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: g.GetToken()}); err != nil {
				t.Errorf("waiter %d: Release: %v", i, err)
			}
		}()
		a.waitWaiters(t, name, uint32(i+1))
	}
	if _, err := a.locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: first.GetToken()}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("grant order %v; want 0..%d", order, n-1)
		}
	}
	if len(order) != n {
		t.Fatalf("%d of %d granted", len(order), n)
	}
}

// TestKilledInstanceWaitersStopBlocking: B's waiter is first in the queue,
// A's second, when B is killed (SIGKILL: it can neither take its ticket out
// nor refresh it); A's waiter is granted within 2s of the kill once the
// holder releases.
func TestKilledInstanceWaitersStopBlocking(t *testing.T) {
	a, b := startPair(t)
	ctx := testContext(t, 30*time.Second)
	name := "killed"
	held, err := a.locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(time.Minute)})
	if err != nil || !held.GetAcquired() {
		t.Fatalf("Lock = %v, %v", held, err)
	}
	go func() {
		_, _ = b.locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(time.Minute), Wait: durationpb.New(25 * time.Second)})
	}()
	a.waitWaiters(t, name, 1)
	done := make(chan *coordv1.LockResponse, 1)
	go func() {
		g, err := a.locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(time.Minute), Wait: durationpb.New(25 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		done <- g
	}()
	a.waitWaiters(t, name, 2)
	b.Kill(t)
	killed := time.Now()
	if _, err := a.locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: held.GetToken()}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-done:
		d := time.Since(killed)
		if !g.GetAcquired() || d > 2*time.Second {
			t.Fatalf("A's waiter = %v, %v after B's kill; want acquired within 2s", g, d)
		}
		t.Logf("A's waiter granted %v after B was killed", d)
	case <-time.After(10 * time.Second):
		t.Fatal("A's waiter still blocked 10s after B was killed")
	}
}
