package server_test

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

func (h *harness) begin(t testing.TB, req *coordv1.BeginIdempotentRequest) *coordv1.BeginIdempotentResponse {
	t.Helper()
	resp, err := h.idem.BeginIdempotent(ctx(t), req)
	if err != nil {
		t.Fatalf("BeginIdempotent(%v): %v", req, err)
	}
	return resp
}

func (h *harness) finish(t testing.TB, req *coordv1.FinishRequest) {
	t.Helper()
	resp, err := h.idem.Finish(ctx(t), req)
	if err != nil || !resp.GetStored() {
		t.Fatalf("Finish(%v) = %v, %v", req, resp, err)
	}
}

func TestIdempotentExecuteThenReplay(t *testing.T) {
	h := newHarness(t)
	req := &coordv1.BeginIdempotentRequest{Key: "charge-1", Fingerprint: "sha256:aa"}
	first := h.begin(t, req)
	if first.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE || len(first.GetOwnerToken()) != 32 {
		t.Fatalf("first Begin = %v, want EXECUTE with an owner token", first)
	}
	if again := h.begin(t, req); again.GetOutcome() != coordv1.Outcome_OUTCOME_IN_PROGRESS || again.GetOwnerToken() != "" {
		t.Fatalf("Begin while in progress = %v, want IN_PROGRESS without a token", again)
	}
	h.finish(t, &coordv1.FinishRequest{Key: "charge-1", OwnerToken: first.GetOwnerToken(), Result: []byte("receipt #42")})
	for i := 0; i < 2; i++ {
		replay := h.begin(t, req)
		if replay.GetOutcome() != coordv1.Outcome_OUTCOME_COMPLETED || string(replay.GetResult()) != "receipt #42" {
			t.Fatalf("replay %d = %v, want COMPLETED with the result", i, replay)
		}
	}
	_, err := h.idem.Finish(ctx(t), &coordv1.FinishRequest{Key: "charge-1", OwnerToken: first.GetOwnerToken(), Result: []byte("again")})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_OWNER")
}

func TestIdempotentOneExecuteAmongConcurrentCallers(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	outcomes := make(chan coordv1.Outcome, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := h.idem.BeginIdempotent(ctx(t), &coordv1.BeginIdempotentRequest{Key: "race", Fingerprint: "f"})
			if err != nil {
				t.Error(err)
				return
			}
			outcomes <- resp.GetOutcome()
		}()
	}
	wg.Wait()
	close(outcomes)
	count := map[coordv1.Outcome]int{}
	for o := range outcomes {
		count[o]++
	}
	if count[coordv1.Outcome_OUTCOME_EXECUTE] != 1 || count[coordv1.Outcome_OUTCOME_IN_PROGRESS] != 99 {
		t.Fatalf("outcomes %v, want exactly one EXECUTE and 99 IN_PROGRESS", count)
	}
}

func TestIdempotentFingerprintMismatch(t *testing.T) {
	h := newHarness(t, withFakeClock)
	begin := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "a", ProcessingTtl: dur(time.Second)})
	check := func(state string) {
		t.Helper()
		resp, err := h.idem.BeginIdempotent(ctx(t), &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "b"})
		if err == nil {
			t.Fatalf("%s: Begin with another fingerprint = %v, want FINGERPRINT_MISMATCH", state, resp)
		}
		wantStatus(t, err, codes.FailedPrecondition, "FINGERPRINT_MISMATCH")
	}
	check("in progress")
	h.clock.Advance(2 * time.Second) // abandoned: a takeover must match too
	check("abandoned")
	takeover := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "a"})
	if takeover.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE || takeover.GetOwnerToken() == begin.GetOwnerToken() {
		t.Fatalf("takeover = %v, want EXECUTE with a new owner", takeover)
	}
	h.finish(t, &coordv1.FinishRequest{Key: "k", OwnerToken: takeover.GetOwnerToken(), Result: []byte("r")})
	check("completed")
	h.clock.Advance(25 * time.Hour) // the result expired: the key is free again
	failed := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "k", Fingerprint: "a"})
	h.finish(t, &coordv1.FinishRequest{Key: "k", OwnerToken: failed.GetOwnerToken(), Failure: &coordv1.Failure{Message: "no"}})
	check("failed")
}

