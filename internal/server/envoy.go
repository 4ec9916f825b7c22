package server

// Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService)
// on coordd's port: the decisions are internal/envoyrl's; this is the
// namespace, the errors and the metrics.

import (
	"context"
	"errors"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"

	"github.com/coordd/coordd/internal/envoyrl"
	"github.com/coordd/coordd/internal/metrics"
)

type envoyRateLimitServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	svc     *envoyrl.Service
	metrics *metrics.Metrics
}

func (s *envoyRateLimitServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp, results, err := s.svc.ShouldRateLimit(ctx, namespace(ctx), req)
	if errors.Is(err, envoyrl.ErrNoConfig) {
		return nil, withDetails(codes.FailedPrecondition, err.Error(), "ENVOY_CONFIG_UNSET", nil)
	}
	if err != nil {
		return nil, err
	}
	domain := "unknown"
	if cfg := s.svc.Config(); cfg != nil && cfg.HasDomain(req.GetDomain()) {
		domain = req.GetDomain()
	}
	for _, r := range results {
		s.metrics.EnvoyDecision(domain, r.StatKey, r.Outcome)
	}
	return resp, nil
}
