package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/token"
)

// The chaos: how often a scenario runs on a connection of its own that the
// test closes at a random moment, and how often a call's context is
// cancelled or timed out mid-call.
const (
	pChaosConn  = 0.05
	pCancelCall = 0.05
	// callTimeout is added to a call's wait as its safety deadline: a call
	// that reaches it hung, which is a failure.
	callTimeout = 15 * time.Second
	// maxBacklog is the queue depth above which producers hold back.
	maxBacklog = 300
)

// workerKinds are the kinds of worker and how many of each run (times
// -soak.scale).
var workerKinds = []struct {
	name string
	n    int
	run  func(*worker)
}{
	{"locks", 6, (*worker).locks},
	{"sessions", 6, (*worker).session},
	{"ratelimit", 3, (*worker).rate},
	{"idempotency", 6, (*worker).idem},
	{"producer", 3, (*worker).produce},
	{"consumer", 5, (*worker).consume},
}

// load is the soak's clients: the names they use, what they did, and the
// controller's state.
type load struct {
	e     *env
	run   context.Context // ends the load
	redis bool

	lockNames, idemKeys, rateKeys, queues, dedupIDs []string

	think      atomic.Int64 // ns the workers pause between scenarios, set by the controller
	chaosConns atomic.Int64
	ctl        *tally        // the controller's probes
	target     time.Duration // the latency above which the workers pause longer
	rtts       []time.Duration
	thinks     []time.Duration

	mu       sync.Mutex
	sessions map[string]struct{} // every session ID a KeepAlive returned
	tallies  []*tally
	book     queueBook
}

// queueBook follows messages from Enqueue to Ack, to check that none is
// lost and none acked twice.
type queueBook struct {
	mu       sync.Mutex
	enqueued map[string]struct{} // IDs Enqueue returned
	acked    map[string]int      // successful Acks by message ID
	maybe    map[string]struct{} // Acks whose outcome the client does not know
}

func (b *queueBook) enqueue(id string) {
	b.mu.Lock()
	b.enqueued[id] = struct{}{}
	b.mu.Unlock()
}

func (b *queueBook) ack(id string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		b.acked[id]++
		return
	}
	if c, _ := outcome(err); c == codes.Canceled || c == codes.DeadlineExceeded || c == codes.Unavailable {
		b.maybe[id] = struct{}{}
	}
}

func newLoad(e *env) *load {
	l := &load{
		e: e, redis: e.backend != "memory", ctl: newTally(), sessions: map[string]struct{}{},
		book: queueBook{enqueued: map[string]struct{}{}, acked: map[string]int{}, maybe: map[string]struct{}{}},
	}
	names := func(prefix string, n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("%s-%02d", prefix, i)
		}
		return s
	}
	l.lockNames, l.idemKeys, l.rateKeys = names("lock", 48), names("idem", 96), names("rate", 32)
	l.queues, l.dedupIDs = names("queue", 4), names("dedup", 32)
	return l
}

func (l *load) addSession(id string) {
	l.mu.Lock()
	l.sessions[id] = struct{}{}
	l.mu.Unlock()
}

// setTarget measures the idle latency of GetLock and sets the controller's
// target from it (see control).
func (l *load) setTarget() {
	lc := coordv1.NewLockServiceClient(l.e.stable[0])
	var idle []time.Duration
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		t0 := time.Now()
		_, err := lc.GetLock(ctx, &coordv1.GetLockRequest{Name: "probe"})
		idle = append(idle, time.Since(t0))
		cancel()
		l.ctl.record("GetLock(probe)", err, false, l.redis)
	}
	l.target = min(max(3*pct(idle, 50), 40*time.Millisecond), 150*time.Millisecond)
}

// runFor runs the workers and the controller for d, then ends them and
// waits for them.
func (l *load) runFor(d time.Duration, scale int) {
	l.setTarget()
	// Cancelled rather than timed out: a call's status is then CANCELLED,
	// decided by the client after run.Err() is set, never a server's
	// DEADLINE_EXCEEDED that arrives just before it.
	run, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(d, cancel)
	defer stop.Stop()
	l.run = run
	var wg sync.WaitGroup
	wg.Go(l.control)
	id := 0
	for _, k := range workerKinds {
		for range k.n * scale {
			w := &worker{l: l, id: id, rng: rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano()))), t: newTally()}
			id++
			l.tallies = append(l.tallies, w.t)
			wg.Go(func() {
				for run.Err() == nil {
					w.begin()
					k.run(w)
					w.end()
					w.pause()
				}
			})
		}
	}
	wg.Wait()
}

