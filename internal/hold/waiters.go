package hold

// Waiters: this instance's waiting acquisitions, without a herd.
//
// Concurrency design. Per (kind, name) with local waiters there is one
// agent: one goroutine that owns the name's subscription to
// store.WaitTopic(kind, name, instance), its ticket refresh, and every store
// try of the name's waiters, one at a time, in local arrival order. Each
// waiting call (Wait) runs in its caller's goroutine and only joins the
// agent's list and waits for its outcome; the agent runs the caller's
// TryFunc with the caller's context. Because the tries of one name never
// overlap and the first tries are made in list order, the order of the local
// list is the order of this instance's tickets in the store's queue (a
// waiter whose ticket turned out gone moves to the back of the list, as its
// fresh ticket goes to the back of the queue).
//
// The agent tries a waiter when it is new (its first try) or its ticket was
// found gone, and in rounds: on a wake-up of the topic, at the earliest
// retry time the store gave (a blocking holder's deadline, a lock-delay's
// end), or when no round has been made for FallbackRound (a wake-up may have
// been lost). A round gives the waiters a try each, in order, and stops at
// the first one not granted: the store grants in ticket order, so the ones
// behind it would not be granted either, and the store work per grant stays
// constant however many wait. It also stops after a grant that left no room
// for the next waiter (Result.Full: an exclusive lock, a leadership, a
// semaphore's last permit): that waiter's try could not succeed, and the
// store wakes this instance when its ticket can be granted. So a hand-off
// costs one try, the grant, and no try that is bound to fail.
//
// Hand-offs: a release or a LeaveQueue made by this instance grants this
// instance's waiting plain requests that it lets in, in the same store
// call (store.Holds), and Deliver completes their waits with those grants,
// found by ticket, without a try. A waiter whose try is in flight when its
// hand-off comes is completed when the try returns (the caller never sees
// a try still running). A hand-off whose waiter is no longer listed (it
// gave up meanwhile) is dropped: the waiter's own LeaveQueue, which comes
// after, finds it (the store answers a ticket that is gone, with a token
// that holds, with that grant). A hand-off that is never delivered (its
// release's answer was lost) is found by the waiter's next try: the store
// answers a request whose token holds with that grant.
//
// Giving up (the wait passed, the caller's context ended, a drain, Close)
// takes the waiter out of the list under the mutex. If its try is in flight
// at that moment, Wait waits for it, so that a grant made by that try is
// returned to its caller (or, if the caller's context is done, its error is
// returned, and the caller's clean-up of an uncertain outcome ends the
// grant). Then the waiter's ticket leaves the store's queue (LeaveQueue,
// bounded by a second; a ticket left behind lapses within store.WaitLease,
// or leaves with the clean-up of the caller's uncertain grant).
// A grant that LeaveQueue finds (a hand-off as the wait ended) is the
// caller's, as a try's would be: a Lock that answers "not acquired" never
// held. If LeaveQueue fails for a request that may be handed off, whether
// it holds is unknown: Wait returns the error, and the caller's clean-up
// ends whatever its token holds.
//
// q.mu guards the agents map and every agent's and waiter's fields; it is
// never held across a store call or a TryFunc.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/waiter"
)

// Waiters coordinates this instance's waiting acquisitions: per (kind, name)
// one agent with one subscription to store.WaitTopic(kind, name, instance),
// one refresh of all its tickets every store.WaitRefresh, and one store try
// at a time, in local arrival order (which is the store's ticket order).
type Waiters struct {
	st       store.Holds
	sub      store.Subscriber
	drain    waiter.Drain
	instance string
	stop     chan struct{} // closed by Close
	wg       sync.WaitGroup

	mu     sync.Mutex
	agents map[agentKey]*agent
	closed bool
}

// TryFunc makes one store attempt with the caller's ticket (nil: a single
// try without waiting, nothing may be queued).
type TryFunc func(ctx context.Context, t *store.WaitTicket) (Result, error)

