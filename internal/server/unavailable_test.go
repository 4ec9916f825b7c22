package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
)

// withFaulty makes the services use a storetest.Faulty around the harness's
// memory store, and puts it in *f.
func withFaulty(f **storetest.Faulty) func(*config) {
	return func(c *config) {
		c.wrap = func(s store.Store) store.Store {
			*f = storetest.NewFaulty(s)
			return *f
		}
	}
}

var unPolicies = withPolicies(map[string]limiter.Policy{
	"open":   {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Minute}, OnStoreFailure: limiter.FailOpen},
	"closed": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Minute}},
})

func unReceipt() string { return store.MakeReceipt(token.New(), 1, token.New()) }

// TestStoreUnavailable: every unary RPC whose store call fails (before or
// after applying) answers UNAVAILABLE with reason STORE_UNAVAILABLE.
func TestStoreUnavailable(t *testing.T) {
	type call func(ctx context.Context, h *harness) error
	fixedWindow := inline(coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, 5, time.Minute, 0)
	for _, tc := range []struct {
		name   string
		method string // the store method that fails
		call   call
	}{
		{"Lock", "AcquireHold", func(ctx context.Context, h *harness) error {
			_, err := h.locks.Lock(ctx, &coordv1.LockRequest{Name: "a", Ttl: dur(time.Minute)})
			return err
		}},
		{"Lock/wait", "AcquireHold", func(ctx context.Context, h *harness) error {
			_, err := h.locks.Lock(ctx, &coordv1.LockRequest{Name: "a", Ttl: dur(time.Minute), Wait: dur(time.Second)})
			return err
		}},
		{"Renew", "RenewHold", func(ctx context.Context, h *harness) error {
			_, err := h.locks.Renew(ctx, &coordv1.RenewRequest{Name: "a", Token: token.New(), Ttl: dur(time.Minute)})
			return err
		}},
		{"Release", "ReleaseHold", func(ctx context.Context, h *harness) error {
			_, err := h.locks.Release(ctx, &coordv1.ReleaseRequest{Name: "a", Token: token.New()})
			return err
		}},
		{"GetHolds", "GetHolds", func(ctx context.Context, h *harness) error {
			_, err := h.locks.GetLock(ctx, &coordv1.GetLockRequest{Name: "a"})
			return err
		}},
		{"Lock/shared", "AcquireHold", func(ctx context.Context, h *harness) error {
			_, err := h.locks.Lock(ctx, &coordv1.LockRequest{Name: "a", Ttl: dur(time.Minute), Shared: true})
			return err
		}},
		{"ShouldRateLimit", "CountHits", func(ctx context.Context, h *harness) error {
			_, err := h.rls().ShouldRateLimit(ctx, rlsReq("web", "remote_address", "10.0.0.1"))
			return err
		}},
		{"ShouldRateLimit/algorithm", "Allow", func(ctx context.Context, h *harness) error {
			_, err := h.rls().ShouldRateLimit(ctx, rlsReq("web", "bucket", "b"))
			return err
		}},
		{"CheckFence", "CheckFence", func(ctx context.Context, h *harness) error {
			_, err := h.locks.CheckFence(ctx, &coordv1.CheckFenceRequest{Name: "a", Fence: 1})
			return err
		}},
		{"Acquire", "AcquireHold", func(ctx context.Context, h *harness) error {
			_, err := h.semaphores.Acquire(ctx, &coordv1.AcquireRequest{Name: "s", Limit: 2, Ttl: dur(time.Minute)})
			return err
		}},
		{"Acquire/wait", "AcquireHold", func(ctx context.Context, h *harness) error {
			_, err := h.semaphores.Acquire(ctx, &coordv1.AcquireRequest{Name: "s", Limit: 2, Ttl: dur(time.Minute), Wait: dur(time.Second)})
			return err
		}},
		{"SemaphoreService.Renew", "RenewHold", func(ctx context.Context, h *harness) error {
			_, err := h.semaphores.Renew(ctx, &coordv1.SemaphoreServiceRenewRequest{Name: "s", Token: token.New(), Ttl: dur(time.Minute)})
			return err
		}},
		{"SemaphoreService.Release", "ReleaseHold", func(ctx context.Context, h *harness) error {
			_, err := h.semaphores.Release(ctx, &coordv1.SemaphoreServiceReleaseRequest{Name: "s", Token: token.New()})
			return err
		}},
		{"GetSemaphore", "GetHolds", func(ctx context.Context, h *harness) error {
			_, err := h.semaphores.GetSemaphore(ctx, &coordv1.GetSemaphoreRequest{Name: "s"})
			return err
		}},
		{"Campaign", "Campaign", func(ctx context.Context, h *harness) error {
			_, err := h.elections.Campaign(ctx, &coordv1.CampaignRequest{Name: "e", Value: []byte("v"), SessionId: token.New()})
			return err
		}},
		{"Proclaim", "Proclaim", func(ctx context.Context, h *harness) error {
			_, err := h.elections.Proclaim(ctx, &coordv1.ProclaimRequest{Name: "e", Token: token.New(), Value: []byte("v")})
			return err
		}},
		{"Resign", "ReleaseHold", func(ctx context.Context, h *harness) error {
			_, err := h.elections.Resign(ctx, &coordv1.ResignRequest{Name: "e", Token: token.New()})
			return err
		}},
		{"Leader", "Leader", func(ctx context.Context, h *harness) error {
			_, err := h.elections.Leader(ctx, &coordv1.LeaderRequest{Name: "e"})
			return err
		}},
		{"Allow/inline", "Allow", func(ctx context.Context, h *harness) error {
			_, err := h.limits.Allow(ctx, &coordv1.AllowRequest{Key: "k", Limit: fixedWindow})
			return err
		}},
		{"Allow/inline/peek", "Allow", func(ctx context.Context, h *harness) error {
			_, err := h.limits.Allow(ctx, &coordv1.AllowRequest{Key: "k", Limit: fixedWindow, Peek: true})
			return err
		}},
		{"Allow/fail-closed policy", "Allow", func(ctx context.Context, h *harness) error {
			_, err := h.limits.Allow(ctx, &coordv1.AllowRequest{Key: "k", Policy: "closed"})
			return err
		}},
		{"BeginIdempotent", "BeginIdempotent", func(ctx context.Context, h *harness) error {
			_, err := h.idem.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "f"})
			return err
		}},
		{"BeginIdempotent/wait", "BeginIdempotent", func(ctx context.Context, h *harness) error {
			_, err := h.idem.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "f", Wait: dur(time.Second)})
			return err
		}},
		{"Finish", "FinishIdempotent", func(ctx context.Context, h *harness) error {
			_, err := h.idem.Finish(ctx, &coordv1.FinishRequest{Key: "k", OwnerToken: token.New(), Result: []byte("r")})
			return err
		}},
		{"ExtendIdempotent", "ExtendIdempotent", func(ctx context.Context, h *harness) error {
			_, err := h.idem.ExtendIdempotent(ctx, &coordv1.ExtendIdempotentRequest{Key: "k", OwnerToken: token.New(), ProcessingTtl: dur(time.Minute)})
			return err
		}},
		{"Enqueue", "Enqueue", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("p")})
			return err
		}},
		{"Enqueue/dedup", "Enqueue", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("p"), DedupId: "d"})
			return err
		}},
		{"Claim", "Claim", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Claim(ctx, &coordv1.ClaimRequest{Queue: "q"})
			return err
		}},
		{"Claim/wait", "Claim", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Claim(ctx, &coordv1.ClaimRequest{Queue: "q", Wait: dur(100 * time.Millisecond)})
			return err
		}},
		{"Ack", "Ack", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Ack(ctx, &coordv1.AckRequest{Queue: "q", Receipt: unReceipt()})
			return err
		}},
		{"Nack", "Nack", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Nack(ctx, &coordv1.NackRequest{Queue: "q", Receipt: unReceipt()})
			return err
		}},
		{"Extend", "ExtendClaim", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Extend(ctx, &coordv1.ExtendRequest{Queue: "q", Receipt: unReceipt(), VisibilityTimeout: dur(time.Minute)})
			return err
		}},
		{"Stats", "Stats", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Stats(ctx, &coordv1.StatsRequest{Queue: "q"})
			return err
		}},
		{"Redrive", "Redrive", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Redrive(ctx, &coordv1.RedriveRequest{Queue: "q"})
			return err
		}},
		{"RedriveByID", "RedriveIDs", func(ctx context.Context, h *harness) error {
			_, err := h.queues.Redrive(ctx, &coordv1.RedriveRequest{Queue: "q", MessageIds: []string{"0123456789abcdef0123456789abcdef"}})
			return err
		}},
		{"ListDeadLetters", "ListDead", func(ctx context.Context, h *harness) error {
			_, err := h.queues.ListDeadLetters(ctx, &coordv1.ListDeadLettersRequest{Queue: "q"})
			return err
		}},
		{"PurgeDeadLetters", "PurgeDead", func(ctx context.Context, h *harness) error {
			_, err := h.queues.PurgeDeadLetters(ctx, &coordv1.PurgeDeadLettersRequest{Queue: "q"})
			return err
		}},
	} {
		for _, mode := range []struct {
			name  string
			fault storetest.Fault
		}{
			{"fail", storetest.Fault{Fail: true}},
			{"fail after applying", storetest.Fault{FailAfter: true}},
		} {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				var f *storetest.Faulty
				h := newHarness(t, withFaulty(&f), unPolicies, withEnvoy(t, envoyConf))
				f.Set(tc.method, mode.fault)
				wantStatus(t, tc.call(ctx(t), h), codes.Unavailable, "STORE_UNAVAILABLE")
				if f.Calls(tc.method) == 0 {
					t.Errorf("the store's %s was never called", tc.method)
				}
				// The server answers again once the store does.
				f.Clear()
				// (A state conflict is fine: the request names nothing that exists.)
				if err := tc.call(ctx(t), h); err != nil {
					wantStatus(t, err, codes.FailedPrecondition, "")
				}
			})
		}
	}
}