func TestIdempotentNotOwnerAfterTakeover(t *testing.T) {
	h := newHarness(t, withFakeClock)
	slow := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "job", Fingerprint: "f", ProcessingTtl: dur(5 * time.Second)})
	h.clock.Advance(3 * time.Second)
	ext, err := h.idem.ExtendIdempotent(ctx(t), &coordv1.ExtendIdempotentRequest{Key: "job", OwnerToken: slow.GetOwnerToken(), ProcessingTtl: dur(5 * time.Second)})
	if err != nil || !ext.GetExpireTime().AsTime().Equal(epoch.Add(8*time.Second)) {
		t.Fatalf("ExtendIdempotent = %v, %v; want the lease to end at +8s", ext, err)
	}
	h.clock.Advance(5 * time.Second) // the extended lease runs out
	fast := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "job", Fingerprint: "f"})
	if fast.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
		t.Fatalf("Begin after the lease ran out = %v, want a takeover", fast)
	}
	_, err = h.idem.Finish(ctx(t), &coordv1.FinishRequest{Key: "job", OwnerToken: slow.GetOwnerToken(), Result: []byte("stale")})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_OWNER")
	_, err = h.idem.ExtendIdempotent(ctx(t), &coordv1.ExtendIdempotentRequest{Key: "job", OwnerToken: slow.GetOwnerToken(), ProcessingTtl: dur(time.Second)})
	wantStatus(t, err, codes.FailedPrecondition, "NOT_OWNER")
	h.finish(t, &coordv1.FinishRequest{Key: "job", OwnerToken: fast.GetOwnerToken(), Result: []byte("fresh")})
	if r := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "job", Fingerprint: "f"}); string(r.GetResult()) != "fresh" {
		t.Fatalf("stored result %q, want the new owner's", r.GetResult())
	}
}

func TestIdempotentFailures(t *testing.T) {
	h := newHarness(t, withFakeClock)
	req := &coordv1.BeginIdempotentRequest{Key: "retryable", Fingerprint: "f"}
	b := h.begin(t, req)
	h.finish(t, &coordv1.FinishRequest{Key: "retryable", OwnerToken: b.GetOwnerToken(), Failure: &coordv1.Failure{Message: "timeout", Retryable: true}})
	if again := h.begin(t, req); again.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
		t.Fatalf("Begin after a retryable failure = %v, want EXECUTE again", again)
	}

	req = &coordv1.BeginIdempotentRequest{Key: "terminal", Fingerprint: "f"}
	b = h.begin(t, req)
	h.finish(t, &coordv1.FinishRequest{Key: "terminal", OwnerToken: b.GetOwnerToken(),
		Failure: &coordv1.Failure{Message: "card declined"}, ResultTtl: dur(time.Hour)})
	cached := h.begin(t, req)
	if cached.GetOutcome() != coordv1.Outcome_OUTCOME_FAILED || cached.GetFailure().GetMessage() != "card declined" ||
		!cached.GetExpireTime().AsTime().Equal(epoch.Add(time.Hour)) {
		t.Fatalf("Begin after a terminal failure = %v, want FAILED cached for an hour", cached)
	}
	h.clock.Advance(time.Hour)
	if after := h.begin(t, req); after.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
		t.Fatalf("Begin after result_ttl = %v, want EXECUTE", after)
	}
}

// TestIdempotentWaitReturnsResult: a waiting Begin is woken by the owner's
// Finish and answers with the result.
func TestIdempotentWaitReturnsResult(t *testing.T) {
	h := newHarness(t)
	owner := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "slow", Fingerprint: "f", ProcessingTtl: dur(time.Minute)})
	got := make(chan *coordv1.BeginIdempotentResponse, 1)
	start := time.Now()
	go func() {
		got <- h.begin(t, &coordv1.BeginIdempotentRequest{Key: "slow", Fingerprint: "f", Wait: dur(30 * time.Second)})
	}()
	time.Sleep(50 * time.Millisecond) // let it wait
	h.finish(t, &coordv1.FinishRequest{Key: "slow", OwnerToken: owner.GetOwnerToken(), Result: []byte("done")})
	r := <-got
	if r.GetOutcome() != coordv1.Outcome_OUTCOME_COMPLETED || string(r.GetResult()) != "done" {
		t.Fatalf("waiting Begin = %v, want COMPLETED with the result", r)
	}
	t.Logf("waiter answered %v after it started (50ms of which before the Finish)", time.Since(start))
	if time.Since(start) > 10*time.Second {
		t.Fatal("the waiter was not woken by the Finish")
	}
	// A wait that passes answers IN_PROGRESS.
	h.begin(t, &coordv1.BeginIdempotentRequest{Key: "stuck", Fingerprint: "f", ProcessingTtl: dur(time.Minute)})
	if r := h.begin(t, &coordv1.BeginIdempotentRequest{Key: "stuck", Fingerprint: "f", Wait: dur(100 * time.Millisecond)}); r.GetOutcome() != coordv1.Outcome_OUTCOME_IN_PROGRESS {
		t.Fatalf("Begin after its wait = %v, want IN_PROGRESS", r)
	}
}