// Result is what a try found. Its zero value is "not granted, only a
// wake-up can let it in".
type Result struct {
	// Done ends the wait (granted).
	Done bool
	// Full, with Done: the grant left no room for the next waiter of the
	// name (an exclusive lock, a leadership, a semaphore whose permits are
	// all held now), so the round stops there instead of making a try that
	// cannot succeed; the store wakes this instance when the next ticket
	// can be granted. False (the grant may have left room: a shared lock, a
	// semaphore with permits left, or not known) is always safe: the next
	// waiter is tried.
	Full bool
	// RetryAt, when not Done and not zero, is the local time (time.Now's
	// clock, not the store's: the caller converts the store's RetryAt) at
	// which the state may change by itself; zero: only a wake-up can let the
	// request in.
	RetryAt time.Time
}

// NewWaiters returns the waiting coordinator of this instance, with a fresh
// random instance ID. Waits end early when drain is closed.
func NewWaiters(st store.Holds, sub store.Subscriber, drain waiter.Drain) *Waiters {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &Waiters{
		st: st, sub: sub, drain: drain,
		instance: hex.EncodeToString(b[:]),
		stop:     make(chan struct{}),
		agents:   make(map[agentKey]*agent),
	}
}

// Instance is this instance's ID in the store's tickets (16 hex digits).
func (q *Waiters) Instance() string { return q.instance }

// maxRefresh is the most tickets one RefreshTickets call takes (the store's
// bound).
const maxRefresh = 1000

// giveUpTimeout bounds the LeaveQueue of a waiter that gave up.
const giveUpTimeout = time.Second

// FallbackRound is how long an agent with waiters goes without a round
// before it makes one anyway: wake-ups are hints (store.Subscriber), and a
// lost one must not leave a waiter that could be granted waiting until it
// gives up. Any round (a wake-up's, a retry time's) puts it off, so it costs
// one try a second, and only while nothing else happened on the name for a
// second. Without a subscription the agent rounds every waiter.PollWithoutWakeups
// instead (the same length).
const FallbackRound = time.Second

// minRetry keeps a retry time that is already past (the store's clock a
// little behind ours) from turning into a busy loop.
const minRetry = time.Millisecond

type agentKey struct {
	kind store.HoldKind
	name string
}

type agent struct {
	q      *Waiters
	key    agentKey
	ctx    context.Context // ends when the agent has no waiters or on Close
	cancel context.CancelFunc
	kick   chan struct{} // cap 1: a waiter joined

	// Guarded by q.mu.
	waiters  []*waiting          // local arrival order = store ticket order
	byTicket map[string]*waiting // the listed waiters, by their current ticket
	exited   bool                // run returned: no try will come any more
}

// waiting is one Wait call; its fields are guarded by q.mu.
type waiting struct {
	ctx     context.Context
	try     TryFunc
	token   string            // the request's token if it may be handed off, else ""
	ticket  *store.WaitTicket // the current ticket; nil before the first try
	pending bool              // due a try outside rounds: new, or its ticket is gone
	fresh   bool              // its next try takes a new ticket
	trying  bool              // a try is in flight
	tries   int
	gaveUp  bool
	retryAt time.Time    // from its last try
	handoff *store.Grant // a hand-off's grant (Deliver), set once
	out     chan outcome // cap 1; receives the outcome when the agent ends the wait
}

type outcome struct {
	done    bool
	handoff *store.Grant // done by a hand-off: its grant
	err     error
	// panicked is what the try panicked with: re-raised in the caller's
	// goroutine, where its recovery (the server's interceptor) is.
	panicked any
}

// errClosed: the Waiters were closed.
var errClosed = errors.New("hold: waiters closed")