// control measures a GetLock's latency every 100 ms and sets the workers'
// pause: doubled (up to 100 ms) while it is over the target, shrunk while it
// is under a quarter of it. The target is 3 times the idle latency, between
// 40 and 150 ms: heartbeats (every ttl/3, at least 333 ms), waits and leases
// then keep their meaning on a slow or busy machine or under the race
// detector, without throttling the load to nothing where even an idle call
// is slow.
func (l *load) control() {
	lc := coordv1.NewLockServiceClient(l.e.stable[0])
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.run.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(l.run, callTimeout)
		t0 := time.Now()
		_, err := lc.GetLock(ctx, &coordv1.GetLockRequest{Name: "probe"})
		rtt := time.Since(t0)
		cancel()
		l.ctl.record("GetLock(probe)", err, l.run.Err() != nil, l.redis)
		think := time.Duration(l.think.Load())
		switch {
		case rtt > l.target:
			think = min(max(2*think, time.Millisecond), 100*time.Millisecond)
		case rtt < l.target/4:
			if think = think * 3 / 4; think < 100*time.Microsecond {
				think = 0
			}
		}
		l.think.Store(int64(think))
		l.rtts = append(l.rtts, rtt)
		l.thinks = append(l.thinks, think)
	}
}

// worker is one client goroutine.
type worker struct {
	l   *load
	id  int
	rng *rand.Rand
	t   *tally
	// The scenario's connection: a stable one, or (chaos) one of its own
	// that closes at a random moment.
	conn    *grpc.ClientConn
	chaos   bool
	endConn func()
}

// begin picks the scenario's connection.
func (w *worker) begin() {
	if w.rng.Float64() >= pChaosConn {
		w.conn, w.chaos, w.endConn = w.l.e.stable[w.rng.IntN(len(w.l.e.stable))], false, nil
		return
	}
	c := w.l.e.dial()
	w.l.chaosConns.Add(1)
	timer := time.AfterFunc(w.between(time.Millisecond, 400*time.Millisecond), func() { _ = c.Close() })
	w.conn, w.chaos = c, true
	w.endConn = func() {
		timer.Stop()
		_ = c.Close()
	}
}

func (w *worker) end() {
	if w.endConn != nil {
		w.endConn()
		w.endConn = nil
	}
}

// broken reports whether the scenario's connection was closed under it.
func (w *worker) broken() bool { return w.chaos && w.conn.GetState() == connectivity.Shutdown }

// done reports whether the scenario should stop: the load ended or its
// connection is gone.
func (w *worker) done() bool { return w.l.run.Err() != nil || w.broken() }

func (w *worker) pause() {
	think := time.Duration(w.l.think.Load())
	if think <= 0 {
		return
	}
	w.sleep(think/2 + time.Duration(w.rng.Int64N(int64(think))))
}

// sleep sleeps d, or less if the load ends; it reports whether the load goes
// on.
func (w *worker) sleep(d time.Duration) bool {
	if d <= 0 {
		return w.l.run.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.l.run.Done():
		return false
	}
}

// between returns a random duration in [lo, hi).
func (w *worker) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

func (w *worker) pick(s []string) string { return s[w.rng.IntN(len(s))] }

func (w *worker) chance(p float64) bool { return w.rng.Float64() < p }

// call runs one RPC under a context that, now and then, the test cancels or
// times out at a random moment of the call's expected duration (wait, or a
// few milliseconds), and records its outcome.
func (w *worker) call(op string, wait time.Duration, fn func(context.Context) error, expected ...string) error {
	ctx, cancel := context.WithTimeout(w.l.run, wait+callTimeout)
	defer cancel()
	injected := w.chance(pCancelCall)
	if injected {
		d := w.between(0, wait+5*time.Millisecond)
		if w.rng.IntN(2) == 0 {
			var c context.CancelFunc
			ctx, c = context.WithTimeout(ctx, d)
			defer c()
		} else {
			t := time.AfterFunc(d, cancel)
			defer t.Stop()
		}
	}
	err := fn(ctx)
	w.t.record(op, err, w.chaos || injected || w.l.run.Err() != nil, w.l.redis, expected...)
	return err
}