// TestLockUncertainGrantIsReleased: a Lock whose grant was applied but whose
// answer was lost answers UNAVAILABLE and leaves the lock free.
func TestLockUncertainGrantIsReleased(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withFaulty(&f))
	f.FailAfter("AcquireHold")
	_, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "a", Owner: "me", Ttl: dur(time.Minute)})
	wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
	f.Clear()
	if info := h.held(t, "a"); info.GetHeld() {
		t.Fatalf("GetLock after the uncertain Lock = %v, want not held", info)
	}
	if g := h.lock(t, &coordv1.LockRequest{Name: "a", Ttl: dur(time.Minute)}); !g.GetAcquired() {
		t.Fatalf("Lock after the fault = %v, want acquired", g)
	}
}

// TestAcquireUncertainGrantIsReleased: an Acquire whose permit was granted
// but whose answer was lost answers UNAVAILABLE and leaves the permit free.
func TestAcquireUncertainGrantIsReleased(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withFaulty(&f))
	f.FailAfter("AcquireHold")
	_, err := h.semaphores.Acquire(ctx(t), &coordv1.AcquireRequest{Name: "s", Limit: 1, Owner: "me", Ttl: dur(time.Minute)})
	wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
	f.Clear()
	if g := h.getSemaphore(t, ctx(t), "s"); len(g.GetHolders()) != 0 {
		t.Fatalf("GetSemaphore after the uncertain Acquire = %v, want no holder", g)
	}
	if g := h.acquire(t, ctx(t), &coordv1.AcquireRequest{Name: "s", Limit: 1, Ttl: dur(time.Minute)}); !g.GetAcquired() {
		t.Fatalf("Acquire after the fault = %v, want acquired", g)
	}
}

