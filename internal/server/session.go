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
// handles requests, the session's timer (its expiry, or the next max hold
// of one of its locks, whichever comes first), and the end of the stream,
// and is the only one that sends. See the RPC's comment in session.proto for
// the contract.
//
// The stream holds the session's ID, its epoch (a resume elsewhere makes
// every later call of this stream ErrSuperseded) and what it acknowledges:
// the loss reports it sent before the answer to a later heartbeat, so that
// a report is in at least two responses of a healthy stream, and survives a
// lost store reply or a failed send.
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

	var ref store.SessionRef // the stream's session, once opened
	var sent uint64          // the last report sent on this stream
	var acked uint64         // the last report a later heartbeat's answer followed
	var counted uint64       // the last report counted in the metrics
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// arm sets the timer to the session's expiry or its next max hold,
	// whichever comes first.
	arm := func(st store.SessionState) {
		next := st.TTL
		if !st.NextLoss.IsZero() {
			next = min(next, st.TTL-st.ExpireTime.Sub(st.NextLoss))
		}
		timer.Reset(max(next, 0) + expirySlack)
	}
	// The session's topic (a lock bound, a resume elsewhere) is subscribed
	// to in the background, so that a slow subscription never holds up a
	// heartbeat; subscribed hands it over, and the stream closes it.
	var wake <-chan struct{}
	subscribed := make(chan *store.Subscription)
	var sub *store.Subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	// report sends st (unless unasked and with no news: no new report, no
	// expiry) and arms the timer; an expired session ends the stream.
	report := func(st store.SessionState, asked bool) error {
		news := st.Expired
		for _, l := range st.Lost {
			news = news || l.Seq > sent
			if l.Seq > counted {
				if _, ok := holdKinds[l.Kind]; ok {
					s.metrics.HoldLost(string(l.Kind), lossLabels[l.Reason])
				}
				switch l.Kind {
				case store.HoldLock:
					s.metrics.LockLost(lossLabels[l.Reason])
				case store.HoldElection:
					s.metrics.Election("lost")
				}
				counted = l.Seq
			}
		}
		if !asked && !news {
			ref.ID, ref.Stream = st.ID, st.Stream
			arm(st)
			return nil
		}
		if err := stream.Send(keepAliveResponse(st)); err != nil {
			return err
		}
		if asked {
			// A heartbeat was answered after every report sent before it.
			acked = sent
		}
		if n := len(st.Lost); n > 0 {
			sent = st.Lost[n-1].Seq
		}
		if st.Expired {
			return fmt.Errorf("the session expired: %w", store.ErrSessionNotFound)
		}
		if ref.ID == "" {
			// Learn at once of locks bound to the session elsewhere (their
			// max hold) and of a resume by another stream. Without the
			// subscription the timer and the heartbeats still tell.
			go func(id string) {
				sub, err := s.svc.Subscribe(ctx, ns, id)
				if err != nil {
					return
				}
				select {
				case subscribed <- sub:
				case <-ctx.Done():
					sub.Close() // the stream ended first
				}
			}(st.ID)
		}
		ref.ID, ref.Stream = st.ID, st.Stream
		arm(st)
		return nil
	}
	// superseded tells the stream that another one resumed its session.
	superseded := func(err error) error {
		_ = stream.Send(&coordv1.KeepAliveResponse{Superseded: true})
		return err
	}
	// check looks at the session unasked: at the timer, or on a wake-up.
	check := func() error {
		st, err := s.svc.Check(ctx, ns, ref)
		if errors.Is(err, store.ErrSuperseded) {
			return superseded(err)
		}
		if err != nil {
			return err
		}
		return report(st, false)
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
			lockDelay, err := nonNegative("lock_delay", req.GetLockDelay())
			if err == nil {
				err = session.CheckLockDelay(lockDelay)
			}
			if err != nil {
				return err
			}
			var st store.SessionState
			switch {
			case ref.ID == "":
				st, err = s.svc.Open(ctx, ns, req.GetSessionId(), ttl, lockDelay)
			case req.GetSessionId() != "" && req.GetSessionId() != ref.ID:
				return validate.Errorf("session_id", "is not this stream's session; open a new stream for another session")
			default:
				// Reports stay until a heartbeat has been answered after them.
				ref.Ack = acked
				st, err = s.svc.KeepAlive(ctx, ns, ref, ttl)
			}
			if errors.Is(err, store.ErrSuperseded) {
				return superseded(err)
			}
			if err != nil {
				return err
			}
			if err := report(st, true); err != nil {
				return err
			}
		case <-timer.C:
			if err := check(); err != nil {
				return err
			}
		case sub = <-subscribed:
			wake = sub.C()
			// A resume or a binding between the open and now was missed.
			if err := check(); err != nil {
				return err
			}
		case <-wake:
			if err := check(); err != nil {
				return err
			}
		case err := <-recvErr:
			if !errors.Is(err, io.EOF) {
				return err // a broken stream: the session lives until its TTL
			}
			if ref.ID == "" {
				return nil
			}
			if ctx.Err() != nil {
				// The stream was ended (a revoked key, a drain) as the client
				// half-closed: the session lapses at its TTL.
				return ctx.Err()
			}
			// The client asked for the end: finish it even if the client
			// goes away meanwhile (within a bound).
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			released, err := s.svc.Close(cctx, ns, ref)
			cancel()
			for _, h := range released {
				switch h.Kind {
				case store.HoldLock:
					s.metrics.LockReleased(h.Held)
				case store.HoldElection:
					s.metrics.Election("resigned")
				}
			}
			if errors.Is(err, store.ErrSessionNotFound) {
				return nil // already expired and reported, or never existed
			}
			if errors.Is(err, store.ErrSuperseded) {
				return superseded(err) // another stream has the session: nothing changed
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
		kind, ok := holdKinds[l.Kind]
		if !ok {
			// A kind the API has no HoldKind for: unset, a client would
			// read it as a lock of that name.
			continue
		}
		resp.LostLocks = append(resp.LostLocks, &coordv1.LostLock{Name: l.Name, Fence: l.Fence, Reason: lossReasons[l.Reason], Kind: kind})
	}
	return resp
}

// holdKinds are the wire's kinds of the holds lost_locks reports: every
// store.HoldKind a session can hold.
var holdKinds = map[store.HoldKind]coordv1.HoldKind{
	store.HoldLock:      coordv1.HoldKind_HOLD_KIND_LOCK,
	store.HoldSemaphore: coordv1.HoldKind_HOLD_KIND_SEMAPHORE,
	store.HoldElection:  coordv1.HoldKind_HOLD_KIND_ELECTION,
}

var lossReasons = map[store.LossReason]coordv1.LockLossReason{
	store.LostMaxHold:        coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD,
	store.LostSessionExpired: coordv1.LockLossReason_LOCK_LOSS_REASON_SESSION_EXPIRED,
	store.LostGone:           coordv1.LockLossReason_LOCK_LOSS_REASON_GONE,
}

// lossLabels are the reason labels of coordd_locks_lost_total and
// coordd_holds_lost_total.
var lossLabels = map[store.LossReason]string{
	store.LostMaxHold: "max_hold", store.LostSessionExpired: "session_expired", store.LostGone: "gone",
}
