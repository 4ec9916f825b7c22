package failover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/daemontest"
)

const (
	restartSessionTTL = 5 * time.Second
	restartClients    = 6
	heartbeatEvery    = time.Second
	// lateMargin: the late session is resumed this long before its TTL runs
	// out, by the expire_time of its last heartbeat.
	lateMargin = 1500 * time.Millisecond
	// retryTries bounds how many times a load client tries one call,
	// alternating between the instances.
	retryTries = 4
)

// heartbeat is one KeepAlive stream and the goroutine that keeps it going: a
// request every heartbeatEvery, and its response read.
type heartbeat struct {
	stream coordv1.SessionService_KeepAliveClient
	cancel context.CancelFunc
	expire atomic.Int64  // unix µs: expire_time of the last response
	broken chan error    // the first error (the stream broke), if any
	stop   chan struct{} // closed to stop the goroutine
	done   chan struct{} // closed when it has returned
}

// startHeartbeat opens a KeepAlive stream on on, for the session id (""
// creates one), reads its first response and starts the heartbeats. It
// returns the first response.
func startHeartbeat(ctx context.Context, on clients, id string) (*heartbeat, *coordv1.KeepAliveResponse, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := on.sessions.KeepAlive(sctx)
	if err == nil {
		err = stream.Send(&coordv1.KeepAliveRequest{SessionId: id, Ttl: durationpb.New(restartSessionTTL)})
	}
	var first *coordv1.KeepAliveResponse
	if err == nil {
		first, err = stream.Recv()
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	h := &heartbeat{stream: stream, cancel: cancel, broken: make(chan error, 1), stop: make(chan struct{}), done: make(chan struct{})}
	h.expire.Store(first.GetExpireTime().AsTime().UnixMicro())
	go h.run()
	return h, first, nil
}

func (h *heartbeat) run() {
	defer close(h.done)
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
		err := h.stream.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(restartSessionTTL)})
		var resp *coordv1.KeepAliveResponse
		if err == nil {
			resp, err = h.stream.Recv()
		} else if errors.Is(err, io.EOF) {
			_, err = h.stream.Recv() // the stream's real error
		}
		if err == nil && (resp.GetExpired() || len(resp.GetLostLocks()) > 0) {
			err = fmt.Errorf("heartbeat answered %v: the session expired or lost a lock", resp)
		}
		if err != nil {
			h.broken <- err
			return
		}
		h.expire.Store(resp.GetExpireTime().AsTime().UnixMicro())
	}
}

// halt stops the heartbeats, leaving the stream open.
func (h *heartbeat) halt() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	<-h.done
}

// expireTime is the expire_time of the last heartbeat answered.
func (h *heartbeat) expireTime() time.Time { return time.UnixMicro(h.expire.Load()) }

// keptSession is a session opened on A with a lock bound to it.
type keptSession struct {
	id, lock, owner string
	fence           uint64
	hb              *heartbeat
}

// TestCoorddRestart runs two coordd processes, A and B, on a private Redis
// Cluster, and load clients that know both (on UNAVAILABLE or
// DEADLINE_EXCEEDED they retry the same call on the other instance) running
// Allow, Lock/Release and Enqueue (with a dedup_id, so that a retry is
// idempotent). Three sessions are opened on A (ttl 5s), each with a lock
// bound to it. A is killed with SIGKILL. Then:
//   - the first session's client resumes it on B with the same session_id
//     at once, the second 1.5s before its TTL runs out (by the expire_time
//     of its last heartbeat); until then no other client can take its lock;
//     both still hold their locks with the same fences, as GetLock on B
//     shows;
//   - the third is not resumed: its lock is free once its TTL has run out,
//     and another client gets it with a greater fence;
//   - every load client recovers on B;
//   - A is started again, on the same ports, and serves: it sees the
//     sessions' locks, binds another lock to a session whose stream is on
//     B, and answers the load's RPCs.
//
// At the end the resumed sessions are closed (half-close on B), which
// releases their locks at once.
func TestCoorddRestart(t *testing.T) {
	// Built first, so that the timings below do not include it.
	if _, took, err := daemontest.Build(); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("coordd built (race %v) in %v", daemontest.Race, ms(took))
	}
	c := startCluster(t)
	env := "COORDD_REDIS_KEY_PREFIX=restart"
	a := startDaemon(t, "A", c.Addrs(), env)
	b := startDaemon(t, "B", c.Addrs(), env)
	connA, connB := dial(t, a.GRPCAddr), dial(t, b.GRPCAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := &restartRun{t: t, ctx: ctx, ends: [2]clients{newClients(connA), newClients(connB)}, names: [2]string{"A", "B"}}
	defer func() {
		for _, h := range r.heartbeats {
			h.halt()
			h.cancel()
		}
	}()

	r.openSessions()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	for k := range r.stats {
		wg.Go(func() { r.loadClient(loadCtx, k) })
	}

	time.Sleep(1500 * time.Millisecond)
	r.killA(a)
	r.resume(0)
	r.resumeLate(1)
	r.abandoned(2)

	// A again, on the same ports: the clients' addresses are still good.
	restarted := time.Now()
	a2 := a.Restart(t, "A (restarted)")
	serving := time.Now()
	extra := r.restartedServes(connA, a2.GRPCAddr, restarted, serving)

	stopLoad()
	wg.Wait()
	r.closeResumed(extra)
	r.reportRecovery(serving.Sub(restarted))
}

