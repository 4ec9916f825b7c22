package server

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
)

type sessionServer struct {
	coordv1.UnimplementedSessionServiceServer
	svc   *session.Service
	drain context.Context // done when the server drains
	// final turns the error that ends a stream into its status, as the
	// server's interceptors do.
	final   func(context.Context, error) error
	metrics *metrics.Metrics
	rate    float64       // most heartbeats per second (0: no limit)
	max     int           // most sessions opened while streams are open here (limits.max_sessions; 0: no limit)
	latency *StoreLatency // sheds new sessions while the store is slow (nil: never)
	open    atomic.Int64  // KeepAlive streams open on this instance
}

// KeepAlive runs one session stream (session.Service.Run) over the wire:
// it converts requests and replies, and bounds the heartbeat rate.
func (s *sessionServer) KeepAlive(stream coordv1.SessionService_KeepAliveServer) error {
	s.metrics.SessionStreams(1)
	defer s.metrics.SessionStreams(-1)
	s.open.Add(1)
	defer s.open.Add(-1)
	wire := &keepAliveWire{stream: stream, rate: newMessageRate(s.rate), metrics: s.metrics, final: s.final}
	err := s.svc.Run(stream.Context(), namespace(stream.Context()), wire, s.drain,
		session.Hooks{
			Lost: func(l store.LostHold) {
				if _, ok := wireKinds[l.Kind]; ok {
					s.metrics.HoldLost(string(l.Kind), lossLabels[l.Reason])
				}
			},
			Released: func(h store.ReleasedHold) { s.metrics.HoldReleased(string(h.Kind), h.Held) },
			Admit: func() error {
				// Counted when the first request comes, not when the stream
				// opened: streams that ended meanwhile gave their room back.
				if s.max > 0 && s.open.Load() > int64(s.max) { // this stream included
					s.metrics.Rejected("max_sessions")
					return errOverloaded("limits.max_sessions streams are open on this instance")
				}
				if err := s.latency.shed(); err != nil {
					s.metrics.Rejected("store_latency")
					return err
				}
				return nil
			},
		})
	if st := wire.written(); st != nil {
		return st // what the client was told
	}
	return err
}

// keepAliveWire is a KeepAlive stream as session.Transport.
type keepAliveWire struct {
	stream  coordv1.SessionService_KeepAliveServer
	rate    *messageRate
	metrics *metrics.Metrics
	// final is the status a handler's error becomes (the server's
	// interceptors' mapping).
	final func(context.Context, error) error

	mu     sync.Mutex
	status error // written by Stop
}

// Stop writes the status of err (as the server's interceptors would
// answer it: final) to the client at once, which ends the stream's
// context, so that the Recv blocked in Run returns. grpc-go writes a
// Canceled status of its own when a Recv fails on a cancelled context;
// writing the status first makes that write, and the handler's, do
// nothing. The stream's transport has the method (both of grpc-go's
// server transports do); a stream without it (a test's) only records the
// status.
func (w *keepAliveWire) Stop(err error) {
	ctx := w.stream.Context()
	st := w.final(ctx, err)
	w.mu.Lock()
	if w.status == nil {
		w.status = st
	}
	w.mu.Unlock()
	if sw, ok := grpc.ServerTransportStreamFromContext(ctx).(statusWriter); ok {
		_ = sw.WriteStatus(status.Convert(st))
	}
}

// statusWriter is the method of grpc-go's server stream that ends it with
// a status.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// written is the status Stop wrote, or nil.
func (w *keepAliveWire) written() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

func (w *keepAliveWire) Recv() (session.Request, error) {
	req, err := w.stream.Recv()
	if err != nil {
		return session.Request{}, err
	}
	if !w.rate.allow() {
		w.metrics.Rejected("too_many_messages")
		return session.Request{}, withDetails(codes.ResourceExhausted, "heartbeats too fast; the session lives on: resume it on a new stream", "TOO_MANY_MESSAGES", nil)
	}
	ttl, err := positive("ttl", req.GetTtl())
	if err != nil {
		return session.Request{}, err
	}
	lockDelay, err := nonNegative("lock_delay", req.GetLockDelay())
	if err != nil {
		return session.Request{}, err
	}
	return session.Request{SessionID: req.GetSessionId(), TTL: ttl, LockDelay: lockDelay}, nil
}

func (w *keepAliveWire) Send(r session.Reply) error { return w.stream.Send(keepAliveResponse(r)) }

func keepAliveResponse(r session.Reply) *coordv1.KeepAliveResponse {
	if r.Superseded {
		return &coordv1.KeepAliveResponse{Superseded: true}
	}
	st := r.State
	resp := &coordv1.KeepAliveResponse{
		SessionId: st.ID, Ttl: durationpb.New(st.TTL), ExpireTime: timestamp(st.ExpireTime), Expired: st.Expired,
	}
	for _, l := range st.Lost {
		kind, ok := wireKinds[l.Kind]
		if !ok {
			// A kind the API has no HoldKind for: unset, a client would
			// read it as a lock of that name.
			continue
		}
		resp.LostLocks = append(resp.LostLocks, &coordv1.LostLock{Name: l.Name, Fence: l.Fence, Reason: lossReasons[l.Reason], Kind: kind})
	}
	return resp
}

// wireKinds are the wire's kinds of the holds lost_locks reports: every
// store.HoldKind a session can hold.
var wireKinds = map[store.HoldKind]coordv1.HoldKind{
	store.HoldLock:      coordv1.HoldKind_HOLD_KIND_LOCK,
	store.HoldSemaphore: coordv1.HoldKind_HOLD_KIND_SEMAPHORE,
	store.HoldElection:  coordv1.HoldKind_HOLD_KIND_ELECTION,
}

var lossReasons = map[store.LossReason]coordv1.LockLossReason{
	store.LostMaxHold:        coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD,
	store.LostSessionExpired: coordv1.LockLossReason_LOCK_LOSS_REASON_SESSION_EXPIRED,
	store.LostGone:           coordv1.LockLossReason_LOCK_LOSS_REASON_GONE,
}

// lossLabels are the reason labels of coordd_holds_lost_total.
var lossLabels = map[store.LossReason]string{
	store.LostMaxHold: "max_hold", store.LostSessionExpired: "session_expired", store.LostGone: "gone",
}
