package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

type rateLimitServer struct {
	coordv1.UnimplementedRateLimitServiceServer
	svc     *limiter.Service
	metrics *metrics.Metrics
	log     *slog.Logger
}

func (s *rateLimitServer) Allow(ctx context.Context, req *coordv1.AllowRequest) (*coordv1.AllowResponse, error) {
	wait, err := nonNegative("wait", req.GetWait())
	if err != nil {
		return nil, err
	}
	r := limiter.Request{NS: namespace(ctx), Key: req.GetKey(), Policy: req.GetPolicy(), Cost: req.GetCost(), Peek: req.GetPeek(), Wait: wait}
	if l := req.GetLimit(); l != nil {
		period, err := required("limit.period", l.GetPeriod())
		if err != nil {
			return nil, err
		}
		r.Limit = &store.Limit{Algorithm: store.Algorithm(l.GetAlgorithm()), Limit: l.GetLimit(), Period: period, Burst: l.GetBurst()}
	}
	res, err := s.svc.Allow(ctx, r)
	if err != nil {
		return nil, err
	}
	result := "denied"
	switch {
	case res.Local && res.Allowed:
		result = "local_allowed"
	case res.Local:
		result = "local_denied"
	case res.Degraded:
		result = "degraded"
	case res.ShadowDenied:
		result = "shadow_denied"
	case res.Allowed:
		result = "allowed"
	}
	policy := r.Policy
	if res.Runtime {
		policy = metrics.RuntimePolicy // a client's name: never a label value
	}
	s.metrics.Decision(policy, limiter.AlgorithmName(res.Algorithm), result)
	if res.Cached {
		s.metrics.DenyCacheHit()
	}
	return &coordv1.AllowResponse{
		Allowed: res.Allowed, Remaining: res.Remaining, Limit: res.Limit,
		RetryAfter: durationpb.New(res.RetryAfter), ResetAfter: durationpb.New(res.ResetAfter),
		Degraded: res.Degraded, ShadowDenied: res.ShadowDenied, DeniedBy: res.DeniedBy,
	}, nil
}

func (s *rateLimitServer) PutPolicy(ctx context.Context, req *coordv1.PutPolicyRequest) (*coordv1.PutPolicyResponse, error) {
	if req.GetPolicy() == nil {
		return nil, validate.Errorf("policy", "is required")
	}
	p, err := policyOf(req.GetPolicy())
	if err != nil {
		return nil, err
	}
	ns, name := namespace(ctx), req.GetPolicy().GetName()
	created, err := s.svc.PutPolicy(ctx, ns, name, p)
	if err != nil {
		return nil, err
	}
	s.metrics.PolicyChanged("put")
	s.log.InfoContext(ctx, "runtime rate-limit policy put", "namespace", ns, "policy", name, "created", created, "limits", describeLimits(p))
	return &coordv1.PutPolicyResponse{Created: created}, nil
}

func (s *rateLimitServer) DeletePolicy(ctx context.Context, req *coordv1.DeletePolicyRequest) (*coordv1.DeletePolicyResponse, error) {
	ns := namespace(ctx)
	deleted, err := s.svc.DeletePolicy(ctx, ns, req.GetName())
	if err != nil {
		return nil, err
	}
	if deleted {
		s.metrics.PolicyChanged("deleted")
		s.log.InfoContext(ctx, "runtime rate-limit policy deleted", "namespace", ns, "policy", req.GetName())
	}
	return &coordv1.DeletePolicyResponse{Deleted: deleted}, nil
}

func (s *rateLimitServer) ListPolicies(ctx context.Context, _ *coordv1.ListPoliciesRequest) (*coordv1.ListPoliciesResponse, error) {
	runtime, err := s.svc.ListPolicies(ctx, namespace(ctx))
	if err != nil {
		return nil, err
	}
	return &coordv1.ListPoliciesResponse{Runtime: policies(runtime), Config: policies(s.svc.Policies())}, nil
}

// policyOf converts the API's policy; the limiter checks it (naming the
// same fields).
func policyOf(pp *coordv1.Policy) (limiter.Policy, error) {
	p := limiter.Policy{Shadow: pp.GetShadow(), OnStoreFailure: limiter.OnStoreFailure(pp.GetOnStoreFailure()), LocalQuota: pp.GetLocalQuota()}
	var err error
	if l := pp.GetLimit(); l != nil {
		if p.Limit, err = limitOf("policy.limit", l); err != nil {
			return limiter.Policy{}, err
		}
	}
	for i, nl := range pp.GetLimits() {
		var l store.Limit
		if nl.GetLimit() != nil {
			if l, err = limitOf(fmt.Sprintf("policy.limits[%d].limit", i), nl.GetLimit()); err != nil {
				return limiter.Policy{}, err
			}
		}
		p.Limits = append(p.Limits, limiter.NamedLimit{Name: nl.GetName(), Limit: l})
	}
	return p, nil
}

// limitOf converts the API's limit; field names it in errors.
func limitOf(field string, l *coordv1.Limit) (store.Limit, error) {
	period, err := required(field+".period", l.GetPeriod())
	if err != nil {
		return store.Limit{}, err
	}
	return store.Limit{Algorithm: store.Algorithm(l.GetAlgorithm()), Limit: l.GetLimit(), Period: period, Burst: l.GetBurst()}, nil
}

// policies converts policies to the API's, by name.
func policies(m map[string]limiter.Policy) []*coordv1.Policy {
	out := make([]*coordv1.Policy, 0, len(m))
	for name, p := range m {
		pp := &coordv1.Policy{Name: name, Shadow: p.Shadow, OnStoreFailure: coordv1.OnStoreFailure(p.OnStoreFailure), LocalQuota: p.LocalQuota}
		if len(p.Limits) == 0 {
			pp.Limit = limitPB(p.Limit)
		}
		for _, l := range p.Limits {
			pp.Limits = append(pp.Limits, &coordv1.NamedLimit{Name: l.Name, Limit: limitPB(l.Limit)})
		}
		out = append(out, pp)
	}
	slices.SortFunc(out, func(a, b *coordv1.Policy) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

func limitPB(l store.Limit) *coordv1.Limit {
	return &coordv1.Limit{Algorithm: coordv1.Algorithm(l.Algorithm), Limit: l.Limit, Period: durationpb.New(l.Period), Burst: l.Burst}
}

// describeLimits is a policy's limits for the log: "100/1s token_bucket".
func describeLimits(p limiter.Policy) string {
	one := func(l store.Limit) string {
		return fmt.Sprintf("%d/%v %s", l.Limit, l.Period, limiter.AlgorithmName(l.Algorithm))
	}
	if len(p.Limits) == 0 {
		return one(p.Limit)
	}
	parts := make([]string, len(p.Limits))
	for i, l := range p.Limits {
		parts[i] = l.Name + ": " + one(l.Limit)
	}
	return strings.Join(parts, ", ")
}
