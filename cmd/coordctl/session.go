package main

// A session held by `coordctl lock` or `elect`: a KeepAlive stream of
// heartbeats that keeps the session, and the hold bound to it (a lock, a
// semaphore permit or a leadership), alive.
//
// Concurrency: one goroutine (keep) owns the session's state and its stream:
// it alone sends heartbeats, half-closes, and replaces a broken stream. Each
// stream has one receiver goroutine that hands responses and the stream's
// final error to keep, and that ends when the stream's context is cancelled.
// Other goroutines see only Lost, Err and Close.
//
// The lease is counted on the local clock, conservatively: a response to a
// heartbeat sent at time T with ttl D means the session lives at least until
// T+D (the server renewed it after T). keep sends a heartbeat only when none
// is in flight, so each response answers the one heartbeat in flight. If no
// response extends the lease before it ends, the lease is lost, whatever the
// reason: a broken stream that could not be resumed in time, a coordd that
// stopped answering, or a heartbeat that never arrived.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// Resumption of a broken stream backs off from minBackoff to maxBackoff.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
)

// holdRef names the one hold a session is for. coordd reports on the
// stream the losses of every hold of the session: only those of this kind
// and name are this hold's.
type holdRef struct {
	kind coordv1.HoldKind
	name string
}

// lost reports whether l is a loss of h. A coordd from before
// LostLock.kind reported locks only, with no kind.
func (h holdRef) lost(l *coordv1.LostLock) bool {
	kind := l.GetKind()
	if kind == coordv1.HoldKind_HOLD_KIND_UNSPECIFIED {
		kind = coordv1.HoldKind_HOLD_KIND_LOCK
	}
	return kind == h.kind && l.GetName() == h.name
}

// kindName names a hold kind in messages, as the commands do.
func kindName(k coordv1.HoldKind) string {
	switch k {
	case coordv1.HoldKind_HOLD_KIND_SEMAPHORE:
		return "semaphore"
	case coordv1.HoldKind_HOLD_KIND_ELECTION:
		return "election"
	}
	return "lock"
}

// session is a live KeepAlive session.
type session struct {
	client  coordv1.SessionServiceClient
	hold    holdRef // the hold whose loss reports end the lease
	ttl     time.Duration
	timeout time.Duration // the limit of one attempt to open or resume the stream
	base    context.Context
	cancel  context.CancelFunc

	lost    chan struct{} // closed when the lease is lost
	err     error         // why; written before lost is closed
	closing chan closeRequest
	done    chan struct{} // closed when keep returns

	// Owned by keep (and by startSession before keep starts).
	id       string
	conn     *kaStream // nil while the stream is broken
	deadline time.Time // the lease ends at the latest then, by the local clock
}

type closeRequest struct {
	bound  time.Duration
	result chan error
}

// kaStream is one KeepAlive stream and its receiver.
type kaStream struct {
	ks     coordv1.SessionService_KeepAliveClient
	cancel context.CancelCauseFunc
	recv   chan recvResult
}

type recvResult struct {
	resp *coordv1.KeepAliveResponse
	err  error
}

// errOpenTimeout ends an attempt to open or resume a stream that took too
// long.
var errOpenTimeout = errors.New("timed out")

// startSession opens a new session with ttl, for hold, and keeps it alive
// with a heartbeat every ttl/3 until Close. The session outlives ctx's cancellation
// (a signal must not break the stream and leave the lock held until its TTL):
// only Close ends it. timeout bounds the opening and each resumption.
func startSession(ctx context.Context, client coordv1.SessionServiceClient, hold holdRef, ttl, timeout time.Duration) (*session, error) {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &session{
		client: client, hold: hold, ttl: ttl, timeout: timeout, base: base, cancel: cancel,
		lost: make(chan struct{}), closing: make(chan closeRequest), done: make(chan struct{}),
	}
	conn, resp, sent, err := s.open(timeout)
	if err != nil {
		cancel()
		return nil, err
	}
	s.conn, s.id = conn, resp.GetSessionId()
	s.deadline = sent.Add(resp.GetTtl().AsDuration())
	go s.keep()
	return s, nil
}

// ID is the session's ID.
func (s *session) ID() string { return s.id }

// Lost is closed when the lease is lost: the session expired or was ended
// by coordd, coordd reported its hold lost, or no heartbeat was answered
// within the TTL. Err says why.
func (s *session) Lost() <-chan struct{} { return s.lost }

