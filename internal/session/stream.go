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
	"sync"
	"sync/atomic"
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

// Transport is a stream's connection to its client. Send may be called
// while a Recv is blocked (from another goroutine), never by two
// goroutines at once.
type Transport interface {
	// Recv returns the next request: io.EOF when the client half-closed;
	// any other error ends the stream and is returned (the session lives
	// until its TTL).
	Recv() (Request, error)
	Send(Reply) error
	// Stop ends the stream with err (the client is told it now, as if Run
	// had returned it), so that a Recv blocked now, or called later,
	// returns an error at once. It may be called from any goroutine, while
	// Recv is blocked, more than once (the first err counts).
	Stop(err error)
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

// errEnded marks a stream whose Run has returned, for a timer or a
// wake-up that fires after it.
var errEnded = errors.New("the stream ended")

// Run runs a KeepAlive stream in namespace ns over t until it ends: the
// client half-closes (the session ends; nil), the stream breaks (t's error;
// the session lives until its TTL), the session expires
// (store.ErrSessionNotFound after it was reported), another stream
// supersedes it (store.ErrSuperseded after it was told), drain ends
// (ErrDraining) or ctx ends.
//
// An open stream costs one goroutine, the caller's, blocked in t.Recv:
// the check at the session's expiry runs on a timer's goroutine, a
// wake-up of the session's topic (a hold bound, a resume elsewhere) only
// sets that timer to now, and ctx and drain are followed by
// context.AfterFunc; whichever of them ends the stream calls t.Stop, so
// that Recv returns. Steps (a heartbeat, a check, the half-close) run one
// at a time, and each on a goroutine that ends with it.
func (s *Service) Run(ctx context.Context, ns string, t Transport, drain context.Context, h Hooks) error {
	st := &stream{svc: s, ns: ns, ctx: ctx, t: t, lost: h.Lost, admit: h.Admit}
	st.timer = time.AfterFunc(time.Hour, st.wake)
	st.timer.Stop()
	stopCtx := context.AfterFunc(ctx, func() { st.end(ctx.Err()) })
	stopDrain := context.AfterFunc(drain, func() { st.end(ErrDraining) })
	defer func() {
		stopCtx()
		stopDrain()
		st.finish()
		// A check under way on the timer's goroutine finds the stream
		// ended before it could send; wait for it, so that nothing is sent
		// after the handler returns.
		st.mu.Lock()
		//lint:ignore SA2001 an empty critical section: a barrier
		st.mu.Unlock()
	}()
	for {
		req, err := t.Recv()
		// Between a Recv's return and the next Recv the handler is in a
		// step: an end decided meanwhile elsewhere is only recorded, and
		// returned after the step (so a drain does not cut a half-close
		// or an open short, and a status is written once).
		if e := st.enter(); e != nil {
			<-e.told
			return e.raise()
		}
		if errors.Is(err, io.EOF) {
			var released []store.ReleasedHold
			err = st.step(func() (err error) {
				released, err = st.halfClose(ctx)
				st.finish() // no check after the session's close
				return err
			})
			for _, r := range released {
				h.Released(r)
			}
			return err // what the half-close did, whatever else ended the stream meanwhile
		}
		if err != nil {
			return err
		}
		if err := st.step(func() error { return st.heartbeat(ctx, req) }); err != nil {
			return st.ended().raise() // err, or an end recorded before it
		}
		if e := st.leave(); e != nil {
			return e.raise()
		}
	}
}

// step runs do, under the stream's lock, on a goroutine of its own, and
// waits for it: the store call, the encoding and the send grow a stack
// several kilobytes deep, and were they run on the caller's goroutine,
// which lives as long as the stream, it would keep that stack between
// heartbeats (the runtime shrinks an idle stack only at a GC, and a
// heartbeat every TTL/3 grows it back). A panic of do is raised again
// here, where the server recovers it.
func (st *stream) step(do func() error) error {
	done := make(chan error, 1)
	var panicked *stepPanic
	go func() {
		defer func() {
			if p := recover(); p != nil {
				panicked = &stepPanic{value: p, stack: debug.Stack()}
				done <- nil
			}
		}()
		done <- st.locked(do)
	}()
	err := <-done
	if panicked != nil {
		panic(*panicked)
	}
	return err
}

// locked runs do under the stream's lock, unless the stream has ended;
// do's error ends the stream. Then it sets the timer by the step, and
// subscribes to the session's topic once it is first known.
func (st *stream) locked(do func() error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if ended := st.ended(); ended != nil {
		return ended.err
	}
	opened := st.ref.ID != ""
	if err := do(); err != nil {
		st.end(err) // before another step can run
		return err
	}
	if !opened && st.ref.ID != "" {
		go st.subscribe(st.ref.ID)
	}
	switch {
	case st.woken.Load():
		st.arm(0) // a wake-up came during the step: check again
	case st.next > 0:
		st.due.Store(int64(monotonic() + st.next))
		st.arm(st.next)
	}
	return nil
}

// arm sets the timer to d from now, unless the stream has ended (an armed
// timer keeps the stream, and its transport, from being collected).
func (st *stream) arm(d time.Duration) {
	st.endMu.Lock()
	defer st.endMu.Unlock()
	if st.err == nil {
		st.timer.Reset(d)
	}
}

// wake is the timer's function: it checks the session unasked if the
// check is due (a heartbeat since the timer was set moves it later), and
// ends the stream if the check says so. A panic ends the stream with it,
// raised again on Run's goroutine.
func (st *stream) wake() {
	if !st.woken.Swap(false) && monotonic() < time.Duration(st.due.Load()) {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			st.end(stepPanic{value: p, stack: debug.Stack()})
		}
	}()
	_ = st.locked(func() error { return st.check(st.ctx) }) // an error ends the stream
}

