package client

// Concurrency: one goroutine (keep) owns the session's stream: it alone
// sends heartbeats, half-closes, and replaces a broken stream. Each stream
// has one receiver goroutine that hands responses and the stream's final
// error to keep, and that ends when the stream's context is cancelled.
// Holds (Mutex, Semaphore, Election) register watchers under mu; keep
// closes them when coordd reports their loss or the session ends.
//
// The lease is counted on the local clock, conservatively: the answer to a
// heartbeat sent at time T with ttl D means the session lives at least
// until T+D (coordd renewed it after T). keep sends a heartbeat only when
// none is in flight, so each answer answers the one heartbeat in flight.
// If no answer extends the lease before it ends, the session is over,
// whatever the reason: a broken stream that could not be resumed in time,
// a coordd that stopped answering, or a heartbeat that never arrived.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// Resumption of a broken stream backs off from minBackoff to maxBackoff,
// each wait drawn between half and all of the current step (jitter, so
// that the clients of a restarted coordd do not come back at once).
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
)

// Session is a coordd session: a lease kept alive by a KeepAlive stream
// with a heartbeat every TTL/3, that the locks, semaphore permits and
// leaderships bound to it live by. A broken stream is resumed (on any
// coordd instance the connection reaches) with jittered backoff, until the
// session's lease runs out by the local clock.
//
// A Session is safe for use by several goroutines.
type Session struct {
	client      coordv1.SessionServiceClient
	cc          grpc.ClientConnInterface
	ttl         time.Duration
	lockDelay   time.Duration
	timeout     time.Duration // bounds opening or resuming a stream once
	base        context.Context
	cancelBase  context.CancelFunc
	id          string
	done        chan struct{} // closed when the session is over
	err         error         // why; written before done is closed
	closing     chan closeRequest
	kept        chan struct{} // closed when keep returns
	lostOut     chan LostHold
	mu          sync.Mutex
	watchers    map[holdKey]*watcher
	closeCalled bool
	// waits is coordd's limits.max_wait as learned by the session's holds.
	waits waitCap

	// Owned by keep (and by NewSession before keep starts).
	conn     *kaStream // nil while the stream is broken
	deadline time.Time // the lease ends at the latest then, by the local clock
	lost     []LostHold
}

// SessionOption configures a Session.
type SessionOption func(*Session)

// WithTTL sets the session's TTL: how long it lives without an answered
// heartbeat (default 10s; coordd accepts session.min_ttl to
// session.max_ttl, 1s to 5m by default).
func WithTTL(ttl time.Duration) SessionOption { return func(s *Session) { s.ttl = ttl } }

// WithLockDelay sets the session's lock-delay: when the session expires,
// the locks it held are granted to nobody for this long (default 0, at
// most 60s).
func WithLockDelay(d time.Duration) SessionOption { return func(s *Session) { s.lockDelay = d } }

// WithResumeTimeout bounds one attempt to open or resume the stream
// (default 5s, and never past the session's lease).
func WithResumeTimeout(d time.Duration) SessionOption { return func(s *Session) { s.timeout = d } }

// LostHold is a hold the session held and holds no more, as coordd
// reported it.
type LostHold struct {
	Kind   coordv1.HoldKind
	Name   string
	Fence  uint64
	Reason coordv1.LockLossReason
}

func (l LostHold) String() string {
	return fmt.Sprintf("%s %q (fence %d): %s", kindName(l.Kind), l.Name, l.Fence, lossReason(l.Reason))
}

