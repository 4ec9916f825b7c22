package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
	"github.com/coordd/coordd/internal/waiter"
)

type sessionServer struct {
	coordv1.UnimplementedSessionServiceServer
	svc     *session.Service
	drain   waiter.Drain
	metrics *metrics.Metrics
	rate    float64 // most heartbeats per second (0: no limit)
}

// closeTimeout bounds closing a half-closed session, which runs on after
// the client has gone.
const closeTimeout = 5 * time.Second

// expirySlack is how long after a session's expire time the stream checks
// the store, so that the store sees the session expired.
const expirySlack = 5 * time.Millisecond

// KeepAlive runs one session stream. One goroutine receives; this one
// handles requests, the session's expiry timer, and the end of the stream,
// and is the only one that sends. See the RPC's comment in session.proto for
// the contract.
func (s *sessionServer) KeepAlive(stream coordv1.SessionService_KeepAliveServer) error {
	ctx := stream.Context()
	ns := namespace(ctx)
	s.metrics.SessionStreams(1)
	defer s.metrics.SessionStreams(-1)
	rate := newMessageRate(s.rate)
	reqs := make(chan *coordv1.KeepAliveRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()

	var id string // the stream's session, once opened
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	// report sends st and arms the expiry check; an expired session ends the
	// stream.
	report := func(st store.SessionState) error {
		for _, l := range st.Lost {
			s.metrics.LockLost(l.Reason)
		}
		if err := stream.Send(keepAliveResponse(st)); err != nil {
			return err
		}
		if st.Expired {
			return fmt.Errorf("the session expired: %w", store.ErrSessionNotFound)
		}
		expiry.Reset(st.TTL + expirySlack)
		return nil
	}
	for {
		select {
		case req := <-reqs:
			if !rate.allow() {
				s.metrics.Rejected("too_many_messages")
				return withDetails(codes.ResourceExhausted, "heartbeats too fast; the session lives on: resume it on a new stream", "TOO_MANY_MESSAGES", nil)
			}
			ttl, err := positive("ttl", req.GetTtl())
			if err != nil {
				return err
			}
			var st store.SessionState
			switch {
			case id == "":
				st, err = s.svc.Open(ctx, ns, req.GetSessionId(), ttl)
			case req.GetSessionId() != "" && req.GetSessionId() != id:
				return validate.Errorf("session_id", "is not this stream's session; open a new stream for another session")
			default:
				st, err = s.svc.KeepAlive(ctx, ns, id, ttl)
			}
			if err != nil {
				return err
			}
			id = st.ID
			if err := report(st); err != nil {
				return err
			}
		case <-expiry.C:
			st, err := s.svc.Check(ctx, ns, id)
			if err != nil {
				return err
			}
			if err := report(st); err != nil {
				return err
			}
		case err := <-recvErr:
			if !errors.Is(err, io.EOF) {
				return err // a broken stream: the session lives until its TTL
			}
			if id == "" {
				return nil
			}
			// The client asked for the end: finish it even if the client
			// goes away meanwhile (within a bound).
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			released, err := s.svc.Close(cctx, ns, id)
			cancel()
			for range released {
				s.metrics.LockReleased(0)
			}
			if errors.Is(err, store.ErrSessionNotFound) {
				return nil // already expired and reported, or never existed
			}
			return err
		case <-s.drain:
			return errShuttingDown
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func keepAliveResponse(st store.SessionState) *coordv1.KeepAliveResponse {
	resp := &coordv1.KeepAliveResponse{
		SessionId: st.ID, Ttl: durationpb.New(st.TTL), ExpireTime: timestamp(st.ExpireTime), Expired: st.Expired,
	}
	for _, l := range st.Lost {
		resp.LostLocks = append(resp.LostLocks, &coordv1.LostLock{Name: l.Name, Fence: l.Fence, Reason: lossReasons[l.Reason]})
	}
	return resp
}

var lossReasons = map[store.LossReason]coordv1.LockLossReason{
	store.LostMaxHold:        coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD,
	store.LostSessionExpired: coordv1.LockLossReason_LOCK_LOSS_REASON_SESSION_EXPIRED,
	store.LostGone:           coordv1.LockLossReason_LOCK_LOSS_REASON_GONE,
}