// restartRun is TestCoorddRestart's state, shared by its phases.
type restartRun struct {
	t     *testing.T
	ctx   context.Context
	ends  [2]clients // A, B
	names [2]string

	// The sessions on A, each with a lock bound to it: [0] resumed at once,
	// [1] resumed late, [2] abandoned.
	sessions   []*keptSession
	heartbeats []*heartbeat // every stream, to stop at the end

	// The load: every client starts on A and retries a call on the other
	// instance after an error that says it could not be served.
	errs     codeCounts
	killedAt atomic.Int64 // unix µs, 0 before the kill
	killed   time.Time
	stats    [restartClients]clientStats

	resumed [2]time.Duration // after the kill
	left    [2]time.Duration // of its TTL, when resumed
	freed   time.Time        // when the abandoned session's lock was free
}

// clientStats are one load client's counts.
type clientStats struct {
	served          [2]int
	retriedOK       int // calls that succeeded after an error, on the other instance
	gaveUp          int // calls that failed retryTries times
	errsAfterKill   int
	firstErr        time.Time // its first error after the kill
	firstOKAfterErr time.Time // its first success after that
}

// openSessions opens the three sessions on A, each with a lock bound to it.
func (r *restartRun) openSessions() {
	t, ctx, ends := r.t, r.ctx, r.ends
	t.Helper()
	r.sessions = make([]*keptSession, 3)
	for i := range r.sessions {
		hb, first, err := startHeartbeat(ctx, ends[0], "")
		if err != nil || first.GetSessionId() == "" {
			t.Fatalf("KeepAlive on A = %v, %v; want a new session", first, err)
		}
		r.heartbeats = append(r.heartbeats, hb)
		s := &keptSession{id: first.GetSessionId(), lock: "restart-session-lock-" + strconv.Itoa(i), owner: "session-owner-" + strconv.Itoa(i), hb: hb}
		g, err := ends[0].locks.Lock(ctx, &coordv1.LockRequest{Name: s.lock, SessionId: s.id, Owner: s.owner})
		if err != nil || !g.GetAcquired() {
			t.Fatalf("Lock(%s, session %s) on A = %v, %v; want acquired", s.lock, s.id, g, err)
		}
		s.fence = g.GetFence()
		r.sessions[i] = s
	}
}

// wantHeld checks that s's lock is held by its session, with its fence.
func (r *restartRun) wantHeld(s *keptSession, on clients, where string) {
	r.t.Helper()
	info, err := on.locks.GetLock(r.ctx, &coordv1.GetLockRequest{Name: s.lock})
	if err != nil || !info.GetHeld() || info.GetFence() != s.fence || !info.GetSessionBound() || info.GetOwner() != s.owner {
		r.t.Errorf("GetLock(%s) on %s = %v, %v; want held by session %s with fence %d", s.lock, where, info, err, s.id, s.fence)
	}
}

// wantNotTaken: while its session has no stream, another client cannot
// take the lock.
func (r *restartRun) wantNotTaken(s *keptSession, when string) {
	r.t.Helper()
	g, err := r.ends[1].locks.Lock(r.ctx, &coordv1.LockRequest{Name: s.lock, Ttl: durationpb.New(time.Minute), Owner: "contender"})
	if err != nil || g.GetAcquired() || g.GetHolder() != s.owner {
		r.t.Errorf("a contender's Lock(%s) on B %s = %v, %v; want not acquired, held by %s", s.lock, when, g, err, s.owner)
	}
}