// Err is why the lease was lost, once Lost is closed.
func (s *session) Err() error {
	select {
	case <-s.lost:
		return s.err
	default:
		return nil
	}
}

// Close ends the session: it half-closes the stream, which makes coordd end
// the session and release its lock at once, and waits up to bound for coordd
// to confirm. A broken stream is resumed first, to end the session now
// rather than at its TTL. An error means the end was not confirmed: the lock
// is then released when the session's TTL runs out. Close must be called
// exactly once.
func (s *session) Close(bound time.Duration) error {
	req := closeRequest{bound: bound, result: make(chan error, 1)}
	s.closing <- req
	err := <-req.result
	<-s.done
	s.cancel()
	return err
}

// open opens a stream (resuming the session if it has an ID), sends a
// heartbeat and waits up to bound for its answer. sent is when the heartbeat
// was sent.
func (s *session) open(bound time.Duration) (conn *kaStream, resp *coordv1.KeepAliveResponse, sent time.Time, err error) {
	ctx, cancel := context.WithCancelCause(s.base)
	timer := time.AfterFunc(bound, func() { cancel(errOpenTimeout) })
	defer timer.Stop()
	fail := func(err error) (*kaStream, *coordv1.KeepAliveResponse, time.Time, error) {
		if context.Cause(ctx) == errOpenTimeout {
			err = status.Errorf(codes.DeadlineExceeded, "no answer from coordd within %v", bound.Round(time.Millisecond))
		}
		cancel(nil)
		return nil, nil, time.Time{}, err
	}
	sent = time.Now()
	ks, err := s.client.KeepAlive(ctx)
	if err != nil {
		return fail(err)
	}
	conn = &kaStream{ks: ks, cancel: cancel, recv: make(chan recvResult)}
	go conn.receive(ctx)
	// A failed Send shows as the stream's error in the receiver.
	_ = ks.Send(&coordv1.KeepAliveRequest{SessionId: s.id, Ttl: durationpb.New(s.ttl)})
	select {
	case r := <-conn.recv:
		if r.err != nil {
			return fail(r.err)
		}
		return conn, r.resp, sent, nil
	case <-ctx.Done():
		return fail(context.Cause(ctx))
	}
}