func dpb(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// --- locks ---

// locks takes a lock (with or without wait, sometimes with max_hold),
// renews it, looks at it, and releases or abandons it; now and then it uses
// a token that holds nothing, or renews after the lease ran out.
func (w *worker) locks() {
	lc := coordv1.NewLockServiceClient(w.conn)
	name := w.pick(w.l.lockNames)
	ttl := w.between(200*time.Millisecond, maxLockTTL)
	req := &coordv1.LockRequest{Name: name, Ttl: dpb(ttl), Owner: fmt.Sprintf("w%d", w.id)}
	op, wait := "Lock", time.Duration(0)
	if w.chance(0.5) {
		op, wait = "Lock(wait)", w.between(10*time.Millisecond, maxWait)
		req.Wait = dpb(wait)
	}
	if w.chance(0.2) {
		req.MaxHold = dpb(w.between(200*time.Millisecond, maxLockTTL))
	}
	var g *coordv1.LockResponse
	if w.call(op, wait, func(ctx context.Context) (err error) { g, err = lc.Lock(ctx, req); return }) != nil {
		return
	}
	if !g.GetAcquired() {
		w.t.event("lock contended, not acquired")
		if w.chance(0.3) {
			w.getLock(lc, name)
		}
		if w.chance(0.1) {
			w.staleToken(lc, name)
		}
		return
	}
	tok := g.GetToken()
	for n := w.rng.IntN(3); n > 0 && !w.done(); n-- {
		if !w.sleep(w.between(0, ttl/2)) {
			return
		}
		ttl = w.between(200*time.Millisecond, maxLockTTL)
		_ = w.call("Renew", 0, func(ctx context.Context) error {
			_, err := lc.Renew(ctx, &coordv1.RenewRequest{Name: name, Token: tok, Ttl: dpb(ttl)})
			return err
		}, "LOCK_NOT_HELD")
	}
	if w.chance(0.3) {
		w.getLock(lc, name)
	}
	switch r := w.rng.Float64(); {
	case r < 0.7:
		w.release(lc, name, tok)
		if w.chance(0.1) {
			w.release(lc, name, tok) // released=false, and harmless
		}
	case r < 0.8:
		if !w.sleep(ttl + 50*time.Millisecond) {
			return
		}
		_ = w.call("Renew(expired)", 0, func(ctx context.Context) error {
			_, err := lc.Renew(ctx, &coordv1.RenewRequest{Name: name, Token: tok, Ttl: dpb(ttl)})
			return err
		}, "LOCK_NOT_HELD")
		w.release(lc, name, tok)
	default:
		w.t.event("lock abandoned")
	}
}

func (w *worker) getLock(lc coordv1.LockServiceClient, name string) {
	_ = w.call("GetLock", 0, func(ctx context.Context) error {
		_, err := lc.GetLock(ctx, &coordv1.GetLockRequest{Name: name})
		return err
	})
}

func (w *worker) release(lc coordv1.LockServiceClient, name, tok string) {
	var r *coordv1.ReleaseResponse
	if w.call("Release", 0, func(ctx context.Context) (err error) {
		r, err = lc.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: tok})
		return
	}) == nil {
		w.t.event(fmt.Sprintf("release released=%v", r.GetReleased()))
	}
}

// staleToken renews and releases name with a token that never held it:
// LOCK_NOT_HELD and released=false.
func (w *worker) staleToken(lc coordv1.LockServiceClient, name string) {
	bogus := token.New()
	_ = w.call("Renew(stale token)", 0, func(ctx context.Context) error {
		_, err := lc.Renew(ctx, &coordv1.RenewRequest{Name: name, Token: bogus, Ttl: dpb(time.Second)})
		return err
	}, "LOCK_NOT_HELD")
	var r *coordv1.ReleaseResponse
	if w.call("Release(stale token)", 0, func(ctx context.Context) (err error) {
		r, err = lc.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: bogus})
		return
	}) == nil && r.GetReleased() {
		w.t.unexpected(fmt.Sprintf("Release of %s with a token that never held it released it", name))
	}
}

// --- sessions ---

// session is one KeepAlive session with locks bound to it, ended one of
// four ways.
type session struct {
	w      *worker
	ttl    time.Duration
	id     string
	stream coordv1.SessionService_KeepAliveClient
	cancel context.CancelFunc
	held   map[string]heldLock // by lock name
	// hung is set by the watchdog that cancels a Recv taking far too long.
	hung atomic.Bool
	dog  *time.Timer
}