// TestCampaignUncertainTermIsEnded: a Campaign whose term began but whose
// answer was lost answers UNAVAILABLE, and the term is ended, so that
// another candidate is elected.
func TestCampaignUncertainTermIsEnded(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withFaulty(&f))
	_, s1 := h.openSession(t, "", 30*time.Second)
	_, s2 := h.openSession(t, "", 30*time.Second)
	f.FailAfter("Campaign")
	_, err := h.elections.Campaign(ctx(t), &coordv1.CampaignRequest{Name: "e", Value: []byte("1"), SessionId: s1.GetSessionId()})
	wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
	f.Clear()
	if l := h.leader(t, ctx(t), "e"); l.GetHasLeader() {
		t.Fatalf("Leader after the uncertain Campaign = %v, want none", l)
	}
	if c := h.campaign(t, ctx(t), &coordv1.CampaignRequest{Name: "e", Value: []byte("2"), SessionId: s2.GetSessionId()}); !c.GetElected() {
		t.Fatalf("Campaign after the fault = %v, want elected", c)
	}
}

// TestBeginUncertainClaimIsCleared: a BeginIdempotent whose claim was
// applied but whose answer was lost answers UNAVAILABLE and leaves the key
// free, so the caller's retry executes at once.
func TestBeginUncertainClaimIsCleared(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withFaulty(&f))
	f.FailAfter("BeginIdempotent")
	_, err := h.idem.BeginIdempotent(ctx(t), &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "fp"})
	wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
	f.Clear()
	if r := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "fp"}); r.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
		t.Fatalf("retry after the uncertain Begin = %v, want EXECUTE", r)
	}
}