// poke makes the timer check the session now (a wake-up of its topic).
// It runs with the hub locked, so it does not take endMu: a timer set
// after the stream ended only finds it ended.
func (st *stream) poke() {
	st.woken.Store(true)
	st.timer.Reset(0)
}

// subscribe subscribes to the session's topic, in the background so that
// a slow subscription never holds up a heartbeat, then checks the session
// once for what came between the open and now. Without a subscription the
// timer and the heartbeats still tell.
func (st *stream) subscribe(id string) {
	sub, err := st.svc.Subscribe(st.ctx, st.ns, id)
	if err != nil {
		return
	}
	st.endMu.Lock()
	if st.err != nil {
		st.endMu.Unlock()
		sub.Close() // the stream ended first
		return
	}
	st.sub = sub
	st.endMu.Unlock()
	sub.OnWake(st.poke)
	st.poke()
}

// end ends the stream with err, unless it has ended. If Run's goroutine
// is blocked in Recv, the transport is told (Stop: the client gets err's
// status, and the Recv returns); if it is in a step, err is only recorded,
// and Run returns it after the step.
func (st *stream) end(err error) { st.record(err, true) }

// finish is Run's last step: a timer or a wake-up that fires later finds
// the stream ended. The transport is left alone: it ends with Run.
func (st *stream) finish() { st.record(errEnded, false) }

// record records err as the stream's end unless it has one, stops its
// timer, closes its subscription and, if tell and Run is in Recv, tells
// the transport.
func (st *stream) record(err error, tell bool) {
	st.endMu.Lock()
	if st.err != nil {
		st.endMu.Unlock()
		return
	}
	e := &ending{err: err, told: make(chan struct{})}
	st.err = e
	st.timer.Stop()
	sub := st.sub
	tell = tell && !st.inStep
	st.endMu.Unlock()
	defer close(e.told)
	if sub != nil {
		sub.Close()
	}
	if tell {
		if _, ok := err.(stepPanic); ok {
			err = ErrPanicked // its text and stack are for the server's log, when Run raises it again
		}
		st.t.Stop(err)
	}
}

// ErrPanicked is what Transport.Stop is given when a step that ends the
// stream panicked: Run raises the panic again on its goroutine.
var ErrPanicked = errors.New("internal error")

// enter marks Run's goroutine as out of Recv, in a step; it returns the
// stream's end instead if one was recorded.
func (st *stream) enter() *ending { return st.setInStep(true) }

// leave marks Run's goroutine as going back to Recv; it returns the
// stream's end instead if one was recorded during the step.
func (st *stream) leave() *ending { return st.setInStep(false) }

func (st *stream) setInStep(in bool) *ending {
	st.endMu.Lock()
	defer st.endMu.Unlock()
	if st.err != nil {
		return st.err
	}
	st.inStep = in
	return nil
}

// ended returns how the stream ended, or nil.
func (st *stream) ended() *ending {
	st.endMu.Lock()
	defer st.endMu.Unlock()
	return st.err
}

// ending is why a stream ended; told is closed once the transport was told
// (or need not be).
type ending struct {
	err  error
	told chan struct{}
}

// raise returns the error Run returns, or panics again with a step's
// panic, on Run's goroutine, where the server recovers it.
func (e *ending) raise() error {
	if p, ok := e.err.(stepPanic); ok {
		panic(p)
	}
	return e.err
}

// stepPanic is a panic of a step's goroutine, raised again on the
// stream's: its text has the step's own stack.
type stepPanic struct {
	value any
	stack []byte
}

func (p stepPanic) String() string { return fmt.Sprintf("%v\n%s", p.value, p.stack) }

func (p stepPanic) Error() string { return p.String() }

// monotonic is the time on the monotonic clock (a step of the wall clock
// does not move it), as a duration since an arbitrary start.
func monotonic() time.Duration { return time.Since(start) }

var start = time.Now()

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
	ctx   context.Context
	t     Transport
	lost  func(store.LostHold)
	admit func() error
	timer *time.Timer  // checks the session unasked (wake)
	due   atomic.Int64 // when the timer's check is due (monotonic)
	woken atomic.Bool  // a wake-up of the session's topic is not checked yet

	endMu  sync.Mutex
	err    *ending             // set once, when the stream ends
	sub    *store.Subscription // the session's topic, once subscribed
	inStep bool                // Run's goroutine is out of Recv (enter, leave)

	// mu is held by a step, and guards what follows.
	mu sync.Mutex

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
	if st.ref.ID == "" {
		return nil // not open yet: nothing to check
	}
	state, err := st.svc.Check(ctx, st.ns, st.ref)
	if err != nil {
		return st.failed(err)
	}
	return st.report(state, false)
}

// failed tells a superseded stream so before it ends.
func (st *stream) failed(err error) error {
	if errors.Is(err, store.ErrSuperseded) {
		_ = st.t.Send(Reply{Superseded: true})
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
	if err := st.t.Send(Reply{State: state}); err != nil {
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