// open starts a stream on conn and opens (id "") or resumes the session.
func (s *session) open(conn *grpc.ClientConn, op string) (*coordv1.KeepAliveResponse, error) {
	ctx, cancel := context.WithCancel(s.w.l.run)
	s.cancel = cancel
	s.hung.Store(false)
	s.dog = time.AfterFunc(time.Hour, func() {
		s.hung.Store(true)
		cancel()
	})
	s.dog.Stop()
	var err error
	s.stream, err = coordv1.NewSessionServiceClient(conn).KeepAlive(ctx)
	if err != nil {
		s.w.t.record(op, err, s.w.chaos || s.w.l.run.Err() != nil, s.w.l.redis)
		return nil, err
	}
	return s.exchange(op, &coordv1.KeepAliveRequest{SessionId: s.id, Ttl: dpb(s.ttl)})
}

// recv receives one response, under a watchdog.
func (s *session) recv(within time.Duration) (*coordv1.KeepAliveResponse, error) {
	s.dog.Reset(within)
	resp, err := s.stream.Recv()
	s.dog.Stop()
	return resp, err
}

// exchange sends a heartbeat and receives its answer, and records the
// outcome as op. An answer with expired=true (the server expired the
// session before the heartbeat) ends the stream: the next Recv must be
// SESSION_NOT_FOUND.
func (s *session) exchange(op string, req *coordv1.KeepAliveRequest) (*coordv1.KeepAliveResponse, error) {
	err := s.stream.Send(req)
	var resp *coordv1.KeepAliveResponse
	if err == nil {
		resp, err = s.recv(10 * time.Second)
	} else {
		_, err = s.recv(10 * time.Second) // the stream's status
	}
	if s.hung.Load() {
		s.w.t.unexpected(fmt.Sprintf("%s: no answer within 10 s", op))
		return nil, err
	}
	s.w.t.record(op, err, s.w.chaos || s.w.l.run.Err() != nil, s.w.l.redis, "SESSION_NOT_FOUND")
	if err != nil {
		return nil, err
	}
	if req.GetSessionId() != "" && resp.GetSessionId() != req.GetSessionId() {
		s.w.t.unexpected(fmt.Sprintf("%s of session %s answered for session %s", op, req.GetSessionId(), resp.GetSessionId()))
	}
	s.lost(resp)
	if resp.GetExpired() {
		s.w.t.event("session expired under a live stream")
		s.finishExpired("KeepAlive(after expired)")
		return nil, errors.New("expired")
	}
	return resp, nil
}

// heldLock is a session-bound grant the client holds.
type heldLock struct {
	token string
	fence uint64
}

// lost forgets the locks a response reports lost. Reports are at least
// once: a report of an earlier grant of the same name (another fence) is
// not about the grant held now.
func (s *session) lost(resp *coordv1.KeepAliveResponse) {
	for _, l := range resp.GetLostLocks() {
		if h, ok := s.held[l.GetName()]; ok && h.fence == l.GetFence() {
			s.w.t.event("session lock lost: " + l.GetReason().String())
			delete(s.held, l.GetName())
		}
	}
}

// finishExpired reads the end of a stream whose session expired: it must
// end with SESSION_NOT_FOUND.
func (s *session) finishExpired(op string) {
	resp, err := s.recv(10 * time.Second)
	switch {
	case s.hung.Load():
		s.w.t.unexpected(op + ": the stream did not end within 10 s of expired=true")
	case err == nil:
		s.w.t.unexpected(fmt.Sprintf("%s: a response after expired=true: %v", op, resp))
	case errors.Is(err, io.EOF):
		s.w.t.unexpected(op + ": the stream of an expired session ended with OK, want SESSION_NOT_FOUND")
	default:
		s.w.t.record(op, err, s.w.chaos || s.w.l.run.Err() != nil, s.w.l.redis, "SESSION_NOT_FOUND")
	}
}

func (w *worker) session() {
	s := &session{w: w, ttl: w.between(minSessionTTL, maxSessionTTL+time.Millisecond).Truncate(time.Millisecond), held: map[string]heldLock{}}
	defer func() {
		if s.cancel != nil {
			s.cancel()
		}
	}()
	resp, err := s.open(w.conn, "KeepAlive(open)")
	if err != nil {
		return
	}
	s.id = resp.GetSessionId()
	w.l.addSession(s.id)
	if !s.live(w.conn, w.between(100*time.Millisecond, 3*time.Second)) {
		return
	}
	switch r := w.rng.Float64(); {
	case r < 0.45:
		s.close()
	case r < 0.70:
		s.breakStream()
	case r < 0.85:
		s.breakStream()
		if !w.sleep(w.between(0, s.ttl*6/5)) {
			return
		}
		conn := w.conn
		if w.broken() {
			conn = w.l.e.stable[w.rng.IntN(len(w.l.e.stable))]
		}
		resp, err := s.open(conn, "KeepAlive(resume)")
		if err != nil || resp.GetSessionId() != s.id {
			return
		}
		if s.live(conn, w.between(50*time.Millisecond, time.Second)) {
			s.close()
		}
	default:
		s.silent()
	}
}

