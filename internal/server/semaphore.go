package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/semaphore"
	"github.com/coordd/coordd/internal/store"
)

type semaphoreServer struct {
	coordv1.UnimplementedSemaphoreServiceServer
	svc     *semaphore.Service
	metrics *metrics.Metrics
}

func (s *semaphoreServer) Acquire(ctx context.Context, req *coordv1.AcquireRequest) (*coordv1.AcquireResponse, error) {
	ttl, err := positive("ttl", req.GetTtl())
	if err != nil {
		return nil, err
	}
	maxHold, err := positive("max_hold", req.GetMaxHold())
	if err != nil {
		return nil, err
	}
	wait, err := nonNegative("wait", req.GetWait())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	g, err := s.svc.Acquire(ctx, semaphore.Request{
		NS: namespace(ctx), Name: req.GetName(), Owner: req.GetOwner(), SessionID: req.GetSessionId(),
		Limit: int(req.GetLimit()), TTL: ttl, Wait: wait, MaxHold: maxHold,
	})
	if err != nil {
		return nil, err
	}
	countAcquire(s.metrics, store.HoldSemaphore, "shared", g.Grant, g.Contended, wait, start)
	return &coordv1.AcquireResponse{
		Acquired: g.Acquired, Token: g.Token, Fence: g.Fence,
		Ttl: durationpb.New(g.TTL), ExpireTime: timestamp(g.ExpireTime),
		Holders: count32(g.Holders), Limit: int32(g.Limit), Holder: g.Holder, AlreadyHeld: g.AlreadyHeld,
	}, nil
}

func (s *semaphoreServer) Renew(ctx context.Context, req *coordv1.SemaphoreServiceRenewRequest) (*coordv1.SemaphoreServiceRenewResponse, error) {
	ttl, err := required("ttl", req.GetTtl())
	if err != nil {
		return nil, err
	}
	l, err := s.svc.Renew(ctx, namespace(ctx), req.GetName(), req.GetToken(), ttl)
	if errors.Is(err, store.ErrNotHeld) {
		s.metrics.HoldExpired(string(store.HoldSemaphore))
	}
	if err != nil {
		return nil, err
	}
	return &coordv1.SemaphoreServiceRenewResponse{Ttl: durationpb.New(l.TTL), ExpireTime: timestamp(l.ExpireTime), Fence: l.Fence}, nil
}

func (s *semaphoreServer) Release(ctx context.Context, req *coordv1.SemaphoreServiceReleaseRequest) (*coordv1.SemaphoreServiceReleaseResponse, error) {
	ok, held, err := s.svc.Release(ctx, namespace(ctx), req.GetName(), req.GetToken())
	if err != nil {
		return nil, err
	}
	if ok {
		s.metrics.HoldReleased(string(store.HoldSemaphore), held)
	}
	return &coordv1.SemaphoreServiceReleaseResponse{Released: ok}, nil
}

func (s *semaphoreServer) GetSemaphore(ctx context.Context, req *coordv1.GetSemaphoreRequest) (*coordv1.GetSemaphoreResponse, error) {
	info, err := s.svc.Get(ctx, namespace(ctx), req.GetName())
	if err != nil {
		return nil, err
	}
	return &coordv1.GetSemaphoreResponse{Limit: int32(info.Limit), Holders: holders(info.Holders), Waiters: count32(info.Waiters)}, nil
}
