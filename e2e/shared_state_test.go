package e2e

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// TestLimitAndIdempotencyAcrossInstances: a rate limit and an idempotency
// key live in Redis, not in a coordd: A and B count one limit together, and
// a key begun on A is in progress on B and completed on B once A finishes
// it. So a client that moves to another instance (after a coordd crash)
// keeps its limits and its idempotency keys.
func TestLimitAndIdempotencyAcrossInstances(t *testing.T) {
	a, b := startPair(t)
	ctx := testContext(t, 30*time.Second)
	pair := [2]*instance{a, b}

	t.Run("limit", func(t *testing.T) {
		const limit = 10
		lim := &coordv1.Limit{Algorithm: coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: limit, Period: durationpb.New(time.Hour)}
		allowed := 0
		for i := range 2 * limit {
			on := pair[i%2]
			resp, err := coordv1.NewRateLimitServiceClient(on.conn).Allow(ctx, &coordv1.AllowRequest{Key: "shared", Limit: lim})
			if err != nil {
				t.Fatalf("Allow %d on %s: %v", i, on.Name, err)
			}
			if resp.GetAllowed() {
				allowed++
			}
		}
		if allowed != limit {
			t.Fatalf("A and B allowed %d calls in all; want the one limit, %d, shared", allowed, limit)
		}
	})

	t.Run("idempotency", func(t *testing.T) {
		ia, ib := coordv1.NewIdempotencyServiceClient(a.conn), coordv1.NewIdempotencyServiceClient(b.conn)
		begin := func(c coordv1.IdempotencyServiceClient) *coordv1.BeginIdempotentResponse {
			t.Helper()
			resp, err := c.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: "order-1", Fingerprint: "f", ProcessingTtl: durationpb.New(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		first := begin(ia)
		if first.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
			t.Fatalf("BeginIdempotent on A = %v, want EXECUTE", first)
		}
		if r := begin(ib); r.GetOutcome() != coordv1.Outcome_OUTCOME_IN_PROGRESS {
			t.Fatalf("BeginIdempotent on B while A's owner runs = %v, want IN_PROGRESS", r)
		}
		if _, err := ia.Finish(ctx, &coordv1.FinishRequest{Key: "order-1", OwnerToken: first.GetOwnerToken(), Result: []byte("done")}); err != nil {
			t.Fatal(err)
		}
		if r := begin(ib); r.GetOutcome() != coordv1.Outcome_OUTCOME_COMPLETED || string(r.GetResult()) != "done" {
			t.Fatalf("BeginIdempotent on B after A's Finish = %v, want COMPLETED with A's result", r)
		}
	})
}