// live keeps the session alive for d, heartbeating every ttl/3, and takes,
// releases and looks at locks bound to it meanwhile. It reports whether the
// stream is still usable.
func (s *session) live(conn *grpc.ClientConn, d time.Duration) bool {
	w := s.w
	lc := coordv1.NewLockServiceClient(conn)
	end := time.Now().Add(d)
	beat := time.Now().Add(s.ttl / 3)
	for time.Now().Before(end) {
		if w.done() {
			return false
		}
		if !time.Now().Before(beat) {
			if _, err := s.exchange("KeepAlive(heartbeat)", &coordv1.KeepAliveRequest{}); err != nil {
				return false
			}
			beat = time.Now().Add(s.ttl / 3)
		}
		switch r := w.rng.Float64(); {
		case r < 0.35 && len(s.held) < 3:
			name := w.pick(w.l.lockNames)
			if _, ok := s.held[name]; ok {
				continue
			}
			req := &coordv1.LockRequest{Name: name, SessionId: s.id, Owner: fmt.Sprintf("w%d/session", w.id)}
			op, wait := "Lock(session)", time.Duration(0)
			if w.chance(0.5) {
				op, wait = "Lock(session,wait)", w.between(10*time.Millisecond, s.ttl/4)
				req.Wait = dpb(wait)
			}
			if w.chance(0.15) {
				req.MaxHold = dpb(w.between(300*time.Millisecond, 1500*time.Millisecond))
			}
			var g *coordv1.LockResponse
			// already_held: an earlier Lock of this name on this session was
			// granted but its answer never reached the client (a cancelled
			// or broken call); this answer is that grant, with its token.
			if w.call(op, wait, func(ctx context.Context) (err error) { g, err = lc.Lock(ctx, req); return }, "SESSION_NOT_FOUND") == nil && g.GetAcquired() {
				s.held[name] = heldLock{token: g.GetToken(), fence: g.GetFence()}
			}
		case r < 0.45 && len(s.held) > 0:
			name := w.pick(keys(s.held))
			w.release(lc, name, s.held[name].token)
			delete(s.held, name)
		case r < 0.50 && len(s.held) > 0:
			name := w.pick(keys(s.held))
			_ = w.call("Renew(session-bound)", 0, func(ctx context.Context) error {
				_, err := lc.Renew(ctx, &coordv1.RenewRequest{Name: name, Token: s.held[name].token, Ttl: dpb(time.Second)})
				return err
			}, "LOCK_SESSION_BOUND", "LOCK_NOT_HELD")
		case r < 0.60:
			w.getLock(lc, w.pick(w.l.lockNames))
		default:
			if !w.sleep(min(time.Until(beat), w.between(10*time.Millisecond, 150*time.Millisecond))) {
				return false
			}
		}
	}
	return !w.done()
}

