package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/store"
)

type lockServer struct {
	coordv1.UnimplementedLockServiceServer
	svc     *lock.Service
	metrics *metrics.Metrics
}

func (s *lockServer) Lock(ctx context.Context, req *coordv1.LockRequest) (*coordv1.LockResponse, error) {
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
	g, err := s.svc.Lock(ctx, lock.Request{
		NS: namespace(ctx), Name: req.GetName(), Owner: req.GetOwner(), SessionID: req.GetSessionId(),
		TTL: ttl, Wait: wait, MaxHold: maxHold, Shared: req.GetShared(),
	})
	if err != nil {
		return nil, err
	}
	mode := "exclusive"
	if req.GetShared() {
		mode = "shared"
	}
	countAcquire(s.metrics, store.HoldLock, mode, g.Grant, g.Contended, wait, start)
	resp := &coordv1.LockResponse{
		Acquired: g.Acquired, Token: g.Token, Fence: g.Fence,
		Ttl: durationpb.New(g.TTL), ExpireTime: timestamp(g.ExpireTime), Holder: g.Holder,
		AlreadyHeld: g.AlreadyHeld,
	}
	if g.Acquired {
		resp.Holders = count32(g.Holders)
	}
	return resp, nil
}

func (s *lockServer) Renew(ctx context.Context, req *coordv1.RenewRequest) (*coordv1.RenewResponse, error) {
	ttl, err := required("ttl", req.GetTtl())
	if err != nil {
		return nil, err
	}
	l, err := s.svc.Renew(ctx, namespace(ctx), req.GetName(), req.GetToken(), ttl)
	if errors.Is(err, store.ErrNotHeld) {
		s.metrics.HoldExpired(string(store.HoldLock))
	}
	if err != nil {
		return nil, err
	}
	return &coordv1.RenewResponse{Ttl: durationpb.New(l.TTL), ExpireTime: timestamp(l.ExpireTime), Fence: l.Fence}, nil
}

func (s *lockServer) Release(ctx context.Context, req *coordv1.ReleaseRequest) (*coordv1.ReleaseResponse, error) {
	ok, held, err := s.svc.Release(ctx, namespace(ctx), req.GetName(), req.GetToken())
	if err != nil {
		return nil, err
	}
	if ok {
		s.metrics.HoldReleased(string(store.HoldLock), held)
	}
	return &coordv1.ReleaseResponse{Released: ok}, nil
}

func (s *lockServer) GetLock(ctx context.Context, req *coordv1.GetLockRequest) (*coordv1.GetLockResponse, error) {
	info, err := s.svc.Get(ctx, namespace(ctx), req.GetName())
	if err != nil {
		return nil, err
	}
	if !info.Held {
		return &coordv1.GetLockResponse{Waiters: count32(info.Waiters)}, nil
	}
	return &coordv1.GetLockResponse{
		Held: true, Owner: info.Owner, Fence: info.Fence, Ttl: durationpb.New(info.TTL),
		SessionBound: info.SessionBound, ExpireTime: timestamp(info.ExpireTime), AcquireTime: timestamp(info.AcquireTime),
		Holders: holders(info.Holders), Waiters: count32(info.Waiters),
	}, nil
}

func (s *lockServer) CheckFence(ctx context.Context, req *coordv1.CheckFenceRequest) (*coordv1.CheckFenceResponse, error) {
	ok, err := s.svc.CheckFence(ctx, namespace(ctx), req.GetName(), req.GetFence())
	if err != nil {
		return nil, err
	}
	return &coordv1.CheckFenceResponse{Current: ok}, nil
}
