package e2e

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// TestRuntimePoliciesAcrossInstances: a runtime policy put on A is in force
// on B (same Redis Cluster, same key prefix) within a second, and counts
// one limit for both; deleted on A, B refuses it within a second.
func TestRuntimePoliciesAcrossInstances(t *testing.T) {
	a, b := startPair(t)
	ctx := testContext(t, 30*time.Second)
	la, lb := coordv1.NewRateLimitServiceClient(a.conn), coordv1.NewRateLimitServiceClient(b.conn)
	allowB := func() (*coordv1.AllowResponse, error) {
		return lb.Allow(ctx, &coordv1.AllowRequest{Key: "user:1", Policy: "per-user"})
	}
	// within calls f every 10ms until it reports true, for up to a second,
	// and returns how long that took.
	within := func(what string, f func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !f() {
			if time.Since(start) > time.Second {
				t.Fatalf("%s: not within a second", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(start)
	}
	if _, err := allowB(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Allow on B before the put: %v, want INVALID_ARGUMENT", err)
	}

	if _, err := la.PutPolicy(ctx, &coordv1.PutPolicyRequest{Policy: &coordv1.Policy{Name: "per-user", Limit: &coordv1.Limit{
		Algorithm: coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 3, Period: durationpb.New(time.Hour),
	}}}); err != nil {
		t.Fatal(err)
	}
	var first *coordv1.AllowResponse
	d := within("the put in force on B", func() bool {
		var err error
		first, err = allowB()
		return err == nil
	})
	t.Logf("the put was in force on B %v after PutPolicy returned", d)
	if !first.GetAllowed() || first.GetRemaining() != 2 {
		t.Fatalf("B's first Allow under the policy = %v, want allowed with 2 remaining", first)
	}
	// One limit for both instances.
	for i, c := range []coordv1.RateLimitServiceClient{la, lb, la} {
		r, err := c.Allow(ctx, &coordv1.AllowRequest{Key: "user:1", Policy: "per-user"})
		if err != nil || r.GetAllowed() != (i < 2) {
			t.Fatalf("Allow #%d after B's = %v, %v; want allowed %v (3 in all, shared)", i+2, r, err, i < 2)
		}
	}

	if r, err := la.DeletePolicy(ctx, &coordv1.DeletePolicyRequest{Name: "per-user"}); err != nil || !r.GetDeleted() {
		t.Fatalf("DeletePolicy on A = %v, %v", r, err)
	}
	d = within("the delete in force on B", func() bool {
		_, err := allowB()
		return status.Code(err) == codes.InvalidArgument
	})
	t.Logf("the delete was in force on B %v after DeletePolicy returned", d)
}