// Wait tries at once and, if not done, waits up to wait (0: try once, no
// ticket) for its turn: a wake-up, its retryAt, a refresh that found its
// ticket gone (next try re-queues with a new ticket), or a hand-off
// (Deliver). token is the request's if the store may hand it off (a plain
// lock or semaphore request), else "". On give-up (wait passed, ctx done,
// drain) it leaves the queue (LeaveQueue, bounded by 1s). Tries of one
// (kind, name) on this instance never overlap.
//
// It returns the grant of a hand-off that ended the wait, delivered or
// found by the give-up's LeaveQueue (nil if none), and the error of the
// last try, ctx's error if ctx ended first, the error of LeaveQueue for a
// request that may have been handed off (an uncertain outcome), and nil
// otherwise (done by a try, or gave up at the end of the wait or on a
// drain: the caller then answers with what its last try saw).
// A try in flight when the wait ends is waited for, and its outcome counts
// (a grant is never lost, except that with ctx done its error is returned
// instead, for the caller's clean-up). After Close, Wait tries once without
// waiting.
func (q *Waiters) Wait(ctx context.Context, kind store.HoldKind, name, token string, wait time.Duration, try TryFunc) (*store.Grant, error) {
	if wait <= 0 || isClosed(q.drain) {
		_, err := try(ctx, nil)
		return nil, err
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	w := &waiting{ctx: ctx, try: try, token: token, pending: true, fresh: true, out: make(chan outcome, 1)}
	a, err := q.join(agentKey{kind, name}, w)
	if err != nil {
		_, err := try(ctx, nil)
		return nil, err
	}
	select {
	case o := <-w.out:
		o.repanic()
		return o.handoff, o.err
	case <-deadline.C:
	case <-ctx.Done():
	case <-q.drain:
	case <-q.stop:
	}
	o, ended := a.giveUp(w, ctx.Err() == nil)
	o.repanic()
	if ended && (o.done || o.err != nil) {
		if o.done && ctx.Err() != nil {
			return nil, ctx.Err() // granted, but nobody will hear it: the caller cleans up
		}
		return o.handoff, o.err
	}
	if w.ticket != nil {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveUpTimeout)
		hs, err := q.st.LeaveQueue(lctx, kind, name, w.ticket.Ticket, token, q.instance)
		cancel()
		var own *store.Grant
		hs = slices.DeleteFunc(hs, func(h store.Handoff) bool {
			if token != "" && h.Ticket == w.ticket.Ticket && h.Token == token {
				own = &h.Grant
				return true
			}
			return false
		})
		q.Deliver(kind, name, hs)
		switch {
		case ctx.Err() != nil:
			// A grant found (own) or not yet known: the caller cleans up.
		case own != nil:
			return own, nil // handed off as the wait ended: the caller's
		case err != nil && token != "":
			return nil, fmt.Errorf("leaving the queue: %w", err)
		}
	}
	return nil, ctx.Err()
}

// Deliver completes the waits of this instance that hs (the hand-offs of a
// store call of this instance on (kind, name)) granted. A hand-off whose
// waiter is no longer listed is dropped (see the file's comment).
func (q *Waiters) Deliver(kind store.HoldKind, name string, hs []store.Handoff) {
	if len(hs) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.agents[agentKey{kind, name}]
	if a == nil {
		return
	}
	for _, h := range hs {
		w := a.byTicket[h.Ticket]
		if w == nil || w.handoff != nil || w.token == "" || w.token != h.Token {
			continue
		}
		g := h.Grant
		w.handoff = &g
		if !w.trying { // else the try's end completes it
			a.removeLocked(w)
			w.out <- outcome{done: true, handoff: w.handoff}
		}
	}
}

func (o outcome) repanic() {
	if o.panicked != nil {
		panic(o.panicked)
	}
}