// loadClient is load client k until loadCtx ends: Allow, Lock/Release and
// Enqueue in turn, each call retried on the other instance after
// UNAVAILABLE or DEADLINE_EXCEEDED.
func (r *restartRun) loadClient(loadCtx context.Context, k int) {
	st := &r.stats[k]
	cur := 0
	// call runs f until it succeeds, switching instance after
	// UNAVAILABLE or DEADLINE_EXCEEDED, at most retryTries times.
	call := func(rpc string, f func(ctx context.Context, on clients) error) bool {
		for try := range retryTries {
			cctx, cancelCall := context.WithTimeout(loadCtx, 5*time.Second)
			err := f(cctx, r.ends[cur])
			cancelCall()
			if loadCtx.Err() != nil {
				return false
			}
			now := time.Now()
			if err == nil {
				st.served[cur]++
				if try > 0 {
					st.retriedOK++
				}
				if !st.firstErr.IsZero() && st.firstOKAfterErr.IsZero() {
					st.firstOKAfterErr = now
				}
				return true
			}
			r.errs.add(rpc+"@"+r.names[cur], err)
			if r.killedAt.Load() != 0 {
				st.errsAfterKill++
				if st.firstErr.IsZero() {
					st.firstErr = now
				}
			}
			if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
				return false
			}
			cur = 1 - cur
		}
		st.gaveUp++
		return false
	}
	limit := &coordv1.Limit{Algorithm: coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 1_000_000, Period: durationpb.New(time.Second)}
	name := "restart-load-" + strconv.Itoa(k)
	for op := 0; loadCtx.Err() == nil; op++ {
		switch op % 3 {
		case 0:
			call("Allow", func(ctx context.Context, on clients) error {
				_, err := on.limits.Allow(ctx, &coordv1.AllowRequest{Key: name, Limit: limit})
				return err
			})
		case 1:
			// A Lock retried after UNAVAILABLE may find its own
			// uncertain grant still there: it waits for its lease.
			var token string
			call("Lock", func(ctx context.Context, on clients) error {
				g, err := on.locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(2 * time.Second), Wait: durationpb.New(3 * time.Second)})
				token = g.GetToken()
				return err
			})
			if token != "" {
				call("Release", func(ctx context.Context, on clients) error {
					_, err := on.locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: token})
					return err
				})
			}
		case 2:
			dedup := name + "-" + strconv.Itoa(op)
			call("Enqueue", func(ctx context.Context, on clients) error {
				_, err := on.queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "restart-queue", Payload: []byte(dedup), DedupId: dedup})
				return err
			})
		}
	}
}

// killA kills A with SIGKILL and checks that every session's stream
// breaks, and that no contender gets the locks of the sessions to resume.
func (r *restartRun) killA(a *daemontest.Daemon) {
	t := r.t
	t.Helper()
	r.killed = time.Now()
	r.killedAt.Store(r.killed.UnixMicro())
	a.Kill(t)
	t.Logf("coordd A killed (SIGKILL) with %d sessions, each holding a lock", len(r.sessions))

	// Every session's stream breaks.
	for i, s := range r.sessions {
		select {
		case err := <-s.hb.broken:
			t.Logf("session %d: its stream on A broke %v after the kill (%v); its TTL runs out %v after the kill",
				i, ms(time.Since(r.killed)), status.Code(err), ms(s.hb.expireTime().Sub(r.killed)))
		case <-time.After(restartSessionTTL):
			t.Fatalf("session %d: its KeepAlive stream on A did not break within %v of A's death", i, restartSessionTTL)
		}
		s.hb.halt()
	}
	for _, s := range r.sessions[1:] {
		r.wantNotTaken(s, "after A's death")
	}
}

