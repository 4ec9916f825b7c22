package server_test

import (
	"errors"
	"io"
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

// TestLockShared: shared holders coexist, each with its own token and a
// greater fence, and GetLock lists them; an exclusive request waits for
// them all, and once it waits, a later shared request waits behind it
// (writers do not starve).
func TestLockShared(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	r1 := h.lock(t, &coordv1.LockRequest{Name: "doc", Ttl: dur(time.Minute), Shared: true, Owner: "r1"})
	r2 := h.lock(t, &coordv1.LockRequest{Name: "doc", Ttl: dur(time.Minute), Shared: true, Owner: "r2"})
	if !r1.GetAcquired() || !r2.GetAcquired() || r1.GetHolders() != 1 || r2.GetHolders() != 2 {
		t.Fatalf("shared Locks = %v, %v; want both acquired, 1 then 2 holders", r1, r2)
	}
	if r1.GetToken() == r2.GetToken() || r2.GetFence() <= r1.GetFence() {
		t.Fatalf("shared Locks = %v, %v; want distinct tokens, a greater fence for the second", r1, r2)
	}
	if w := h.lock(t, &coordv1.LockRequest{Name: "doc", Ttl: dur(time.Minute), Owner: "w"}); w.GetAcquired() || w.GetHolder() == "" {
		t.Fatalf("exclusive Lock beside shared holders = %v, want not acquired, told a holder", w)
	}
	info := h.held(t, "doc")
	if !info.GetHeld() || len(info.GetHolders()) != 2 || info.GetWaiters() != 0 || info.GetFence() != r1.GetFence() || info.GetOwner() != "r1" {
		t.Fatalf("GetLock = %v, want two holders, r1's fence first", info)
	}
	for i, want := range []*coordv1.LockResponse{r1, r2} {
		hd := info.GetHolders()[i]
		if hd.GetFence() != want.GetFence() || !hd.GetShared() || hd.GetSessionBound() || hd.GetOwner() != []string{"r1", "r2"}[i] {
			t.Errorf("holder %d = %v, want shared with fence %d", i, hd, want.GetFence())
		}
	}

	writer := make(chan *coordv1.LockResponse, 1)
	go func() {
		resp, err := h.locks.Lock(c, &coordv1.LockRequest{Name: "doc", Ttl: dur(time.Minute), Wait: dur(30 * time.Second), Owner: "w"})
		if err != nil {
			t.Error(err)
		}
		writer <- resp
	}()
	awaitWaiters(t, "GetLock", 1, func() uint32 { return h.held(t, "doc").GetWaiters() })
	if late := h.lock(t, &coordv1.LockRequest{Name: "doc", Ttl: dur(time.Minute), Shared: true, Owner: "r3"}); late.GetAcquired() {
		t.Fatalf("a shared Lock behind a waiting writer = %v, want not acquired", late)
	}
	for _, r := range []*coordv1.LockResponse{r1, r2} {
		if rel, err := h.locks.Release(c, &coordv1.ReleaseRequest{Name: "doc", Token: r.GetToken()}); err != nil || !rel.GetReleased() {
			t.Fatalf("Release = %v, %v", rel, err)
		}
	}
	w := <-writer
	if !w.GetAcquired() || w.GetFence() <= r2.GetFence() || w.GetHolders() != 1 {
		t.Fatalf("the writer = %v, want acquired alone with a greater fence", w)
	}
	if info := h.held(t, "doc"); len(info.GetHolders()) != 1 || info.GetHolders()[0].GetShared() || info.GetWaiters() != 0 {
		t.Fatalf("GetLock = %v, want the writer alone, nobody waiting", info)
	}
}

// TestCheckFence: a fence is current while a live holder has it, exclusive
// or shared, and not after its release or expiry.
func TestCheckFence(t *testing.T) {
	h := newHarness(t, withFakeClock)
	c := ctx(t)
	check := func(name string, fence uint64) bool {
		t.Helper()
		r, err := h.locks.CheckFence(c, &coordv1.CheckFenceRequest{Name: name, Fence: fence})
		if err != nil {
			t.Fatalf("CheckFence(%s, %d): %v", name, fence, err)
		}
		return r.GetCurrent()
	}
	if check("x", 1) {
		t.Fatal("CheckFence of a free lock = true")
	}
	g := h.lock(t, &coordv1.LockRequest{Name: "x", Ttl: dur(10 * time.Second)})
	if !check("x", g.GetFence()) || check("x", g.GetFence()+1) || check("x", g.GetFence()-1) || check("y", g.GetFence()) {
		t.Fatalf("CheckFence: only x's fence %d may be current", g.GetFence())
	}
	h.clock.Advance(10 * time.Second)
	if check("x", g.GetFence()) {
		t.Fatal("CheckFence after the lease expired = true")
	}
	s1 := h.lock(t, &coordv1.LockRequest{Name: "x", Ttl: dur(time.Minute), Shared: true})
	s2 := h.lock(t, &coordv1.LockRequest{Name: "x", Ttl: dur(time.Minute), Shared: true})
	if !check("x", s1.GetFence()) || !check("x", s2.GetFence()) || check("x", g.GetFence()) {
		t.Fatalf("CheckFence: both shared fences %d and %d must be current, the old %d not", s1.GetFence(), s2.GetFence(), g.GetFence())
	}
	if _, err := h.locks.Release(c, &coordv1.ReleaseRequest{Name: "x", Token: s1.GetToken()}); err != nil {
		t.Fatal(err)
	}
	if check("x", s1.GetFence()) || !check("x", s2.GetFence()) {
		t.Fatal("CheckFence after one shared release: the released fence must not be current, the other must")
	}
}

// TestLockDelay: a lock lost because its session expired is granted to
// nobody until the session's lock_delay after its expiry.
func TestLockDelay(t *testing.T) {
	h := newHarness(t, withFakeClock)
	c := ctx(t)
	stream, err := h.sessions.KeepAlive(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&coordv1.KeepAliveRequest{Ttl: dur(time.Second), LockDelay: dur(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetSessionId()
	if g := h.lock(t, &coordv1.LockRequest{Name: "kept", SessionId: id}); !g.GetAcquired() {
		t.Fatalf("Lock(kept) = %v", g)
	}
	h.clock.Advance(2 * time.Second) // the session expires, unrenewed
	if g := h.lock(t, &coordv1.LockRequest{Name: "kept", Ttl: dur(time.Minute)}); g.GetAcquired() {
		t.Fatalf("Lock 1s after the session expired (lock_delay 5s) = %v, want not acquired", g)
	}
	h.clock.Advance(3 * time.Second) // 4s after: still in the delay
	if g := h.lock(t, &coordv1.LockRequest{Name: "kept", Ttl: dur(time.Minute)}); g.GetAcquired() {
		t.Fatalf("Lock 4s after the session expired (lock_delay 5s) = %v, want not acquired", g)
	}
	h.clock.Advance(time.Second + time.Millisecond)
	if g := h.lock(t, &coordv1.LockRequest{Name: "kept", Ttl: dur(time.Minute)}); !g.GetAcquired() {
		t.Fatalf("Lock after the lock-delay = %v, want acquired", g)
	}
}

// TestLockDelayNotOnRelease: a lock its session's holder releases, or a
// session that ends by a half-close, sets no lock-delay.
func TestLockDelayNotOnRelease(t *testing.T) {
	h := newHarness(t)
	c := ctx(t)
	stream, err := h.sessions.KeepAlive(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&coordv1.KeepAliveRequest{Ttl: dur(30 * time.Second), LockDelay: dur(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetSessionId()
	a := h.lock(t, &coordv1.LockRequest{Name: "a", SessionId: id})
	if g := h.lock(t, &coordv1.LockRequest{Name: "b", SessionId: id}); !a.GetAcquired() || !g.GetAcquired() {
		t.Fatalf("Locks = %v, %v", a, g)
	}
	if rel, err := h.locks.Release(c, &coordv1.ReleaseRequest{Name: "a", Token: a.GetToken()}); err != nil || !rel.GetReleased() {
		t.Fatalf("Release = %v, %v", rel, err)
	}
	if g := h.lock(t, &coordv1.LockRequest{Name: "a", Ttl: dur(time.Minute)}); !g.GetAcquired() {
		t.Fatalf("Lock after a release = %v, want acquired at once (no lock-delay)", g)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("KeepAlive after half-close: %v, want the end of the stream", err)
	}
	if g := h.lock(t, &coordv1.LockRequest{Name: "b", Ttl: dur(time.Minute)}); !g.GetAcquired() {
		t.Fatalf("Lock after the session's clean end = %v, want acquired at once (no lock-delay)", g)
	}
}
