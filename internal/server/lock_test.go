package server_test

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func (h *harness) lock(t testing.TB, req *coordv1.LockRequest) *coordv1.LockResponse {
	t.Helper()
	resp, err := h.locks.Lock(ctx(t), req)
	if err != nil {
		t.Fatalf("Lock(%v): %v", req, err)
	}
	return resp
}

func TestLockContendedNamesHolder(t *testing.T) {
	h := newHarness(t, withFakeClock)
	first := h.lock(t, &coordv1.LockRequest{Name: "report", Ttl: dur(30 * time.Second), Owner: "alice"})
	if !first.GetAcquired() || len(first.GetToken()) != 32 || first.GetFence() == 0 {
		t.Fatalf("first Lock = %v, want acquired with a token and a fence", first)
	}
	h.clock.Advance(10 * time.Second)
	second := h.lock(t, &coordv1.LockRequest{Name: "report", Ttl: dur(30 * time.Second), Owner: "bob"})
	if second.GetAcquired() || second.GetToken() != "" || second.GetFence() != 0 {
		t.Fatalf("second Lock = %v, want not acquired, no token, no fence", second)
	}
	if second.GetHolder() != "alice" || second.GetTtl().AsDuration() != 20*time.Second {
		t.Fatalf("second Lock = %v, want holder alice with 20s left", second)
	}
	if !second.GetExpireTime().AsTime().Equal(first.GetExpireTime().AsTime()) {
		t.Fatalf("holder expire_time %v, want the first lease's %v", second.GetExpireTime().AsTime(), first.GetExpireTime().AsTime())
	}
	info, err := h.locks.GetLock(ctx(t), &coordv1.GetLockRequest{Name: "report"})
	if err != nil {
		t.Fatal(err)
	}
	if !info.GetHeld() || info.GetOwner() != "alice" || info.GetFence() != first.GetFence() {
		t.Fatalf("GetLock = %v, want held by alice with fence %d", info, first.GetFence())
	}
}

func TestLockFencesStrictlyIncrease(t *testing.T) {
	h := newHarness(t)
	var last uint64
	for i := 0; i < 1000; i++ {
		g := h.lock(t, &coordv1.LockRequest{Name: "fenced", Ttl: dur(time.Minute)})
		if !g.GetAcquired() {
			t.Fatalf("acquisition %d: not acquired", i)
		}
		if g.GetFence() <= last {
			t.Fatalf("acquisition %d: fence %d after %d", i, g.GetFence(), last)
		}
		last = g.GetFence()
		rel, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: "fenced", Token: g.GetToken()})
		if err != nil || !rel.GetReleased() {
			t.Fatalf("Release %d = %v, %v", i, rel, err)
		}
	}
}