func keys[V any](m map[string]V) []string {
	s := make([]string, 0, len(m))
	for k := range m {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// close half-closes the stream: the session ends at once and its locks are
// released, and the server ends the stream with OK. It then checks, on a
// stable connection, that none of the locks is still bound to the session.
func (s *session) close() {
	w := s.w
	err := s.stream.CloseSend()
	for err == nil {
		var resp *coordv1.KeepAliveResponse
		if resp, err = s.recv(10 * time.Second); err == nil {
			s.lost(resp)
		}
	}
	if s.hung.Load() {
		w.t.unexpected("KeepAlive(close): the stream did not end within 10 s of the half-close")
		return
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if !w.t.record("KeepAlive(close)", err, w.chaos || w.l.run.Err() != nil, w.l.redis, "SESSION_NOT_FOUND") {
		return
	}
	// A Release by the grant's token tells whether the session still holds
	// it (GetLock never names the holder's session).
	lc := coordv1.NewLockServiceClient(w.l.e.stable[0])
	for name, h := range s.held {
		ctx, cancel := context.WithTimeout(w.l.run, callTimeout)
		rel, err := lc.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: h.token})
		cancel()
		w.t.record("Release(after close)", err, w.l.run.Err() != nil, w.l.redis)
		if err == nil && rel.GetReleased() {
			w.t.unexpected(fmt.Sprintf("lock %s (fence %d) was still held by session %s after its stream was half-closed", name, h.fence, s.id))
		}
	}
}

// breakStream breaks the stream without a half-close, as a crashed client
// would: a heartbeat is sent and the stream's context is cancelled a few
// milliseconds later, often while its answer is on the way. The session
// lives on until its TTL.
func (s *session) breakStream() {
	w := s.w
	_ = s.stream.Send(&coordv1.KeepAliveRequest{})
	t := time.AfterFunc(w.between(0, 3*time.Millisecond), s.cancel)
	defer t.Stop()
	_, err := s.recv(10 * time.Second)
	w.t.record("KeepAlive(break)", err, true, w.l.redis, "SESSION_NOT_FOUND")
	s.cancel()
}

// silent stops heartbeating with the stream open: the server must report
// expired=true within the TTL and end the stream with SESSION_NOT_FOUND.
func (s *session) silent() {
	w := s.w
	for {
		resp, err := s.recv(s.ttl + 10*time.Second)
		if s.hung.Load() {
			w.t.unexpected(fmt.Sprintf("KeepAlive(silent): the server did not expire the session within its TTL (%v) + 10 s", s.ttl))
			return
		}
		if err != nil {
			w.t.record("KeepAlive(silent)", err, w.chaos || w.l.run.Err() != nil, w.l.redis)
			return
		}
		s.lost(resp)
		if resp.GetExpired() {
			w.t.ops["KeepAlive(silent)"]++
			s.finishExpired("KeepAlive(silent, end)")
			return
		}
	}
}

// --- rate limits ---

var algorithms = []coordv1.Algorithm{
	coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, coordv1.Algorithm_ALGORITHM_SLIDING_WINDOW,
	coordv1.Algorithm_ALGORITHM_SLIDING_LOG, coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET,
	coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET,
}

// rate sends a burst of Allow calls on one key, with an inline limit of any
// algorithm or a named policy, with cost and peek.
func (w *worker) rate() {
	rc := coordv1.NewRateLimitServiceClient(w.conn)
	req := &coordv1.AllowRequest{Key: w.pick(w.l.rateKeys)}
	var op string
	var capacity int64 // the most one call may cost
	if w.chance(0.4) {
		req.Policy = w.pick([]string{"fixed", "sliding", "log", "token", "leaky", "shadow"})
		op = "Allow(policy " + req.Policy + ")"
		capacity = policies()[req.Policy].Limit.Capacity()
	} else {
		alg := algorithms[w.rng.IntN(len(algorithms))]
		lim := &coordv1.Limit{
			Algorithm: alg,
			Limit:     []int64{5, 20, 50}[w.rng.IntN(3)],
			Period:    durationpb.New([]time.Duration{250 * time.Millisecond, 500 * time.Millisecond, maxPeriod}[w.rng.IntN(3)]),
		}
		if (alg == coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET || alg == coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET) && w.chance(0.3) {
			lim.Burst = 2 * lim.Limit
		}
		req.Limit = lim
		capacity = lim.Limit
		if lim.Burst > 0 {
			capacity = lim.Burst
		} else if alg == coordv1.Algorithm_ALGORITHM_LEAKY_BUCKET {
			capacity = 1
		}
		op = "Allow(" + alg.String()[len("ALGORITHM_"):] + ")"
	}
	if w.chance(0.2) {
		req.Cost = 1 + w.rng.Int64N(min(3, capacity))
	}
	req.Peek = w.chance(0.1)
	for n := 1 + w.rng.IntN(10); n > 0 && !w.done(); n-- {
		var resp *coordv1.AllowResponse
		if w.call(op, 0, func(ctx context.Context) (err error) { resp, err = rc.Allow(ctx, req); return }) != nil {
			continue
		}
		switch {
		case resp.GetShadowDenied():
			w.t.event("allow: shadow denied")
		case resp.GetAllowed():
			w.t.event("allow: allowed")
		default:
			w.t.event("allow: denied")
		}
	}
}

// --- idempotency ---

// idem begins an idempotent operation (sometimes waiting for another
// owner), and as the owner extends it and finishes it with a result, a
// failure or a retryable failure, or abandons it, or finishes it after its
// lease ran out (NOT_OWNER, nothing stored).
func (w *worker) idem() {
	ic := coordv1.NewIdempotencyServiceClient(w.conn)
	key := w.pick(w.l.idemKeys)
	fp := "fp-" + key
	op, wait := "BeginIdempotent", time.Duration(0)
	if w.chance(0.03) {
		fp, op = "fp-other-"+key, "BeginIdempotent(other fingerprint)"
	}
	lease := w.between(300*time.Millisecond, maxProcessing)
	req := &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: fp, ProcessingTtl: dpb(lease)}
	if w.chance(0.5) {
		wait = w.between(10*time.Millisecond, maxWait)
		req.Wait, op = dpb(wait), op+"(wait)"
	}
	var b *coordv1.BeginIdempotentResponse
	if w.call(op, wait, func(ctx context.Context) (err error) { b, err = ic.BeginIdempotent(ctx, req); return }, "FINGERPRINT_MISMATCH") != nil {
		return
	}
	w.t.event("begin: " + b.GetOutcome().String())
	if b.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
		return
	}
	owner := b.GetOwnerToken()
	// The lease's end by the store's clock, unless an Extend's outcome is
	// unknown.
	leaseEnd, leaseKnown := b.GetExpireTime().AsTime(), true
	work := w.between(0, lease/2)
	if w.chance(0.3) {
		if !w.sleep(work / 2) {
			return
		}
		var x *coordv1.ExtendIdempotentResponse
		err := w.call("ExtendIdempotent", 0, func(ctx context.Context) (err error) {
			x, err = ic.ExtendIdempotent(ctx, &coordv1.ExtendIdempotentRequest{Key: key, OwnerToken: owner, ProcessingTtl: dpb(w.between(300*time.Millisecond, maxProcessing))})
			return
		}, "NOT_OWNER")
		switch c, _ := outcome(err); c {
		case codes.OK:
			leaseEnd = x.GetExpireTime().AsTime()
		case codes.FailedPrecondition:
		default:
			leaseKnown = false
		}
	}
	if !w.sleep(work) {
		return
	}
	resultTTL := dpb(w.between(200*time.Millisecond, maxResultTTL))
	finish := func(op string, req *coordv1.FinishRequest) (*coordv1.FinishResponse, error) {
		req.Key, req.OwnerToken = key, owner
		var f *coordv1.FinishResponse
		err := w.call(op, 0, func(ctx context.Context) (err error) { f, err = ic.Finish(ctx, req); return }, "NOT_OWNER")
		return f, err
	}
	switch r := w.rng.Float64(); {
	case r < 0.55:
		_, _ = finish("Finish(result)", &coordv1.FinishRequest{Result: []byte("result of " + key), ResultTtl: resultTTL})
	case r < 0.65:
		_, _ = finish("Finish(failure)", &coordv1.FinishRequest{Failure: &coordv1.Failure{Message: "failed"}, ResultTtl: resultTTL})
	case r < 0.75:
		_, _ = finish("Finish(retryable failure)", &coordv1.FinishRequest{Failure: &coordv1.Failure{Message: "again", Retryable: true}})
	case r < 0.80:
		if !w.sleep(time.Until(leaseEnd) + 50*time.Millisecond) {
			return
		}
		f, err := finish("Finish(after lease)", &coordv1.FinishRequest{Result: []byte("late"), ResultTtl: resultTTL})
		if err == nil && f.GetStored() && leaseKnown {
			w.t.unexpected(fmt.Sprintf("Finish of %s stored a result 50 ms after the owner's lease ran out (at %v)", key, leaseEnd))
		}
	default:
		w.t.event("idempotency key abandoned")
	}
}