// NewSession opens a session on cc and keeps it alive until Close or its
// end. ctx bounds the opening only: the session outlives it. A coordd at
// capacity refuses a new session with OVERLOADED: NewSession tries again
// after the retry_after it names (with jitter: between half of it and one
// and a half times it) until ctx ends.
func NewSession(ctx context.Context, cc grpc.ClientConnInterface, opts ...SessionOption) (*Session, error) {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Session{
		client: coordv1.NewSessionServiceClient(cc), cc: cc, ttl: 10 * time.Second, timeout: 5 * time.Second,
		base: base, cancelBase: cancel,
		done: make(chan struct{}), closing: make(chan closeRequest), kept: make(chan struct{}),
		lostOut: make(chan LostHold), watchers: map[holdKey]*watcher{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.ttl <= 0 || s.timeout <= 0 || s.lockDelay < 0 {
		cancel()
		return nil, fmt.Errorf("client: session ttl %v and resume timeout %v must be positive, lock-delay %v not negative", s.ttl, s.timeout, s.lockDelay)
	}
	bound := func() time.Duration {
		if dl, ok := ctx.Deadline(); ok {
			return min(s.timeout, time.Until(dl))
		}
		return s.timeout
	}
	conn, resp, sent, err := s.open(ctx, bound())
	for err != nil {
		retry, overloaded := Overloaded(err)
		if !overloaded {
			cancel()
			return nil, err
		}
		wait := time.NewTimer(retry/2 + randDuration(retry))
		select {
		case <-ctx.Done():
			wait.Stop()
			cancel()
			return nil, fmt.Errorf("%w (the last refusal: %s)", ctx.Err(), Describe(err))
		case <-wait.C:
		}
		conn, resp, sent, err = s.open(ctx, bound())
	}
	s.conn, s.id = conn, resp.GetSessionId()
	s.deadline = sent.Add(resp.GetTtl().AsDuration())
	go s.keep()
	return s, nil
}

// ID is the session's ID: a secret (whoever has it can act for the
// session); pass it to nobody.
func (s *Session) ID() string { return s.id }

// TTL is the session's TTL.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done is closed when the session is over: closed, expired, ended by
// coordd, resumed by another stream, or not renewed within its TTL by the
// local clock. Err says why. Every hold bound to the session is then lost.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session is over (nil while it lives, and after a Close
// that coordd confirmed).
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Lost delivers each hold of the session that coordd reports lost while
// the session lives (a max hold reached, a grant the store lost), and those
// the session's expiry ended, in order. Reading it is optional: the holds'
// own Lost channels (Mutex.Lost, ...) are closed regardless.
func (s *Session) Lost() <-chan LostHold { return s.lostOut }

// Close ends the session: it half-closes the stream, which makes coordd
// end the session and release its holds at once, and waits for coordd to
// confirm (up to the resume timeout). A broken stream is resumed first, so
// that the holds go now rather than at the TTL. An error means the end was
// not confirmed: the holds then end when the session's TTL runs out. Only
// the first call (of Close and CloseWithin) does anything; later ones
// return nil.
func (s *Session) Close() error { return s.CloseWithin(s.timeout) }

// CloseWithin is Close waiting up to bound for coordd's confirmation.
func (s *Session) CloseWithin(bound time.Duration) error {
	s.mu.Lock()
	called := s.closeCalled
	s.closeCalled = true
	s.mu.Unlock()
	if called {
		return nil
	}
	req := closeRequest{bound: bound, result: make(chan error, 1)}
	var err error
	select {
	case s.closing <- req:
		err = <-req.result
	case <-s.kept:
	}
	<-s.kept
	s.cancelBase()
	return err
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

var errOpenTimeout = errors.New("timed out")

// open opens a stream (resuming the session if it has an ID), sends a
// heartbeat and waits up to bound for its answer; also until ctx ends.
// sent is when the heartbeat was sent.
func (s *Session) open(ctx context.Context, bound time.Duration) (conn *kaStream, resp *coordv1.KeepAliveResponse, sent time.Time, err error) {
	sctx, cancel := context.WithCancelCause(s.base)
	stop := context.AfterFunc(ctx, func() { cancel(ctx.Err()) })
	defer stop()
	timer := time.AfterFunc(bound, func() { cancel(errOpenTimeout) })
	defer timer.Stop()
	fail := func(err error) (*kaStream, *coordv1.KeepAliveResponse, time.Time, error) {
		if context.Cause(sctx) == errOpenTimeout {
			err = status.Errorf(codes.DeadlineExceeded, "no answer from coordd within %v", bound.Round(time.Millisecond))
		}
		cancel(nil)
		return nil, nil, time.Time{}, err
	}
	sent = time.Now()
	ks, err := s.client.KeepAlive(sctx)
	if err != nil {
		return fail(err)
	}
	conn = &kaStream{ks: ks, cancel: cancel, recv: make(chan recvResult)}
	go conn.receive(sctx)
	req := &coordv1.KeepAliveRequest{SessionId: s.id, Ttl: durationpb.New(s.ttl)}
	if s.id == "" && s.lockDelay > 0 {
		req.LockDelay = durationpb.New(s.lockDelay)
	}
	_ = ks.Send(req) // a failed Send shows as the stream's error in the receiver
	select {
	case r := <-conn.recv:
		if r.err != nil {
			return fail(r.err)
		}
		return conn, r.resp, sent, nil
	case <-sctx.Done():
		return fail(context.Cause(sctx))
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

func (s *Session) over() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// end records that the session is over and ends every hold's watcher.
// Only keep calls it.
func (s *Session) end(err error) {
	if s.over() {
		return
	}
	s.err = err
	close(s.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, w := range s.watchers {
		w.end(err)
		delete(s.watchers, k)
	}
}

// keep heartbeats, resumes a broken stream until the lease runs out, and
// watches for the session's end; after it, it delivers what is left of the
// loss reports and waits for Close.
func (s *Session) keep() {
	defer close(s.kept)
	defer func() {
		if s.conn != nil {
			s.conn.cancel(nil)
		}
	}()
	beat := time.NewTicker(s.ttl / 3)
	defer beat.Stop()
	expire := time.NewTimer(time.Until(s.deadline))
	defer expire.Stop()
	resume := time.NewTimer(time.Hour)
	resume.Stop()
	defer resume.Stop()
	backoff := minBackoff
	var sentAt time.Time // when the heartbeat in flight on conn was sent; zero if none
	var lastErr error    // the last reason the stream broke, for the end's message

	for {
		var recv <-chan recvResult
		if s.conn != nil {
			recv = s.conn.recv
		}
		var out chan LostHold
		var next LostHold
		if len(s.lost) > 0 {
			out, next = s.lostOut, s.lost[0]
		}
		select {
		case req := <-s.closing:
			err := s.halfClose(req.bound)
			s.end(err)
			req.result <- err
			return

		case out <- next:
			s.lost = s.lost[1:]

		case <-beat.C:
			if s.conn == nil || !sentAt.IsZero() || s.over() {
				continue
			}
			sentAt = time.Now()
			_ = s.conn.ks.Send(&coordv1.KeepAliveRequest{SessionId: s.id, Ttl: durationpb.New(s.ttl)})

		case r := <-recv:
			if r.err != nil {
				s.conn.cancel(nil)
				s.conn, sentAt = nil, time.Time{}
				if s.over() {
					continue
				}
				if finalStreamError(r.err) {
					s.end(streamEnded(r.err))
					continue
				}
				lastErr, backoff = r.err, minBackoff
				resume.Reset(0) // resume at once, then back off
				continue
			}
			s.handle(r.resp, sentAt)
			sentAt = time.Time{}
			expire.Reset(time.Until(s.deadline))

		case <-resume.C:
			if s.over() {
				continue
			}
			bound := min(s.timeout, time.Until(s.deadline))
			if bound <= 0 {
				expire.Reset(0) // the lease has run out: the expire timer ends it
				continue
			}
			conn, resp, sent, err := s.open(s.base, bound)
			if err != nil {
				if finalStreamError(err) {
					s.end(streamEnded(err))
					continue
				}
				lastErr = err
				resume.Reset(backoff/2 + randDuration(backoff/2))
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			s.conn = conn
			s.handle(resp, sent)
			expire.Reset(time.Until(s.deadline))

		case <-expire.C:
			if s.over() {
				continue
			}
			if time.Now().Before(s.deadline) { // extended since the timer was set
				expire.Reset(time.Until(s.deadline))
				continue
			}
			msg := fmt.Sprintf("no heartbeat was answered within the session TTL (%v), so the lease may have ended", s.ttl)
			if lastErr != nil {
				msg += "; last error: " + Describe(lastErr)
			}
			s.end(&SessionError{msg: msg})
		}
	}
}

// SessionError is why a session is over.
type SessionError struct{ msg string }

func (e *SessionError) Error() string { return e.msg }

// handle applies an answer: the losses it reports, the session's end, or
// the lease it extends. sent is when the heartbeat it answers was sent;
// zero if it answers none (coordd reports a loss unasked), which extends
// nothing.
func (s *Session) handle(resp *coordv1.KeepAliveResponse, sent time.Time) {
	for _, l := range resp.GetLostLocks() {
		kind := l.GetKind()
		if kind == coordv1.HoldKind_HOLD_KIND_UNSPECIFIED {
			kind = coordv1.HoldKind_HOLD_KIND_LOCK // a coordd from before LostLock.kind
		}
		lh := LostHold{Kind: kind, Name: l.GetName(), Fence: l.GetFence(), Reason: l.GetReason()}
		if !s.seen(lh) {
			s.lost = append(s.lost, lh)
		}
		s.mu.Lock()
		if w := s.watchers[holdKey{kind, lh.Name}]; w != nil && w.fence == lh.Fence {
			w.end(&LostError{Hold: lh})
			delete(s.watchers, holdKey{kind, lh.Name})
		}
		s.mu.Unlock()
	}
	switch {
	case resp.GetExpired():
		s.end(&SessionError{msg: "coordd reports the session expired"})
	case resp.GetSuperseded():
		s.end(&SessionError{msg: "another stream resumed the session"})
	case !sent.IsZero():
		if d := sent.Add(resp.GetTtl().AsDuration()); d.After(s.deadline) {
			s.deadline = d
		}
	}
}

// seen reports whether l is already queued for Lost: coordd repeats a
// report until a later heartbeat has seen it.
func (s *Session) seen(l LostHold) bool {
	for _, q := range s.lost {
		if q == l {
			return true
		}
	}
	return false
}

// halfClose half-closes the stream (resuming it first if it is broken) and
// waits for coordd to end it.
func (s *Session) halfClose(bound time.Duration) error {
	deadline := time.Now().Add(bound)
	if s.conn == nil {
		if s.over() {
			return nil // nothing left to end, or no way to reach it
		}
		conn, _, _, err := s.open(s.base, min(bound, time.Until(s.deadline)))
		if err != nil {
			return fmt.Errorf("could not reach coordd to end the session (%s); its holds end when its TTL (%v) runs out", Describe(err), s.ttl)
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
			case errors.Is(r.err, io.EOF), status.Code(r.err) == codes.FailedPrecondition:
				return nil // ended now, or already over
			}
			return fmt.Errorf("ending the session: %s; its holds end when its TTL (%v) runs out", Describe(r.err), s.ttl)
		case <-timer.C:
			return fmt.Errorf("coordd did not confirm the end of the session within %v; its holds end when its TTL (%v) runs out", bound, s.ttl)
		}
	}
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
		return &SessionError{msg: "coordd ended the session"}
	}
	return &SessionError{msg: "the session cannot be resumed: " + Describe(err)}
}

// holdKey names a hold of the session: each kind has names of its own.
type holdKey struct {
	kind coordv1.HoldKind
	name string
}

// watcher is one hold's end: closed when coordd reports the hold (at its
// fence) lost, or the session ends.
type watcher struct {
	fence uint64
	ch    chan struct{}
	err   error
}

func (w *watcher) end(err error) {
	w.err = err
	close(w.ch)
}

// watch registers the hold (kind, name) granted at fence; the channel is
// closed when it is lost. A session that is over gives a closed channel.
// unwatch ends the registration (a release) and closes the channel.
func (s *Session) watch(kind coordv1.HoldKind, name string, fence uint64) *watcher {
	w := &watcher{fence: fence, ch: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over() {
		w.end(s.err)
		return w
	}
	if old := s.watchers[holdKey{kind, name}]; old != nil {
		old.end(nil)
	}
	s.watchers[holdKey{kind, name}] = w
	return w
}

func (s *Session) unwatch(kind coordv1.HoldKind, name string, w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchers[holdKey{kind, name}] == w {
		delete(s.watchers, holdKey{kind, name})
		w.end(nil)
	}
}

// LostError is a hold coordd reported lost.
type LostError struct{ Hold LostHold }

func (e *LostError) Error() string { return "coordd reports " + e.Hold.String() }

func kindName(k coordv1.HoldKind) string {
	switch k {
	case coordv1.HoldKind_HOLD_KIND_SEMAPHORE:
		return "semaphore"
	case coordv1.HoldKind_HOLD_KIND_ELECTION:
		return "election"
	}
	return "lock"
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

// Describe formats a gRPC error as CODE (REASON): message, with the reason
// of its google.rpc.ErrorInfo if it has one; other errors as they are.
func Describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	s := code.Code(st.Code()).String()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			s += " (" + info.GetReason() + ")"
			break
		}
	}
	return s + ": " + st.Message()
}
