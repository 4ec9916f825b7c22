package session

// A KeepAlive stream: Run drives it, from its transport's requests, its
// timer and its session's wake-ups, one at a time, and the stream's steps
// (Heartbeat, Check, HalfClose) ask the store and send what the client
// must hear. The server's handler only converts between the wire and
// Request and Reply. The contract is the RPC's comment in session.proto.
//
// What the stream keeps: the session's ID and epoch (a resume elsewhere
// makes every later call of this stream store.ErrSuperseded), and what it
// acknowledges: the loss reports it sent before the answer to a later
// heartbeat (sent, acked), so that a report is in at least two responses
// of a healthy stream and survives a lost store reply or a failed send.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// Request is one heartbeat, as the transport converted it: the session
// to open or resume (first request; "": a new one) or the stream's own
// ("" is too), its ttl (0: the default, or its current one) and, when
// opening, its lock-delay.
type Request struct {
	SessionID      string
	TTL, LockDelay time.Duration
}

// Transport is a stream's connection to its client.
type Transport interface {
	// Recv returns the next request: io.EOF when the client half-closed;
	// any other error ends the stream and is returned (the session lives
	// until its TTL).
	Recv() (Request, error)
	Send(Reply) error
}

// Hooks tell the caller, for its metrics, of each loss report (once,
// however often it is sent) and of the holds a half-close released; Admit
// (nil: always) decides whether the stream may open a new session, before
// the store is asked: its error ends the stream. A resume is not a new
// session: it is never put to Admit.
type Hooks struct {
	Lost     func(store.LostHold)
	Released func(store.ReleasedHold)
	Admit    func() error
}

// ErrDraining ends a stream when its coordd drains: its client resumes the
// session on another instance.
var ErrDraining = errors.New("coordd is shutting down; resume on another instance")

