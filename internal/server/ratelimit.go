package server

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/store"
)

type rateLimitServer struct {
	coordv1.UnimplementedRateLimitServiceServer
	svc     *limiter.Service
	metrics *metrics.Metrics
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
	case res.Degraded:
		result = "degraded"
	case res.ShadowDenied:
		result = "shadow_denied"
	case res.Allowed:
		result = "allowed"
	}
	s.metrics.Decision(r.Policy, limiter.AlgorithmName(res.Algorithm), result)
	if res.Cached {
		s.metrics.DenyCacheHit()
	}
	return &coordv1.AllowResponse{
		Allowed: res.Allowed, Remaining: res.Remaining, Limit: res.Limit,
		RetryAfter: durationpb.New(res.RetryAfter), ResetAfter: durationpb.New(res.ResetAfter),
		Degraded: res.Degraded, ShadowDenied: res.ShadowDenied, DeniedBy: res.DeniedBy,
	}, nil
}