func TestAllowFailOpen(t *testing.T) {
	for _, mode := range []struct {
		name     string
		fault    storetest.Fault
		consumed bool // the store applied the calls it failed to answer
	}{
		{"fail", storetest.Fault{Fail: true}, false},
		{"fail after applying", storetest.Fault{FailAfter: true}, true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var f *storetest.Faulty
			h := newHarness(t, withFaulty(&f), unPolicies)
			f.Set("Allow", mode.fault)
			for i := 0; i < 10; i++ { // more than the limit of 5
				resp := h.allow(t, &coordv1.AllowRequest{Key: "k", Policy: "open"})
				if !resp.GetAllowed() || !resp.GetDegraded() || resp.GetLimit() != 5 {
					t.Fatalf("call %d: %v; want allowed, degraded, limit 5", i+1, resp)
				}
			}
			f.Clear()
			resp := h.allow(t, &coordv1.AllowRequest{Key: "k", Policy: "open"})
			if resp.GetDegraded() || resp.GetAllowed() == mode.consumed {
				t.Fatalf("after the fault cleared: %v; want allowed %v, not degraded", resp, !mode.consumed)
			}
		})
	}
}

// unStream opens a KeepAlive stream.
func unStream(t *testing.T, h *harness) coordv1.SessionService_KeepAliveClient {
	t.Helper()
	stream, err := h.sessions.KeepAlive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

func unSend(t *testing.T, stream coordv1.SessionService_KeepAliveClient, id string, ttl time.Duration) {
	t.Helper()
	req := &coordv1.KeepAliveRequest{SessionId: id}
	if ttl > 0 {
		req.Ttl = dur(ttl)
	}
	if err := stream.Send(req); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

func TestKeepAliveStoreUnavailable(t *testing.T) {
	for _, mode := range []struct {
		name  string
		fault storetest.Fault
	}{
		{"fail", storetest.Fault{Fail: true}},
		{"fail after applying", storetest.Fault{FailAfter: true}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Run("create", func(t *testing.T) {
				var f *storetest.Faulty
				h := newHarness(t, withFaulty(&f))
				f.Set("CreateSession", mode.fault)
				stream := unStream(t, h)
				unSend(t, stream, "", time.Minute)
				_, err := stream.Recv()
				wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
			})
			t.Run("heartbeat", func(t *testing.T) {
				var f *storetest.Faulty
				h := newHarness(t, withFaulty(&f))
				stream := unStream(t, h)
				unSend(t, stream, "", time.Minute)
				first, err := stream.Recv()
				if err != nil {
					t.Fatal(err)
				}
				f.Set("KeepAliveSession", mode.fault)
				unSend(t, stream, first.GetSessionId(), 0)
				_, err = stream.Recv()
				wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
			})
			t.Run("resume", func(t *testing.T) {
				var f *storetest.Faulty
				h := newHarness(t, withFaulty(&f))
				s, err := h.st.CreateSession(ctx(t), store.Scope("default", token.New()), time.Minute, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.Set("ResumeSession", mode.fault)
				stream := unStream(t, h)
				unSend(t, stream, store.Unscope("default", s.ID), 0)
				_, err = stream.Recv()
				wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
			})
			t.Run("expiry check", func(t *testing.T) {
				var f *storetest.Faulty
				h := newHarness(t, withFaulty(&f))
				f.Set("CheckSession", mode.fault)
				stream := unStream(t, h)
				unSend(t, stream, "", 50*time.Millisecond)
				if _, err := stream.Recv(); err != nil {
					t.Fatal(err)
				}
				_, err := stream.Recv() // the expiry timer's check fails
				wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
			})
			t.Run("half-close", func(t *testing.T) {
				var f *storetest.Faulty
				h := newHarness(t, withFaulty(&f))
				stream := unStream(t, h)
				unSend(t, stream, "", time.Minute)
				if _, err := stream.Recv(); err != nil {
					t.Fatal(err)
				}
				f.Set("CloseSession", mode.fault)
				if err := stream.CloseSend(); err != nil {
					t.Fatal(err)
				}
				_, err := stream.Recv()
				wantStatus(t, err, codes.Unavailable, "STORE_UNAVAILABLE")
			})
		})
	}
}

// TestWaitWithoutWakeups: when the store cannot subscribe to wake-ups, a
// waiting Lock still gets the lock once it is released, by re-checking (about
// every second) instead of failing.
func TestWaitWithoutWakeups(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withFaulty(&f))
	holder := h.lock(t, &coordv1.LockRequest{Name: "a", Ttl: dur(time.Minute)})
	f.Set("Subscribe", storetest.Fault{Fail: true})
	got := make(chan *coordv1.LockResponse, 1)
	go func() {
		resp, err := h.locks.Lock(ctx(t), &coordv1.LockRequest{Name: "a", Ttl: dur(time.Minute), Wait: dur(20 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := h.locks.Release(ctx(t), &coordv1.ReleaseRequest{Name: "a", Token: holder.GetToken()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if resp := <-got; !resp.GetAcquired() {
		t.Fatalf("waiter got %v, want the lock", resp)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the waiter took %v after the release, want about a second", took)
	}
}