// Run runs a KeepAlive stream in namespace ns over t until it ends: the
// client half-closes (the session ends; nil), the stream breaks (t's error;
// the session lives until its TTL), the session expires
// (store.ErrSessionNotFound after it was reported), another stream
// supersedes it (store.ErrSuperseded after it was told), drain is closed
// (ErrDraining) or ctx ends. One goroutine receives; this one runs every
// step and is the only one that sends.
func (s *Service) Run(ctx context.Context, ns string, t Transport, drain <-chan struct{}, h Hooks) error {
	reqs := make(chan Request)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := t.Recv()
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
	st := &stream{svc: s, ns: ns, send: t.Send, lost: h.Lost, admit: h.Admit}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// The session's topic (a hold bound, a resume elsewhere) is subscribed
	// to in the background once the session is open, so that a slow
	// subscription never holds up a heartbeat; subscribed hands it over,
	// and Run closes it. Without it the timer and the heartbeats still
	// tell.
	var wake <-chan struct{}
	subscribed := make(chan *store.Subscription)
	var sub *store.Subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	// step runs one step and sets the timer by it. The step itself runs on
	// a goroutine of its own, which ends with it: the store call, the
	// encoding and the send grow a stack several kilobytes deep, and were
	// they run here, this goroutine, which lives as long as the stream,
	// would keep that stack between heartbeats (the runtime shrinks an idle
	// stack only at a GC, and a heartbeat every TTL/3 grows it back): an
	// open session would cost that much more memory.
	step := func(do func() error) error {
		opened := st.ref.ID != ""
		done := make(chan error, 1)
		var panicked *stepPanic
		go func() {
			defer func() {
				if p := recover(); p != nil {
					panicked = &stepPanic{value: p, stack: debug.Stack()}
					done <- nil
				}
			}()
			done <- do()
		}()
		err := <-done
		if panicked != nil {
			panic(*panicked) // on the stream's goroutine, where the server recovers it
		}
		if err != nil {
			return err
		}
		if !opened && st.ref.ID != "" {
			go func(id string) {
				sub, err := s.Subscribe(ctx, ns, id)
				if err != nil {
					return
				}
				select {
				case subscribed <- sub:
				case <-ctx.Done():
					sub.Close() // the stream ended first
				}
			}(st.ref.ID)
		}
		if st.next > 0 {
			timer.Reset(st.next)
		}
		return nil
	}
	check := func() error { return step(func() error { return st.check(ctx) }) }
	for {
		select {
		case req := <-reqs:
			if err := step(func() error { return st.heartbeat(ctx, req) }); err != nil {
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
				return err
			}
			released, err := st.halfClose(ctx)
			for _, r := range released {
				h.Released(r)
			}
			return err
		case <-drain:
			return ErrDraining
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stepPanic is a panic of a step's goroutine, raised again on the
// stream's: its text has the step's own stack.
type stepPanic struct {
	value any
	stack []byte
}

func (p stepPanic) String() string { return fmt.Sprintf("%v\n%s", p.value, p.stack) }

// Reply is what a stream sends: the session's state, or that another
// stream superseded this one (the last reply before the stream ends).
type Reply struct {
	State      store.SessionState
	Superseded bool
}

// stream is one KeepAlive stream's view of its session.
type stream struct {
	svc   *Service
	ns    string
	send  func(Reply) error
	lost  func(store.LostHold)
	admit func() error

	ref     store.SessionRef // the stream's session, once opened
	sent    uint64           // the last report sent on this stream
	acked   uint64           // the last report a later heartbeat's answer followed
	counted uint64           // the last report given to lost
	// next is how long from now to check the session unasked (its
	// expiry, or the next max hold of one of its holds, whichever comes
	// first, plus a little); 0: not known yet.
	next time.Duration
}

// expirySlack is how long after a session's expire time the stream checks
// the store, so that the store sees the session expired.
const expirySlack = 5 * time.Millisecond

// heartbeat handles a request: the first opens or resumes the session,
// the others renew it. It answers each with the session's state. An error
// ends the stream.
func (st *stream) heartbeat(ctx context.Context, r Request) error {
	id, ttl, lockDelay := r.SessionID, r.TTL, r.LockDelay
	if err := CheckLockDelay(lockDelay); err != nil {
		return err
	}
	var state store.SessionState
	var err error
	switch {
	case st.ref.ID == "":
		if id == "" && st.admit != nil {
			if err := st.admit(); err != nil {
				return err
			}
		}
		state, err = st.svc.Open(ctx, st.ns, id, ttl, lockDelay)
	case id != "" && id != st.ref.ID:
		return validate.Errorf("session_id", "is not this stream's session; open a new stream for another session")
	default:
		// Reports stay until a heartbeat has been answered after them.
		st.ref.Ack = st.acked
		state, err = st.svc.KeepAlive(ctx, st.ns, st.ref, ttl)
	}
	if err != nil {
		return st.failed(err)
	}
	return st.report(state, true)
}

// check looks at the session unasked (at next, or on a wake-up of its
// topic) and sends only news: a new loss report, or the session's expiry.
func (st *stream) check(ctx context.Context) error {
	state, err := st.svc.Check(ctx, st.ns, st.ref)
	if err != nil {
		return st.failed(err)
	}
	return st.report(state, false)
}

// failed tells a superseded stream so before it ends.
func (st *stream) failed(err error) error {
	if errors.Is(err, store.ErrSuperseded) {
		_ = st.send(Reply{Superseded: true})
	}
	return err
}

// report sends state (unless unasked and without news: no new report, no
// expiry) and sets next; an expired session ends the stream.
func (st *stream) report(state store.SessionState, asked bool) error {
	news := state.Expired
	for _, l := range state.Lost {
		news = news || l.Seq > st.sent
		if l.Seq > st.counted {
			st.lost(l)
			st.counted = l.Seq
		}
	}
	st.ref.ID, st.ref.Stream = state.ID, state.Stream
	st.next = next(state)
	if !asked && !news {
		return nil
	}
	if err := st.send(Reply{State: state}); err != nil {
		return err
	}
	if asked {
		// A heartbeat was answered after every report sent before it.
		st.acked = st.sent
	}
	if n := len(state.Lost); n > 0 {
		st.sent = state.Lost[n-1].Seq
	}
	if state.Expired {
		return fmt.Errorf("the session expired: %w", store.ErrSessionNotFound)
	}
	return nil
}

// next is when to check a session unasked: at its expiry or its next max
// hold, whichever comes first.
func next(state store.SessionState) time.Duration {
	d := state.TTL
	if !state.NextLoss.IsZero() {
		d = min(d, state.TTL-state.ExpireTime.Sub(state.NextLoss))
	}
	return max(d, 0) + expirySlack
}

// closeTimeout bounds closing a half-closed session, which runs on after
// the client has gone.
const closeTimeout = 5 * time.Second

// halfClose ends the session at the client's request (it half-closed the
// stream) and returns the holds it released. It finishes even if ctx (the
// stream's) ends meanwhile, within a bound; a session never opened, or
// already expired and reported, is no error. ctx already done (a revoked
// key, a drain, as the client half-closed) leaves the session to lapse at
// its TTL.
func (st *stream) halfClose(ctx context.Context) ([]store.ReleasedHold, error) {
	if st.ref.ID == "" {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	released, err := st.svc.Close(cctx, st.ns, st.ref)
	if errors.Is(err, store.ErrSessionNotFound) {
		return released, nil // already expired and reported, or never existed
	}
	return released, st.failed(err) // superseded: another stream has the session; nothing changed
}
