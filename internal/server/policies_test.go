package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
)

func withConfigPolicy(c *config) {
	c.services.Policies = map[string]limiter.Policy{
		"api": {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 100, Period: time.Second}, OnStoreFailure: limiter.FailOpen},
	}
}

func rtPolicy(name string, limit int64) *coordv1.Policy {
	return &coordv1.Policy{Name: name, Limit: &coordv1.Limit{
		Algorithm: coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: limit, Period: durationpb.New(time.Hour),
	}}
}

// PutPolicy, Allow under it, ListPolicies (runtime and config apart),
// DeletePolicy: each change logged with its namespace, and counted; the
// runtime policy's decisions under the policy label "runtime".
func TestRuntimePolicies(t *testing.T) {
	var log syncBuffer
	var reg *prometheus.Registry
	h := newHarness(t, withConfigPolicy, withLog(&log), withMetrics(&reg))
	put, err := h.limits.PutPolicy(ctx(t), &coordv1.PutPolicyRequest{Policy: rtPolicy("per-user", 2)})
	if err != nil || !put.GetCreated() {
		t.Fatalf("PutPolicy = %v, %v; want created", put, err)
	}
	for i, want := range []bool{true, true, false} {
		r, err := h.limits.Allow(ctx(t), &coordv1.AllowRequest{Key: "u1", Policy: "per-user"})
		if err != nil || r.GetAllowed() != want || r.GetLimit() != 2 {
			t.Fatalf("Allow #%d under the runtime policy = %v, %v; want allowed %v of 2", i, r, err, want)
		}
	}
	put, err = h.limits.PutPolicy(ctx(t), &coordv1.PutPolicyRequest{Policy: rtPolicy("per-user", 3)})
	if err != nil || put.GetCreated() {
		t.Fatalf("PutPolicy again = %v, %v; want replaced", put, err)
	}
	if r, err := h.limits.Allow(ctx(t), &coordv1.AllowRequest{Key: "u1", Policy: "per-user"}); err != nil || !r.GetAllowed() || r.GetLimit() != 3 {
		t.Fatalf("Allow under the replaced policy = %v, %v; want allowed, its keys afresh", r, err)
	}
	l, err := h.limits.ListPolicies(ctx(t), &coordv1.ListPoliciesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.GetRuntime()) != 1 || l.GetRuntime()[0].GetName() != "per-user" || l.GetRuntime()[0].GetLimit().GetLimit() != 3 {
		t.Errorf("ListPolicies runtime = %v, want per-user of 3", l.GetRuntime())
	}
	if len(l.GetConfig()) != 1 || l.GetConfig()[0].GetName() != "api" ||
		l.GetConfig()[0].GetOnStoreFailure() != coordv1.OnStoreFailure_ON_STORE_FAILURE_FAIL_OPEN {
		t.Errorf("ListPolicies config = %v, want api, failing open", l.GetConfig())
	}
	del, err := h.limits.DeletePolicy(ctx(t), &coordv1.DeletePolicyRequest{Name: "per-user"})
	if err != nil || !del.GetDeleted() {
		t.Fatalf("DeletePolicy = %v, %v; want deleted", del, err)
	}
	_, err = h.limits.Allow(ctx(t), &coordv1.AllowRequest{Key: "u1", Policy: "per-user"})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	if del, err := h.limits.DeletePolicy(ctx(t), &coordv1.DeletePolicyRequest{Name: "per-user"}); err != nil || del.GetDeleted() {
		t.Fatalf("DeletePolicy again = %v, %v; want not deleted", del, err)
	}

	for _, want := range []string{`"msg":"runtime rate-limit policy put"`, `"msg":"runtime rate-limit policy deleted"`, `"namespace":"default"`, `"policy":"per-user"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log has no %s:\n%s", want, log.String())
		}
	}
	if n := metricValue(t, reg, "coordd_ratelimit_policy_changes_total", "op", "put"); n != 2 {
		t.Errorf("puts counted: %v, want 2", n)
	}
	if n := metricValue(t, reg, "coordd_ratelimit_decisions_total", "policy", "runtime", "algorithm", "fixed_window", "result", "denied"); n != 1 {
		t.Errorf("runtime denials counted: %v, want 1", n)
	}
}

// A config policy's name can be neither put nor deleted; past
// ratelimit.max_policies_per_namespace a new policy is refused naming the
// key, and nothing is stored.
func TestRuntimePolicyRefusals(t *testing.T) {
	h := newHarness(t, withConfigPolicy, func(c *config) { c.services.Limiter.MaxPoliciesPerNamespace = 2 })
	_, err := h.limits.PutPolicy(ctx(t), &coordv1.PutPolicyRequest{Policy: rtPolicy("api", 2)})
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_FROM_CONFIG")
	_, err = h.limits.DeletePolicy(ctx(t), &coordv1.DeletePolicyRequest{Name: "api"})
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_FROM_CONFIG")
	for _, n := range []string{"a", "b", "b"} {
		if _, err := h.limits.PutPolicy(ctx(t), &coordv1.PutPolicyRequest{Policy: rtPolicy(n, 2)}); err != nil {
			t.Fatalf("PutPolicy %s: %v", n, err)
		}
	}
	_, err = h.limits.PutPolicy(ctx(t), &coordv1.PutPolicyRequest{Policy: rtPolicy("c", 2)})
	st := wantStatus(t, err, codes.ResourceExhausted, "TOO_MANY_POLICIES")
	if !strings.Contains(st.Message(), "ratelimit.max_policies_per_namespace") {
		t.Errorf("message %q does not name ratelimit.max_policies_per_namespace", st.Message())
	}
	if l, err := h.limits.ListPolicies(ctx(t), &coordv1.ListPoliciesRequest{}); err != nil || len(l.GetRuntime()) != 2 {
		t.Fatalf("ListPolicies after the refusal = %v, %v; want a and b", l, err)
	}
}

// Runtime policies are the namespace's: another tenant neither sees nor
// uses nor deletes them, and may have its own of the same name.
func TestRuntimePoliciesPerNamespace(t *testing.T) {
	h := newHarness(t, withAuth(twoTenants(t)))
	if _, err := h.limits.PutPolicy(as(t, keyA), &coordv1.PutPolicyRequest{Policy: rtPolicy("p", 1)}); err != nil {
		t.Fatal(err)
	}
	_, err := h.limits.Allow(as(t, keyB), &coordv1.AllowRequest{Key: "k", Policy: "p"})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	if l, err := h.limits.ListPolicies(as(t, keyB), &coordv1.ListPoliciesRequest{}); err != nil || len(l.GetRuntime()) != 0 {
		t.Fatalf("ListPolicies of tenant B = %v, %v; want none", l, err)
	}
	if d, err := h.limits.DeletePolicy(as(t, keyB), &coordv1.DeletePolicyRequest{Name: "p"}); err != nil || d.GetDeleted() {
		t.Fatalf("DeletePolicy by tenant B = %v, %v; want nothing deleted", d, err)
	}
	if _, err := h.limits.PutPolicy(as(t, keyB), &coordv1.PutPolicyRequest{Policy: rtPolicy("p", 5)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key   string
		limit int64
	}{{keyA, 1}, {keyB, 5}} {
		r, err := h.limits.Allow(as(t, c.key), &coordv1.AllowRequest{Key: "k", Policy: "p"})
		if err != nil || !r.GetAllowed() || r.GetLimit() != c.limit {
			t.Errorf("Allow = %v, %v; want allowed under the tenant's own p of %d", r, err, c.limit)
		}
	}
}