// --- queues ---

// produce enqueues a few messages to a queue (with delay, deliver_time,
// dedup_id, max_attempts 1-3), unless the queue is deep.
func (w *worker) produce() {
	qc := coordv1.NewQueueServiceClient(w.conn)
	q := w.pick(w.l.queues)
	if w.chance(0.2) {
		var st *coordv1.StatsResponse
		if w.call("Stats", 0, func(ctx context.Context) (err error) {
			st, err = qc.Stats(ctx, &coordv1.StatsRequest{Queue: q})
			return
		}) == nil && st.GetReady()+st.GetDelayed()+st.GetInFlight() > maxBacklog {
			w.t.event("producer held back")
			w.sleep(50 * time.Millisecond)
			return
		}
	}
	for n := 1 + w.rng.IntN(5); n > 0 && !w.done(); n-- {
		payload := make([]byte, 16+w.rng.IntN(240))
		for i := range payload {
			payload[i] = byte(w.rng.IntN(256))
		}
		req := &coordv1.EnqueueRequest{Queue: q, Payload: payload, MaxAttempts: int32(1 + w.rng.IntN(3))}
		op := "Enqueue"
		switch r := w.rng.Float64(); {
		case r < 0.3:
			req.Delay, op = dpb(w.between(time.Millisecond, maxDelay)), "Enqueue(delay)"
		case r < 0.4:
			req.DeliverTime, op = timestamppb.New(time.Now().Add(w.between(0, 900*time.Millisecond))), "Enqueue(deliver_time)"
		}
		if w.chance(0.2) {
			req.DedupId, op = w.pick(w.l.dedupIDs), op+"(dedup)"
		}
		var resp *coordv1.EnqueueResponse
		if w.call(op, 0, func(ctx context.Context) (err error) { resp, err = qc.Enqueue(ctx, req); return }) == nil {
			if resp.GetDuplicate() {
				w.t.event("enqueue: duplicate")
			}
			w.l.book.enqueue(resp.GetMessageId())
		}
	}
	w.sleep(w.between(0, 20*time.Millisecond))
}