func TestReleaseWithOldTokenKeepsHolder(t *testing.T) {
	h := newHarness(t, withFakeClock)
	old := h.lock(t, &coordv1.LockRequest{Name: "job", Ttl: dur(time.Second), Owner: "old"})
	h.clock.Advance(2 * time.Second) // the old lease expires
	cur := h.lock(t, &coordv1.LockRequest{Name: "job", Ttl: dur(time.Minute), Owner: "new"})
	if !cur.GetAcquired() || cur.GetFence() <= old.GetFence() {
		t.Fatalf("Lock after expiry = %v, want acquired with a fence above %d", cur, old.GetFence())
	}
	rel, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: "job", Token: old.GetToken()})
	if err != nil || rel.GetReleased() {
		t.Fatalf("Release(old token) = %v, %v; want released=false, no error", rel, err)
	}
	info, err := h.locks.GetLock(ctx(t), &coordv1.GetLockRequest{Name: "job"})
	if err != nil || !info.GetHeld() || info.GetOwner() != "new" || info.GetFence() != cur.GetFence() {
		t.Fatalf("GetLock = %v, %v; want still held by new", info, err)
	}
	_, err = h.locks.Renew(ctx(t), &coordv1.RenewRequest{Name: "job", Token: old.GetToken(), Ttl: dur(time.Minute)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_NOT_HELD")
}

func TestRenewAfterExpiryIsNotHeld(t *testing.T) {
	h := newHarness(t, withFakeClock)
	g := h.lock(t, &coordv1.LockRequest{Name: "lease", Ttl: dur(5 * time.Second)})
	h.clock.Advance(4 * time.Second)
	r, err := h.locks.Renew(ctx(t), &coordv1.RenewRequest{Name: "lease", Token: g.GetToken(), Ttl: dur(5 * time.Second)})
	if err != nil || r.GetTtl().AsDuration() != 5*time.Second || r.GetFence() != g.GetFence() {
		t.Fatalf("Renew before expiry = %v, %v; want a 5s lease with the same fence", r, err)
	}
	h.clock.Advance(5 * time.Second) // exactly at the renewed deadline: expired
	_, err = h.locks.Renew(ctx(t), &coordv1.RenewRequest{Name: "lease", Token: g.GetToken(), Ttl: dur(5 * time.Second)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_NOT_HELD")
	rel, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: "lease", Token: g.GetToken()})
	if err != nil || rel.GetReleased() {
		t.Fatalf("Release after expiry = %v, %v; want released=false", rel, err)
	}
}

func TestMaxHoldStopsRenewal(t *testing.T) {
	h := newHarness(t, withFakeClock)
	g := h.lock(t, &coordv1.LockRequest{Name: "capped", Ttl: dur(4 * time.Second), MaxHold: dur(10 * time.Second)})
	var renewed []time.Duration
	for i := 0; i < 3; i++ {
		h.clock.Advance(3 * time.Second)
		r, err := h.locks.Renew(ctx(t), &coordv1.RenewRequest{Name: "capped", Token: g.GetToken(), Ttl: dur(4 * time.Second)})
		if err != nil {
			t.Fatalf("Renew %d: %v", i, err)
		}
		renewed = append(renewed, r.GetTtl().AsDuration())
	}
	// At 3s and 6s the full 4s; at 9s only the 1s left before max_hold.
	want := []time.Duration{4 * time.Second, 4 * time.Second, time.Second}
	for i := range want {
		if renewed[i] != want[i] {
			t.Fatalf("renewed leases %v, want %v", renewed, want)
		}
	}
	h.clock.Advance(time.Second) // 10s: max_hold reached
	_, err := h.locks.Renew(ctx(t), &coordv1.RenewRequest{Name: "capped", Token: g.GetToken(), Ttl: dur(4 * time.Second)})
	wantStatus(t, err, codes.FailedPrecondition, "LOCK_NOT_HELD")
	if again := h.lock(t, &coordv1.LockRequest{Name: "capped", Ttl: dur(time.Second)}); !again.GetAcquired() {
		t.Fatalf("Lock after max_hold = %v, want acquired", again)
	}
}

// TestLockWaitHandOff shows that a waiting Lock is woken by the holder's
// release, not by its lease running out (a minute away) or by polling, and
// reports the hand-off latency: from the Release call to the waiter's Lock
// returning, both over the wire.
func TestLockWaitHandOff(t *testing.T) {
	h := newHarness(t)
	const rounds = 50
	var lat []time.Duration
	for i := 0; i < rounds; i++ {
		holder := h.lock(t, &coordv1.LockRequest{Name: "handoff", Ttl: dur(time.Minute), Owner: "holder"})
		got := make(chan *coordv1.LockResponse, 1)
		waitStarted := make(chan struct{})
		go func() {
			close(waitStarted)
			resp, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "handoff", Ttl: dur(time.Minute), Wait: dur(30 * time.Second), Owner: "waiter"})
			if err != nil {
				t.Error(err)
			}
			got <- resp
		}()
		<-waitStarted
		time.Sleep(20 * time.Millisecond) // let the waiter block
		released := time.Now()
		rel, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: "handoff", Token: holder.GetToken()})
		if err != nil || !rel.GetReleased() {
			t.Fatalf("Release = %v, %v", rel, err)
		}
		resp := <-got
		lat = append(lat, time.Since(released))
		if !resp.GetAcquired() || resp.GetFence() <= holder.GetFence() {
			t.Fatalf("waiter got %v, want acquired with a fence above %d", resp, holder.GetFence())
		}
		if _, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: "handoff", Token: resp.GetToken()}); err != nil {
			t.Fatal(err)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("hand-off latency over %d releases: p50 %v, p90 %v, max %v", rounds, lat[rounds/2], lat[rounds*9/10], lat[rounds-1])
	// Far below the holder's minute-long lease: the release woke the waiter.
	if lat[rounds/2] > time.Second {
		t.Fatalf("median hand-off %v: the waiter was not woken by the release", lat[rounds/2])
	}
}

func TestLockWaitTimesOut(t *testing.T) {
	h := newHarness(t)
	h.lock(t, &coordv1.LockRequest{Name: "busy", Ttl: dur(time.Minute), Owner: "holder"})
	start := time.Now()
	resp := h.lock(t, &coordv1.LockRequest{Name: "busy", Ttl: dur(time.Minute), Wait: dur(150 * time.Millisecond)})
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("returned after %v, before wait passed", waited)
	}
	if resp.GetAcquired() || resp.GetHolder() != "holder" {
		t.Fatalf("Lock = %v, want not acquired, holder named", resp)
	}
}

// TestLockWaitWokenByExpiry: a waiter is granted the lock when the holder's
// lease runs out, with no release to wake it.
func TestLockWaitWokenByExpiry(t *testing.T) {
	h := newHarness(t)
	h.lock(t, &coordv1.LockRequest{Name: "expiring", Ttl: dur(200 * time.Millisecond)})
	resp := h.lock(t, &coordv1.LockRequest{Name: "expiring", Ttl: dur(time.Minute), Wait: dur(10 * time.Second)})
	if !resp.GetAcquired() {
		t.Fatalf("Lock = %v, want acquired once the holder's lease ran out", resp)
	}
}

// TestLockExclusiveUnderContention: 16 goroutines loop Lock(wait) → enter
// the critical section → Release; no two are ever inside at once, and each
// grant's fence is above the one before.
func TestLockExclusiveUnderContention(t *testing.T) {
	h := newHarness(t)
	var inside, grants atomic.Int64
	var lastFence atomic.Uint64
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				g, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "hot", Ttl: dur(time.Minute), Wait: dur(20 * time.Second)})
				if err != nil || !g.GetAcquired() {
					t.Errorf("Lock = %v, %v", g, err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				if prev := lastFence.Swap(g.GetFence()); g.GetFence() <= prev {
					t.Errorf("fence %d after %d", g.GetFence(), prev)
				}
				grants.Add(1)
				runtime.Gosched()
				inside.Add(-1)
				if _, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: "hot", Token: g.GetToken()}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if grants.Load() != 16*25 {
		t.Fatalf("%d grants, want %d", grants.Load(), 16*25)
	}
}