// call runs w's try, catching a panic.
func (w *waiting) call(t *store.WaitTicket) (r Result, panicked any, err error) {
	defer func() { panicked = recover() }()
	r, err = w.try(w.ctx, t)
	return r, nil, err
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// join adds w at the back of its name's agent, starting the agent if the
// name has none.
func (q *Waiters) join(key agentKey, w *waiting) (*agent, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, errClosed
	}
	a := q.agents[key]
	if a == nil {
		ctx, cancel := context.WithCancel(context.Background())
		a = &agent{q: q, key: key, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), byTicket: make(map[string]*waiting)}
		q.agents[key] = a
		q.wg.Add(1)
		go a.run()
	}
	a.waiters = append(a.waiters, w)
	select {
	case a.kick <- struct{}{}:
	default:
	}
	return a, nil
}

// removeLocked takes w out of a's list; an agent left without waiters
// stops. q.mu is held.
func (a *agent) removeLocked(w *waiting) {
	if i := slices.Index(a.waiters, w); i >= 0 {
		a.waiters = slices.Delete(a.waiters, i, i+1)
	}
	if w.ticket != nil && a.byTicket[w.ticket.Ticket] == w {
		delete(a.byTicket, w.ticket.Ticket)
	}
	if len(a.waiters) == 0 {
		if a.q.agents[a.key] == a {
			delete(a.q.agents, a.key)
		}
		a.cancel()
	}
}

// giveUp ends w's wait. If a try of w is in flight, or (with waitFirst) its
// first try has not been made yet, it waits for that try and returns its
// outcome (ended true); otherwise it returns at once.
func (a *agent) giveUp(w *waiting, waitFirst bool) (outcome, bool) {
	q := a.q
	q.mu.Lock()
	select {
	case o := <-w.out: // the agent ended the wait meanwhile
		q.mu.Unlock()
		return o, true
	default:
	}
	w.gaveUp = true
	if w.trying || (waitFirst && w.tries == 0 && !a.exited) {
		q.mu.Unlock()
		return <-w.out, true
	}
	a.removeLocked(w)
	q.mu.Unlock()
	return outcome{}, false
}

// run is the agent's goroutine.
func (a *agent) run() {
	q := a.q
	defer q.wg.Done()
	defer func() {
		q.mu.Lock()
		a.exited = true
		// Waiters that gave up before their first try wait for it: there
		// will be none.
		for _, w := range slices.Clone(a.waiters) {
			if w.gaveUp && !w.trying {
				a.removeLocked(w)
				w.out <- outcome{}
			}
		}
		q.mu.Unlock()
		a.cancel()
	}()
	var wake <-chan struct{} // nil without a subscription: never ready
	idle := FallbackRound    // the longest time without a round
	if s, err := q.sub.Subscribe(a.ctx, store.WaitTopic(a.key.kind, a.key.name, q.instance)); err == nil {
		defer s.Close()
		wake = s.C()
	} else {
		idle = waiter.PollWithoutWakeups
	}
	refresh := time.NewTicker(store.WaitRefresh)
	defer refresh.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	round := false
	lastRound := time.Now() // for the fallback round
	for {
		if round {
			lastRound = time.Now()
		}
		a.pass(round)
		round = false
		if next, ok := a.nextRetry(idle, lastRound); ok {
			timer.Reset(max(time.Until(next), minRetry))
		}
		select {
		case <-wake:
		case <-timer.C:
		case <-a.kick:
			timer.Stop()
			continue
		case <-refresh.C:
			timer.Stop()
			a.refresh()
			continue
		case <-a.ctx.Done():
			return
		}
		timer.Stop()
		round = true
	}
}