// receive hands the stream's responses, then its final error, to keep.
func (c *kaStream) receive(ctx context.Context) {
	for {
		resp, err := c.ks.Recv()
		select {
		case c.recv <- recvResult{resp, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *session) isLost() bool { return s.Err() != nil }

// fail records that the lease is lost. Only keep calls it.
func (s *session) fail(err error) {
	if s.isLost() {
		return
	}
	s.err = err
	close(s.lost)
}

// keep heartbeats, resumes a broken stream until the lease runs out, and
// watches for the lease's end. After a loss it only waits for Close.
func (s *session) keep() {
	defer close(s.done)
	defer func() {
		if s.conn != nil {
			s.conn.cancel(nil)
		}
	}()
	beat := time.NewTicker(s.ttl / 3)
	defer beat.Stop()
	expire := time.NewTimer(time.Until(s.deadline))
	defer expire.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := minBackoff
	var sentAt time.Time // when the heartbeat in flight on conn was sent; zero if none
	var lastErr error    // the last reason the stream broke, for the loss message

	for {
		var recv <-chan recvResult
		if s.conn != nil {
			recv = s.conn.recv
		}
		select {
		case req := <-s.closing:
			req.result <- s.end(req.bound)
			return

		case <-beat.C:
			if s.conn == nil || !sentAt.IsZero() || s.isLost() {
				continue
			}
			sentAt = time.Now()
			_ = s.conn.ks.Send(&coordv1.KeepAliveRequest{SessionId: s.id, Ttl: durationpb.New(s.ttl)})

		case r := <-recv:
			if r.err != nil {
				s.conn.cancel(nil)
				s.conn, sentAt = nil, time.Time{}
				if s.isLost() {
					continue
				}
				if finalStreamError(r.err) {
					s.fail(streamEnded(r.err))
					continue
				}
				lastErr, backoff = r.err, minBackoff
				retry.Reset(0) // resume at once, then back off
				continue
			}
			s.handle(r.resp, sentAt)
			sentAt = time.Time{}
			expire.Reset(time.Until(s.deadline))

		case <-retry.C:
			if s.isLost() {
				continue
			}
			bound := min(s.timeout, time.Until(s.deadline))
			if bound <= 0 {
				// The lease has run out: the expire timer ends it, with the
				// last error of a real attempt (this one could not wait at all).
				expire.Reset(0)
				continue
			}
			conn, resp, sent, err := s.open(bound)
			if err != nil {
				if finalStreamError(err) {
					s.fail(streamEnded(err))
					continue
				}
				lastErr = err
				retry.Reset(backoff)
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			s.conn = conn
			s.handle(resp, sent)
			expire.Reset(time.Until(s.deadline))

		case <-expire.C:
			if time.Now().Before(s.deadline) { // extended since the timer was set
				expire.Reset(time.Until(s.deadline))
				continue
			}
			msg := fmt.Sprintf("no heartbeat was answered within the session TTL (%v), so the lease may have ended", s.ttl)
			if lastErr != nil {
				msg += "; last error: " + describeStatus(lastErr)
			}
			s.fail(errors.New(msg))
		}
	}
}

// handle applies a response: a loss of the session's hold it reports, or
// the lease it extends (reports of other holds are not about this one). sent
// is when the heartbeat it answers was sent; zero if it answers none (coordd
// reports an expiry unasked), which extends nothing.
func (s *session) handle(resp *coordv1.KeepAliveResponse, sent time.Time) {
	var parts []string
	for _, l := range resp.GetLostLocks() {
		if s.hold.lost(l) {
			parts = append(parts, fmt.Sprintf("%s %q (fence %d): %s", kindName(s.hold.kind), l.GetName(), l.GetFence(), lossReason(l.GetReason())))
		}
	}
	if len(parts) > 0 {
		s.fail(errors.New("coordd reports " + strings.Join(parts, "; ")))
		return
	}
	if resp.GetExpired() {
		s.fail(errors.New("coordd reports the session expired"))
		return
	}
	if resp.GetSuperseded() {
		s.fail(errors.New("coordd reports that another stream resumed the session"))
		return
	}
	if !sent.IsZero() {
		if d := sent.Add(resp.GetTtl().AsDuration()); d.After(s.deadline) {
			s.deadline = d
		}
	}
}

func lossReason(r coordv1.LockLossReason) string {
	switch r {
	case coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD:
		return "it reached its max hold"
	case coordv1.LockLossReason_LOCK_LOSS_REASON_SESSION_EXPIRED:
		return "the session expired"
	case coordv1.LockLossReason_LOCK_LOSS_REASON_GONE:
		return "it is gone or held by another (the store may have lost it)"
	}
	return r.String()
}

// finalStreamError reports whether a stream's end means the session cannot
// be resumed.
func finalStreamError(err error) bool {
	if errors.Is(err, io.EOF) {
		return true // coordd ended the stream with OK: the session is over
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted,
		codes.ResourceExhausted, codes.Internal, codes.Unknown:
		return false // transient: resume the session on a new stream
	}
	return true
}

func streamEnded(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("coordd ended the session")
	}
	return fmt.Errorf("the session cannot be resumed: %s", describeStatus(err))
}

// end half-closes the stream and waits up to bound for coordd to end it.
func (s *session) end(bound time.Duration) error {
	deadline := time.Now().Add(bound)
	if s.conn == nil {
		if s.isLost() {
			return nil // nothing left to end, or no way to reach it
		}
		conn, _, _, err := s.open(min(bound, time.Until(s.deadline)))
		if err != nil {
			return fmt.Errorf("could not reach coordd to end the session (%s); its lock is released when the session's TTL (%v) runs out", describeStatus(err), s.ttl)
		}
		s.conn = conn
	}
	if err := s.conn.ks.CloseSend(); err != nil {
		return fmt.Errorf("ending the session: %w", err)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case r := <-s.conn.recv:
			switch {
			case r.err == nil:
				continue // the answer to a heartbeat in flight
			case errors.Is(r.err, io.EOF):
				return nil
			case status.Code(r.err) == codes.FailedPrecondition:
				return nil // the session had already ended
			}
			return fmt.Errorf("ending the session: %s; its lock is released when the session's TTL (%v) runs out", describeStatus(r.err), s.ttl)
		case <-timer.C:
			return fmt.Errorf("coordd did not confirm the end of the session within %v; its lock is released when the session's TTL (%v) runs out", bound, s.ttl)
		}
	}
}