// resume resumes session i on B, with its ID, and checks that it still
// holds its lock.
func (r *restartRun) resume(i int) {
	t := r.t
	t.Helper()
	s := r.sessions[i]
	expire := s.hb.expireTime()
	hb, resp, err := startHeartbeat(r.ctx, r.ends[1], s.id)
	at := time.Now()
	if err != nil || resp.GetSessionId() != s.id || resp.GetExpired() || len(resp.GetLostLocks()) > 0 || resp.GetTtl().AsDuration() <= 0 {
		t.Fatalf("resuming session %d (%s) on B %v after A's death, %v before its TTL ran out = %v, %v; want it alive, with no lost lock",
			i, s.id, ms(at.Sub(r.killed)), ms(expire.Sub(at)), resp, err)
	}
	r.heartbeats = append(r.heartbeats, hb)
	s.hb = hb
	r.resumed[i], r.left[i] = at.Sub(r.killed), expire.Sub(at)
	t.Logf("session %d resumed on B %v after the kill, %v before its TTL would have run out", i, ms(r.resumed[i]), ms(r.left[i]))
	r.wantHeld(s, r.ends[1], "B")
}

// resumeLate resumes session i lateMargin before its TTL runs out; until
// then no other client can take its lock.
func (r *restartRun) resumeLate(i int) {
	r.t.Helper()
	s := r.sessions[i]
	time.Sleep(time.Until(s.hb.expireTime().Add(-lateMargin - time.Second)))
	r.wantNotTaken(s, "shortly before its session is resumed")
	time.Sleep(time.Until(s.hb.expireTime().Add(-lateMargin)))
	r.resume(i)
}

// abandoned: session i's lock is freed once its TTL has run out, and
// someone else gets it, with a greater fence; the resumed sessions keep
// theirs.
func (r *restartRun) abandoned(i int) {
	t, ctx, ends := r.t, r.ctx, r.ends
	t.Helper()
	s2 := r.sessions[i]
	for end := s2.hb.expireTime().Add(5 * time.Second); ; {
		info, err := ends[1].locks.GetLock(ctx, &coordv1.GetLockRequest{Name: s2.lock})
		if err == nil && !info.GetHeld() {
			r.freed = time.Now()
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the lock %s of the abandoned session is still held 5s after its TTL ran out: %v, %v", s2.lock, info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.freed.Before(s2.hb.expireTime()) {
		t.Errorf("the lock %s of the abandoned session was freed at %s, before its session's TTL ran out at %s",
			s2.lock, r.freed.Format("15:04:05.000"), s2.hb.expireTime().Format("15:04:05.000"))
	}
	if g, err := ends[1].locks.Lock(ctx, &coordv1.LockRequest{Name: s2.lock, Ttl: durationpb.New(time.Minute), Owner: "successor"}); err != nil || !g.GetAcquired() || g.GetFence() <= s2.fence {
		t.Errorf("Lock(%s) on B after its session expired = %v, %v; want acquired with a fence above %d", s2.lock, g, err, s2.fence)
	}
	t.Logf("the abandoned session's lock was free %v after its TTL ran out", ms(r.freed.Sub(s2.hb.expireTime())))
	for _, s := range r.sessions[:2] {
		r.wantHeld(s, ends[1], "B, after the abandoned session expired")
	}
}

// restartedServes checks that the restarted A answers the clients'
// connection, sees the sessions' locks, binds another lock to a session
// whose stream is on B (it returns that lock's name), and serves the load's
// RPCs.
func (r *restartRun) restartedServes(connA *grpc.ClientConn, addr string, restarted, serving time.Time) (extra string) {
	t, ctx, ends, sessions := r.t, r.ctx, r.ends, r.sessions
	t.Helper()
	connA.ResetConnectBackoff()
	var again time.Time
	for end := time.Now().Add(10 * time.Second); ; {
		cctx, cancelCall := context.WithTimeout(ctx, time.Second)
		_, err := ends[0].locks.GetLock(cctx, &coordv1.GetLockRequest{Name: sessions[0].lock})
		cancelCall()
		if err == nil {
			again = time.Now()
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the clients' connection to A does not serve 10s after A's restart: %v", err)
		}
		connA.ResetConnectBackoff()
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("coordd A restarted at %s: serving %v after its start, answering the clients' connection %v after that",
		addr, ms(serving.Sub(restarted)), ms(again.Sub(serving)))
	for _, s := range sessions[:2] {
		r.wantHeld(s, ends[0], "A (restarted)")
	}
	// A binds a lock to a session whose stream is on B; and serves the
	// load's RPCs.
	extra = sessions[0].lock + "-2"
	g2, err := ends[0].locks.Lock(ctx, &coordv1.LockRequest{Name: extra, SessionId: sessions[0].id, Owner: sessions[0].owner})
	if err != nil || !g2.GetAcquired() || g2.GetFence() == 0 {
		t.Errorf("Lock(%s, session %s) on the restarted A = %v, %v; want acquired", extra, sessions[0].id, g2, err)
	}
	if resp, err := ends[0].limits.Allow(ctx, &coordv1.AllowRequest{Key: "restart-after",
		Limit: &coordv1.Limit{Algorithm: coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 10, Period: durationpb.New(time.Minute)}}); err != nil || !resp.GetAllowed() {
		t.Errorf("Allow on the restarted A = %v, %v; want allowed", resp, err)
	}
	if resp, err := ends[0].queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: "restart-after", Payload: []byte("x")}); err != nil || resp.GetMessageId() == "" {
		t.Errorf("Enqueue on the restarted A = %v, %v; want a message", resp, err)
	}
	if resp, err := ends[0].queues.Claim(ctx, &coordv1.ClaimRequest{Queue: "restart-after", Wait: durationpb.New(time.Second)}); err != nil || len(resp.GetMessages()) != 1 {
		t.Errorf("Claim on the restarted A = %v, %v; want the message", resp, err)
	}
	return extra
}