// pass gives a try to every waiter due one outside rounds (new, or with its
// ticket gone), and, with round, to the others in order until one is not
// granted.
func (a *agent) pass(round bool) {
	q := a.q
	q.mu.Lock()
	list := slices.Clone(a.waiters)
	q.mu.Unlock()
	for _, w := range list {
		q.mu.Lock()
		inRound := !w.pending
		firstOfGaveUp := w.gaveUp && w.tries == 0
		if w.gaveUp && w.ctx.Err() != nil && slices.Contains(a.waiters, w) {
			// It waits for a first try that its context no longer allows.
			a.removeLocked(w)
			w.out <- outcome{}
			q.mu.Unlock()
			continue
		}
		if !slices.Contains(a.waiters, w) || (w.gaveUp && !firstOfGaveUp) || (inRound && !round) || w.ctx.Err() != nil {
			q.mu.Unlock()
			continue
		}
		var t *store.WaitTicket
		if !firstOfGaveUp {
			if w.fresh {
				if w.ticket != nil {
					delete(a.byTicket, w.ticket.Ticket)
				}
				w.ticket = &store.WaitTicket{Ticket: token.New(), Instance: q.instance, Lease: store.WaitLease}
				a.byTicket[w.ticket.Ticket] = w
				w.fresh = false
			}
			t = w.ticket
		}
		w.pending = false
		w.trying = true
		w.tries++
		q.mu.Unlock()

		r, panicked, err := w.call(t)

		q.mu.Lock()
		w.trying = false
		w.retryAt = r.RetryAt
		switch {
		case w.handoff != nil && panicked == nil: // delivered during the try
			a.removeLocked(w)
			w.out <- outcome{done: true, handoff: w.handoff}
		case r.Done || err != nil || w.gaveUp || panicked != nil:
			a.removeLocked(w)
			w.out <- outcome{done: r.Done, err: err, panicked: panicked}
		}
		q.mu.Unlock()
		if inRound && err == nil && (!r.Done || r.Full) {
			// Not granted: nobody behind is. Granted, full: the next one
			// would not be; the store wakes us when it can be.
			round = false
		}
	}
}

// nextRetry is when the next round is due by time: the earliest retry time
// of the queued waiters, or idle after the last round if that is sooner.
func (a *agent) nextRetry(idle time.Duration, lastRound time.Time) (time.Time, bool) {
	q := a.q
	q.mu.Lock()
	defer q.mu.Unlock()
	var next time.Time
	for _, w := range a.waiters {
		if w.tries > 0 && !w.retryAt.IsZero() && (next.IsZero() || w.retryAt.Before(next)) {
			next = w.retryAt
		}
	}
	if len(a.waiters) > 0 {
		if p := lastRound.Add(idle); next.IsZero() || p.Before(next) {
			next = p
		}
	}
	return next, !next.IsZero()
}

// refresh renews the leases of the agent's queued tickets; a waiter whose
// ticket is gone moves to the back and is due a try with a new ticket. It
// runs in the agent's goroutine, so no try is in flight meanwhile.
func (a *agent) refresh() {
	q := a.q
	q.mu.Lock()
	byTicket := make(map[string]*waiting, len(a.waiters))
	var tickets []string
	for _, w := range a.waiters {
		if w.ticket != nil && w.tries > 0 && !w.pending && !w.gaveUp {
			byTicket[w.ticket.Ticket] = w
			tickets = append(tickets, w.ticket.Ticket)
		}
	}
	q.mu.Unlock()
	for chunk := range slices.Chunk(tickets, maxRefresh) {
		ctx, cancel := context.WithTimeout(a.ctx, store.WaitLease)
		gone, err := q.st.RefreshTickets(ctx, a.key.kind, a.key.name, chunk, store.WaitLease)
		cancel()
		if err != nil {
			continue // the tickets may lapse; a later try queues them again
		}
		q.mu.Lock()
		for _, t := range gone {
			w := byTicket[t]
			i := slices.Index(a.waiters, w)
			if w == nil || i < 0 || w.gaveUp || w.ticket == nil || w.ticket.Ticket != t {
				continue
			}
			w.pending, w.fresh = true, true
			a.waiters = append(slices.Delete(a.waiters, i, i+1), w)
		}
		q.mu.Unlock()
	}
}

// Close stops every agent; the waits still going end as on a drain. It
// returns when every agent has stopped.
func (q *Waiters) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.stop)
	}
	for _, a := range q.agents {
		a.cancel()
	}
	q.mu.Unlock()
	q.wg.Wait()
}
