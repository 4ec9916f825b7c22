package server

import (
	"context"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/election"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/waiter"
)

type electionServer struct {
	coordv1.UnimplementedElectionServiceServer
	svc     *election.Service
	drain   waiter.Drain
	metrics *metrics.Metrics
}

func (s *electionServer) Campaign(ctx context.Context, req *coordv1.CampaignRequest) (*coordv1.CampaignResponse, error) {
	wait, err := nonNegative("wait", req.GetWait())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	c, err := s.svc.Campaign(ctx, election.CampaignRequest{
		NS: namespace(ctx), Name: req.GetName(), SessionID: req.GetSessionId(), Value: req.GetValue(), Wait: wait,
	})
	if err != nil {
		return nil, err
	}
	elected := c.Elected || c.AlreadyLeader
	// A campaign elected after waiting is not told apart from one elected
	// at once (election.Campaign does not say whether its first try
	// failed): only one that gave up counts as contended.
	countAcquire(s.metrics, store.HoldElection, "exclusive", store.Grant{Acquired: c.Elected, AlreadyHeld: c.AlreadyLeader, Holders: 1},
		!elected, wait, start)
	resp := &coordv1.CampaignResponse{
		Elected: elected, Token: c.Token, Fence: c.Fence, ExpireTime: timestamp(c.ExpireTime), AlreadyLeader: c.AlreadyLeader,
	}
	if !elected {
		resp.HasLeader = c.Leader.HasLeader
		resp.Leader = leader(c.Leader)
		resp.ExpireTime = timestamp(c.Leader.ExpireTime)
	}
	return resp, nil
}

func (s *electionServer) Proclaim(ctx context.Context, req *coordv1.ProclaimRequest) (*coordv1.ProclaimResponse, error) {
	if err := s.svc.Proclaim(ctx, namespace(ctx), req.GetName(), req.GetToken(), req.GetValue()); err != nil {
		return nil, err
	}
	return &coordv1.ProclaimResponse{}, nil
}

func (s *electionServer) Resign(ctx context.Context, req *coordv1.ResignRequest) (*coordv1.ResignResponse, error) {
	ok, held, err := s.svc.Resign(ctx, namespace(ctx), req.GetName(), req.GetToken())
	if err != nil {
		return nil, err
	}
	if ok {
		s.metrics.HoldReleased(string(store.HoldElection), held)
	}
	return &coordv1.ResignResponse{Resigned: ok}, nil
}

func (s *electionServer) Leader(ctx context.Context, req *coordv1.LeaderRequest) (*coordv1.LeaderResponse, error) {
	l, err := s.svc.Leader(ctx, namespace(ctx), req.GetName())
	if err != nil {
		return nil, err
	}
	return &coordv1.LeaderResponse{Leader: leader(l), HasLeader: l.HasLeader, Rev: l.Rev}, nil
}

// Observe streams the election's changes until the client cancels, the
// daemon drains (UNAVAILABLE SHUTTING_DOWN, as a KeepAlive stream ends) or
// the store fails.
func (s *electionServer) Observe(req *coordv1.ObserveRequest, stream coordv1.ElectionService_ObserveServer) error {
	ctx := stream.Context()
	s.metrics.Observers(1)
	defer s.metrics.Observers(-1)
	err := s.svc.Observe(ctx, namespace(ctx), req.GetName(), func(c store.ElectionChange, missed uint64) error {
		return stream.Send(&coordv1.ObserveResponse{Leader: leader(c.Leader), HasLeader: c.Leader.HasLeader, Missed: missed, Rev: c.Rev})
	})
	if err == nil {
		select {
		case <-s.drain:
			return errShuttingDown
		default:
		}
	}
	return err
}

// leader converts a leader's description; nil without a leader.
func leader(l store.LeaderInfo) *coordv1.Leader {
	if !l.HasLeader {
		return nil
	}
	return &coordv1.Leader{Value: l.Value, Fence: l.Fence, ElectTime: timestamp(l.ElectTime)}
}