// closeResumed: the resumed sessions' streams on B never broke; a
// half-close ends each session and releases its locks (extra included) at
// once.
func (r *restartRun) closeResumed(extra string) {
	t, ctx, ends, sessions := r.t, r.ctx, r.ends, r.sessions
	t.Helper()
	for i, s := range sessions[:2] {
		s.hb.halt()
		select {
		case err := <-s.hb.broken:
			t.Errorf("session %d: its resumed KeepAlive stream on B broke: %v", i, err)
			continue
		default:
		}
		if err := s.hb.stream.CloseSend(); err != nil {
			t.Fatalf("CloseSend on B: %v", err)
		}
		for {
			if _, err := s.hb.stream.Recv(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Errorf("session %d: KeepAlive Recv on B after CloseSend: %v, want io.EOF", i, err)
				}
				break
			}
		}
	}
	for _, name := range []string{sessions[0].lock, extra, sessions[1].lock} {
		if info, err := ends[0].locks.GetLock(ctx, &coordv1.GetLockRequest{Name: name}); err != nil || info.GetHeld() {
			t.Errorf("GetLock(%s) on A after its session's half-close on B = %v, %v; want free", name, info, err)
		}
	}
}

// reportRecovery reports the run: per client, from its first error after
// the kill to its first success after that; every client recovered, B
// served, no call failed on both instances, and no unexpected code.
func (r *restartRun) reportRecovery(restartServing time.Duration) {
	t := r.t
	t.Helper()
	var worst time.Duration
	var errsAfterKill, servedA, servedB, retriedOK, gaveUp, recovered int
	for k, st := range r.stats {
		errsAfterKill += st.errsAfterKill
		servedA += st.served[0]
		servedB += st.served[1]
		retriedOK += st.retriedOK
		gaveUp += st.gaveUp
		if st.firstErr.IsZero() {
			continue // never failed: it was between calls at the kill
		}
		if st.firstOKAfterErr.IsZero() {
			t.Errorf("client %d never succeeded again after its first error following the kill", k)
			continue
		}
		recovered++
		worst = max(worst, st.firstOKAfterErr.Sub(r.killed))
	}
	s2 := r.sessions[2]
	t.Logf("load: %d calls served by A, %d by B; %d succeeded on the other instance after an error, %d failed %d times; errors: %v",
		servedA, servedB, retriedOK, gaveUp, retryTries, &r.errs)
	report(t, "A SIGKILLed with 3 sessions (ttl %v); resumed on B with their IDs %v and %v after the kill (%v and %v before their TTL ran out), "+
		"locks kept with the same fences, no contender got them; the abandoned session's lock freed %v after its TTL; "+
		"load: %d clients, %d errors after the kill, %d calls retried OK on the other instance, %d given up, all recovered within %v of the kill (%d had an error); "+
		"restarted A serving %v after its start",
		restartSessionTTL, ms(r.resumed[0]), ms(r.resumed[1]), ms(r.left[0]), ms(r.left[1]), ms(r.freed.Sub(s2.hb.expireTime())),
		restartClients, errsAfterKill, retriedOK, gaveUp, ms(worst), recovered, ms(restartServing))
	if servedB == 0 {
		t.Errorf("no load call served by B")
	}
	if gaveUp > 0 {
		t.Errorf("%d load calls failed on both instances %d times", gaveUp, retryTries)
	}
	checkCodes(t, &r.errs)
}