// consume claims messages (with or without wait) and acks, nacks (with or
// without delay), extends then acks, acks twice, or abandons each; or looks
// at the queue's Stats, or redrives its dead letters.
func (w *worker) consume() {
	qc := coordv1.NewQueueServiceClient(w.conn)
	q := w.pick(w.l.queues)
	switch r := w.rng.Float64(); {
	case r < 0.05:
		_ = w.call("Stats", 0, func(ctx context.Context) error {
			_, err := qc.Stats(ctx, &coordv1.StatsRequest{Queue: q})
			return err
		})
		return
	case r < 0.08:
		_ = w.call("Redrive", 0, func(ctx context.Context) error {
			_, err := qc.Redrive(ctx, &coordv1.RedriveRequest{Queue: q, MaxMessages: int32(1 + w.rng.IntN(50))})
			return err
		})
		return
	}
	vis := w.between(300*time.Millisecond, maxVisibility)
	req := &coordv1.ClaimRequest{Queue: q, MaxMessages: int32(1 + w.rng.IntN(10)), VisibilityTimeout: dpb(vis)}
	op, wait := "Claim", time.Duration(0)
	if w.chance(0.5) {
		op, wait = "Claim(wait)", w.between(10*time.Millisecond, maxWait)
		req.Wait = dpb(wait)
	}
	var c *coordv1.ClaimResponse
	if w.call(op, wait, func(ctx context.Context) (err error) { c, err = qc.Claim(ctx, req); return }) != nil {
		return
	}
	for _, m := range c.GetMessages() {
		if w.done() {
			return
		}
		switch r := w.rng.Float64(); {
		case r < 0.55:
			w.ack(qc, q, m, "Ack")
		case r < 0.70:
			nreq := &coordv1.NackRequest{Queue: q, Receipt: m.GetReceipt()}
			op := "Nack"
			if w.chance(0.5) {
				nreq.Delay, op = durationpb.New(w.between(0, 500*time.Millisecond)), "Nack(delay)"
			}
			var n *coordv1.NackResponse
			if w.call(op, 0, func(ctx context.Context) (err error) { n, err = qc.Nack(ctx, nreq); return }, "RECEIPT_EXPIRED") == nil && n.GetDeadLettered() {
				w.t.event("nack: dead-lettered")
			}
		case r < 0.80:
			_ = w.call("Extend", 0, func(ctx context.Context) error {
				_, err := qc.Extend(ctx, &coordv1.ExtendRequest{Queue: q, Receipt: m.GetReceipt(), VisibilityTimeout: dpb(w.between(300*time.Millisecond, maxVisibility))})
				return err
			}, "RECEIPT_EXPIRED")
			w.ack(qc, q, m, "Ack")
		case r < 0.83:
			w.ack(qc, q, m, "Ack")
			w.ack(qc, q, m, "Ack(again)")
		default:
			w.t.event("claim abandoned")
		}
	}
}

// ack acks m and books the outcome.
func (w *worker) ack(qc coordv1.QueueServiceClient, q string, m *coordv1.Message, op string) {
	var a *coordv1.AckResponse
	err := w.call(op, 0, func(ctx context.Context) (err error) {
		a, err = qc.Ack(ctx, &coordv1.AckRequest{Queue: q, Receipt: m.GetReceipt()})
		return
	}, "RECEIPT_EXPIRED")
	if err == nil && !a.GetAcked() {
		w.t.unexpected(fmt.Sprintf("%s of message %s answered OK with acked=false", op, m.GetMessageId()))
		return
	}
	w.l.book.ack(m.GetMessageId(), err)
}
