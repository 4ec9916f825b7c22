package server

import (
	"context"
	"errors"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/idem"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/store"
)

type idempotencyServer struct {
	coordv1.UnimplementedIdempotencyServiceServer
	svc     *idem.Service
	metrics *metrics.Metrics
}

var outcomeNames = map[store.Outcome]string{
	store.Execute: "execute", store.InProgress: "in_progress", store.Completed: "completed", store.Failed: "failed",
}

func (s *idempotencyServer) BeginIdempotent(ctx context.Context, req *coordv1.BeginIdempotentRequest) (*coordv1.BeginIdempotentResponse, error) {
	pttl, err := positive("processing_ttl", req.GetProcessingTtl())
	if err != nil {
		return nil, err
	}
	wait, err := nonNegative("wait", req.GetWait())
	if err != nil {
		return nil, err
	}
	st, err := s.svc.Begin(ctx, idem.BeginRequest{
		NS: namespace(ctx), Key: req.GetKey(), Fingerprint: req.GetFingerprint(), ProcessingTTL: pttl, Wait: wait,
	})
	if errors.Is(err, store.ErrFingerprintMismatch) {
		s.metrics.Idempotency("fingerprint_mismatch")
	}
	if err != nil {
		return nil, err
	}
	s.metrics.Idempotency(outcomeNames[st.Outcome])
	resp := &coordv1.BeginIdempotentResponse{
		Outcome: coordv1.Outcome(st.Outcome), OwnerToken: st.OwnerToken, Result: st.Result, ExpireTime: timestamp(st.ExpireTime),
	}
	if st.Failure != nil {
		resp.Failure = &coordv1.Failure{Message: st.Failure.Message, Retryable: st.Failure.Retryable}
	}
	return resp, nil
}

func (s *idempotencyServer) Finish(ctx context.Context, req *coordv1.FinishRequest) (*coordv1.FinishResponse, error) {
	ttl, err := positive("result_ttl", req.GetResultTtl())
	if err != nil {
		return nil, err
	}
	r := idem.FinishRequest{NS: namespace(ctx), Key: req.GetKey(), OwnerToken: req.GetOwnerToken(), Result: req.GetResult(), ResultTTL: ttl}
	if f := req.GetFailure(); f != nil {
		r.Failure = &store.Failure{Message: f.GetMessage(), Retryable: f.GetRetryable()}
	}
	if err := s.svc.Finish(ctx, r); err != nil {
		if errors.Is(err, store.ErrNotOwner) {
			s.metrics.Idempotency("not_owner")
		}
		return nil, err
	}
	s.metrics.Idempotency("stored")
	return &coordv1.FinishResponse{Stored: true}, nil
}

func (s *idempotencyServer) ExtendIdempotent(ctx context.Context, req *coordv1.ExtendIdempotentRequest) (*coordv1.ExtendIdempotentResponse, error) {
	ttl, err := required("processing_ttl", req.GetProcessingTtl())
	if err != nil {
		return nil, err
	}
	t, err := s.svc.Extend(ctx, namespace(ctx), req.GetKey(), req.GetOwnerToken(), ttl)
	if err != nil {
		return nil, err
	}
	return &coordv1.ExtendIdempotentResponse{ExpireTime: timestamp(t)}, nil
}
