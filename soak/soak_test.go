package soak

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/store"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *profilesFlag != "" {
		runtime.MemProfileRate = 1 // every allocation, for an exact diff
	}
	goleak.VerifyTestMain(m)
}

var (
	durationFlag = flag.Duration("soak.duration", 60*time.Second,
		"how long the load runs (the default is what CI runs; keep CI at 3 minutes or less, ask for longer by hand)")
	backendFlag = flag.String("soak.backend", "memory",
		"store: memory (in process), redis (the shared standalone Redis) or cluster (the shared Redis Cluster)")
	quietFlag = flag.Duration("soak.quiet", defaultQuiet, "quiet period after the load, for every TTL to run out")
	connsFlag = flag.Int("soak.conns", 4, "stable client connections the workers share")
	scaleFlag = flag.Int("soak.scale", 1, "workers of each kind, times this")
	warmFlag  = flag.Duration("soak.warmup", 3*time.Second,
		"a burst of the same load before the baseline, so that what grows to a working size and stays (HPACK tables, map capacities, caches, metric series) is in it")
	profilesFlag = flag.String("soak.profiles", "",
		"directory to write heap and goroutine profiles to, at the baseline and after (compare with go tool pprof -base)")
)

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// TestSoak is the soak test; see the package documentation.
func TestSoak(t *testing.T) {
	load, warm := *durationFlag, *warmFlag
	if testing.Short() && !flagSet("soak.duration") {
		load = 5 * time.Second
	}
	if testing.Short() && !flagSet("soak.warmup") {
		warm = time.Second
	}
	r := &soakRun{start: time.Now(), warm: warm}
	r.e = newEnv(t, *backendFlag, *connsFlag)

	r.warmUp(t)
	r.runLoad(load)
	r.collect(t)
	r.awaitGrace(t)
	r.measure(t)
	r.report(t)
	r.check(t)

	// Clients and server down: nothing may be left running.
	r.e.shutdown()
	goleak.VerifyNone(t)
	t.Logf("total runtime %v", time.Since(r.start).Round(time.Millisecond))
}

// soakRun is one TestSoak: its environment, and what each phase measured
// for the report and the checks.
type soakRun struct {
	e     *env
	start time.Time
	warm  time.Duration // the length of the warm-up burst

	// warmUp: the burst's load and its drain's tally, and the baseline.
	wl                      *load
	wdt                     *tally
	warmTook                time.Duration
	lenBefore               int // the memory store's Len()
	before                  snapshot
	poolBefore              uint64
	connsBefore, pipeBefore uint32

	// runLoad: the load, and the tally of the warm-up burst, the drain and
	// the checks.
	l                   *load
	dt                  *tally
	loadTook, drainTook time.Duration

	// collect: what verify found, and the load's tally.
	serverSessions, clientSessions int
	v                              verified
	total                          *tally
	rtts, thinks                   []time.Duration
	chaosConns                     int64
	workers                        int

	// awaitGrace: the heap with the sessions within their grace.
	graceHeap snapshot
	graceWait time.Duration

	// measure
	after                 snapshot
	extra                 string // the goroutines over the baseline
	poolAfter             uint64
	connsAfter, pipeAfter uint32
	logs                  string
	logErrors             int
	logErrorLines         []string
	active, panics        float64
}

// warmUp: every RPC once on every stable connection, and a connection
// dialed and closed, so that what the first calls allocate for good
// (gRPC's and protobuf's lazy state, metric series, pools) is in the
// baseline; then a short burst of the load itself, drained, and a pause
// for its leases to run out. Then the baseline.
func (r *soakRun) warmUp(t *testing.T) {
	e := r.e
	warmUp(t, e)
	r.wl = newLoad(e)
	r.wl.runFor(r.warm, *scaleFlag)
	r.wdt = newTally()
	drainQueues(r.wl, r.wdt)
	time.Sleep(maxLockTTL + maxProcessing/2)
	r.warmTook = time.Since(r.start)
	if e.mem != nil {
		r.lenBefore = e.mem.Len()
	}
	r.before = snap()
	r.poolBefore, r.connsBefore, r.pipeBefore = e.redisPoolBytes()
	writeProfiles(t, "before")
}

// runLoad: the load; then every message acked, dead letters redriven
// first; then the quiet period.
func (r *soakRun) runLoad(d time.Duration) {
	r.l = newLoad(r.e)
	t0 := time.Now()
	r.l.runFor(d, *scaleFlag)
	r.loadTook = time.Since(t0)

	t0 = time.Now()
	r.dt = newTally()
	drainQueues(r.l, r.dt)
	r.drainTook = time.Since(t0)

	time.Sleep(*quietFlag)
}

// collect checks what must be gone (verify), then drops the test's own
// bookkeeping before the heap is measured.
func (r *soakRun) collect(t *testing.T) {
	e, l, wl, dt := r.e, r.l, r.wl, r.dt
	// The sessions to probe are those of the warm-up, of the load, and
	// those the server answered for.
	for _, wt := range wl.tallies {
		dt.merge(wt)
	}
	dt.merge(wl.ctl)
	dt.merge(r.wdt)
	e.mu.Lock()
	r.serverSessions = len(e.sessions)
	maps.Copy(l.sessions, wl.sessions)
	r.clientSessions = len(l.sessions)
	maps.Copy(l.sessions, e.sessions)
	e.sessions = nil
	e.mu.Unlock()
	r.v = verify(t, l, dt)

	r.total = newTally()
	for _, w := range l.tallies {
		r.total.merge(w)
	}
	r.total.merge(l.ctl)
	r.rtts, r.thinks = l.rtts, l.thinks
	r.chaosConns = l.chaosConns.Load()
	r.workers = len(l.tallies)
	l.tallies, l.book, l.sessions, l.rtts, l.thinks = nil, queueBook{}, nil, nil, nil
}

// awaitGrace: the expired sessions the probe found within their grace are
// kept on purpose (store.SessionGrace, a minute). On the memory store they
// are in this heap: few bytes, but their records were allocated all through
// the load among its garbage, and each keeps a span in use, so the heap is
// compared with the baseline once the store has forgotten them, as it must
// have by the end of the last one's grace.
func (r *soakRun) awaitGrace(t *testing.T) {
	e, v := r.e, r.v
	if e.mem == nil || v.lenFinal == 0 || len(v.graceEnds) == 0 {
		return
	}
	r.graceHeap = snap()
	t0 := time.Now()
	// The sweep forgets a session within a round or two of its grace's end.
	end := slices.MaxFunc(v.graceEnds, time.Time.Compare).Add(10 * sweepInterval)
	for e.mem.Len() > 0 && time.Now().Before(end) {
		time.Sleep(sweepInterval)
	}
	r.graceWait = time.Since(t0)
	if n := e.mem.Len(); n > 0 {
		t.Errorf("memory store: Len() is %d %v after the end of the last grace of the sessions the probe found; it holds:\n%s",
			n, time.Since(end.Add(-10*sweepInterval)).Round(time.Millisecond), memDump(e.mem))
	}
}

// measure: the heap and goroutines against the baseline, the pools, the
// server's log and metrics.
func (r *soakRun) measure(t *testing.T) {
	e := r.e
	r.after, r.extra = settle(r.before)
	r.poolAfter, r.connsAfter, r.pipeAfter = e.redisPoolBytes()
	writeProfiles(t, "after")
	r.logs, r.logErrors, r.logErrorLines = e.logs.summary()
	r.active, _ = e.gauge("coordd_session_streams")
	r.panics, _ = e.gauge("coordd_panics_total")
}

// pool is what the buffers of the connections the go-redis pools opened
// since the baseline, and keep open, take.
func (r *soakRun) pool() uint64 {
	if r.poolAfter > r.poolBefore {
		return r.poolAfter - r.poolBefore
	}
	return 0
}

// slack is the growth allowed over b: 10 % or 1 MiB, whichever is more,
// plus, on Redis, the pools' new connections.
func (r *soakRun) slack(b uint64) uint64 { return max(b/10, 1<<20) + r.pool() }

func (r *soakRun) report(t *testing.T) {
	e, l, v, total, dt, before, after := r.e, r.l, r.v, r.total, r.dt, r.before, r.after
	secs := r.loadTook.Seconds()
	t.Logf("soak on %s: warm-up %v (a %v burst), load %v, drain %v, quiet %v, total so far %v; %d stable connections, %d workers, %d connections closed under the clients",
		e.backend, r.warmTook.Round(time.Millisecond), r.warm, r.loadTook.Round(time.Millisecond), r.drainTook.Round(time.Millisecond), *quietFlag,
		time.Since(r.start).Round(time.Millisecond), len(e.stable), r.workers, r.chaosConns)
	t.Logf("ops: %d calls, %.0f/s; by type:\n%s", total.total(), float64(total.total())/secs, table(total.ops))
	t.Logf("non-OK outcomes by code/reason (CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE only where the test disrupted the call):\n%s", table(total.outcomes))
	t.Logf("non-OK outcomes by op:\n%s", table(total.byOp))
	t.Logf("events:\n%s", table(total.events))
	t.Logf("adaptive pause: GetLock latency p50 %v p99 %v max %v, target %v; pause mean %v max %v (%d samples)",
		pct(r.rtts, 50), pct(r.rtts, 99), pct(r.rtts, 100), l.target, mean(r.thinks), pct(r.thinks, 100), len(r.rtts))
	t.Logf("server log lines at warn and above:%s", r.logs)
	t.Logf("warm-up burst, drain and checks: ops\n%s\n  non-OK:\n%s", table(dt.ops), table(dt.outcomes))
	t.Logf("queues: %d messages enqueued, %d acked, %d acks of unknown outcome", v.enqueued, v.acked, v.maybeAcked)
	t.Logf("sessions: %d IDs resumed after the quiet period (clients learned %d, the server answered for %d): %d not found, %d expired within store.SessionGrace (with %d lost locks)",
		v.sessions, r.clientSessions, r.serverSessions, v.notFound, v.inGrace, v.graceLocks)
	if e.mem != nil {
		t.Logf("memory store: Len() %d at the baseline (the warm-up's sessions within their grace), %d after the quiet period (the sessions within their grace and their locks), %d after the session probe, 0 after a further %v (the end of their grace)",
			r.lenBefore, v.lenQuiet, v.lenFinal, r.graceWait.Round(time.Millisecond))
		if r.graceHeap.heapInuse > 0 {
			t.Logf("heap with those %d sessions within their grace: HeapAlloc %s (%+.1f%%), HeapInuse %s (%+.1f%%)", v.lenFinal,
				mib(r.graceHeap.heapAlloc), pctChange(before.heapAlloc, r.graceHeap.heapAlloc),
				mib(r.graceHeap.heapInuse), pctChange(before.heapInuse, r.graceHeap.heapInuse))
		}
	} else {
		t.Logf("redis: keys left: %v", v.redisKeys)
	}
	allowed := "+max(10%, 1 MiB)"
	if e.rdb != nil {
		allowed += fmt.Sprintf(" + %s for the Redis pools' new connections (%d -> %d regular, %d -> %d pipeline)",
			mib(r.pool()), r.connsBefore, r.connsAfter, r.pipeBefore, r.pipeAfter)
	}
	t.Logf("heap: HeapAlloc %s -> %s (%+.1f%%), HeapInuse %s -> %s (%+.1f%%); allowed: %s",
		mib(before.heapAlloc), mib(after.heapAlloc), pctChange(before.heapAlloc, after.heapAlloc),
		mib(before.heapInuse), mib(after.heapInuse), pctChange(before.heapInuse, after.heapInuse), allowed)
	t.Logf("goroutines: %d -> %d", before.goroutines, after.goroutines)
}

// check: the assertions.
func (r *soakRun) check(t *testing.T) {
	total, dt, before, after := r.total, r.dt, r.before, r.after
	for _, c := range []string{codes.Internal.String(), codes.Unknown.String()} {
		for k, n := range total.outcomes {
			if strings.HasPrefix(k, c) {
				t.Errorf("%d calls ended %s", n, k)
			}
		}
	}
	if total.nbad > 0 {
		t.Errorf("%d unexpected outcomes in the load; the first:\n  %s", total.nbad, strings.Join(total.bad, "\n  "))
	}
	if dt.nbad > 0 {
		t.Errorf("%d failures in the warm-up burst, the drain or the checks after the quiet period:\n  %s", dt.nbad, strings.Join(dt.bad, "\n  "))
	}
	if r.logErrors > 0 {
		t.Errorf("the server logged %d errors; the first:\n  %s", r.logErrors, strings.Join(r.logErrorLines, "\n  "))
	}
	if r.panics != 0 {
		t.Errorf("coordd_panics_total is %v", r.panics)
	}
	if r.active != 0 {
		t.Errorf("coordd_session_streams is %v with every stream ended", r.active)
	}
	if after.heapAlloc > before.heapAlloc+r.slack(before.heapAlloc) {
		t.Errorf("HeapAlloc grew from %s to %s, more than %s", mib(before.heapAlloc), mib(after.heapAlloc), mib(r.slack(before.heapAlloc)))
	}
	if after.heapInuse > before.heapInuse+r.slack(before.heapInuse) {
		t.Errorf("HeapInuse grew from %s to %s, more than %s", mib(before.heapInuse), mib(after.heapInuse), mib(r.slack(before.heapInuse)))
	}
	if after.goroutines > before.goroutines {
		t.Errorf("%d goroutines after the load and the quiet period, %d before; the extra ones:\n%s", after.goroutines, before.goroutines, r.extra)
	}
}

// warmUp calls every RPC once on every stable connection, dials and closes
// a connection, and leaves nothing in the store that outlives a second.
func warmUp(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(what string, err error) {
		if err != nil {
			t.Fatalf("warm-up: %s: %v", what, err)
		}
	}
	conns := append(slices.Clone(e.stable), e.dial())
	defer conns[len(conns)-1].Close()
	for i, c := range conns {
		lc := coordv1.NewLockServiceClient(c)
		name := "warmup-" + strconv.Itoa(i)
		g, err := lc.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(time.Second)})
		must("Lock", err)
		_, err = lc.Renew(ctx, &coordv1.RenewRequest{Name: name, Token: g.GetToken(), Ttl: durationpb.New(time.Second)})
		must("Renew", err)
		_, err = lc.GetLock(ctx, &coordv1.GetLockRequest{Name: name})
		must("GetLock", err)
		_, err = lc.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: g.GetToken()})
		must("Release", err)
		if _, err = lc.Renew(ctx, &coordv1.RenewRequest{Name: name, Token: g.GetToken(), Ttl: durationpb.New(time.Second)}); err == nil {
			t.Fatal("warm-up: Renew of a released lock succeeded")
		}
		_, _ = outcome(err)

		ks, err := coordv1.NewSessionServiceClient(c).KeepAlive(ctx)
		must("KeepAlive", err)
		must("KeepAlive send", ks.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(time.Second)}))
		r, err := ks.Recv()
		must("KeepAlive recv", err)
		_, err = lc.Lock(ctx, &coordv1.LockRequest{Name: name, SessionId: r.GetSessionId(), Wait: durationpb.New(time.Millisecond)})
		must("Lock(session)", err)
		must("KeepAlive close", ks.CloseSend())
		if _, err := ks.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("warm-up: KeepAlive after CloseSend: %v", err)
		}

		_, err = coordv1.NewRateLimitServiceClient(c).Allow(ctx, &coordv1.AllowRequest{Key: "warmup", Policy: "token"})
		must("Allow", err)

		ic := coordv1.NewIdempotencyServiceClient(c)
		b, err := ic.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: name, Fingerprint: "w", Wait: durationpb.New(time.Millisecond)})
		must("BeginIdempotent", err)
		_, err = ic.ExtendIdempotent(ctx, &coordv1.ExtendIdempotentRequest{Key: name, OwnerToken: b.GetOwnerToken(), ProcessingTtl: durationpb.New(time.Second)})
		must("ExtendIdempotent", err)
		_, err = ic.Finish(ctx, &coordv1.FinishRequest{Key: name, OwnerToken: b.GetOwnerToken(), Failure: &coordv1.Failure{Message: "x", Retryable: true}})
		must("Finish", err)

		qc := coordv1.NewQueueServiceClient(c)
		_, err = qc.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: name, Payload: []byte("x")})
		must("Enqueue", err)
		cl, err := qc.Claim(ctx, &coordv1.ClaimRequest{Queue: name, Wait: durationpb.New(time.Second)})
		must("Claim", err)
		m := cl.GetMessages()[0]
		_, err = qc.Extend(ctx, &coordv1.ExtendRequest{Queue: name, Receipt: m.GetReceipt(), VisibilityTimeout: durationpb.New(time.Second)})
		must("Extend", err)
		_, err = qc.Nack(ctx, &coordv1.NackRequest{Queue: name, Receipt: m.GetReceipt(), Delay: durationpb.New(0)})
		must("Nack", err)
		cl, err = qc.Claim(ctx, &coordv1.ClaimRequest{Queue: name, Wait: durationpb.New(time.Second)})
		must("Claim", err)
		_, err = qc.Ack(ctx, &coordv1.AckRequest{Queue: name, Receipt: cl.GetMessages()[0].GetReceipt()})
		must("Ack", err)
		_, err = qc.Redrive(ctx, &coordv1.RedriveRequest{Queue: name})
		must("Redrive", err)
		_, err = qc.Stats(ctx, &coordv1.StatsRequest{Queue: name})
		must("Stats", err)
	}
}

// drainQueues acks every message left, redriving dead letters, until every
// queue's Stats are zero (delayed messages and abandoned claims come due
// within 2 s).
func drainQueues(l *load, dt *tally) {
	qc := coordv1.NewQueueServiceClient(l.e.stable[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := func(op string, err error) bool { return dt.record(op, err, false, l.redis) }
	for ctx.Err() == nil {
		left := false
		for _, q := range l.queues {
			_, err := qc.Redrive(ctx, &coordv1.RedriveRequest{Queue: q, MaxMessages: 1000})
			rec("drain: Redrive", err)
			for {
				c, err := qc.Claim(ctx, &coordv1.ClaimRequest{Queue: q, MaxMessages: 100, VisibilityTimeout: durationpb.New(maxVisibility)})
				if !rec("drain: Claim", err) || len(c.GetMessages()) == 0 {
					break
				}
				for _, m := range c.GetMessages() {
					_, err := qc.Ack(ctx, &coordv1.AckRequest{Queue: q, Receipt: m.GetReceipt()})
					rec("drain: Ack", err)
					l.book.ack(m.GetMessageId(), err)
				}
			}
			st, err := qc.Stats(ctx, &coordv1.StatsRequest{Queue: q})
			if rec("drain: Stats", err) && st.GetReady()+st.GetDelayed()+st.GetInFlight()+st.GetDead() > 0 {
				left = true
			}
		}
		if !left {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	dt.unexpected("the queues did not drain within 60 s")
}

// verified is what the checks after the quiet period found.
type verified struct {
	enqueued, acked, maybeAcked int
	sessions, notFound, inGrace int
	graceLocks                  int
	graceEnds                   []time.Time // of the sessions within their grace
	lenQuiet, lenFinal          int
	redisKeys                   map[string]int
}

// verify checks, after the quiet period, that nothing the load created is
// left; failures go to dt.
func verify(t *testing.T, l *load, dt *tally) verified {
	var v verified
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := l.e.stable[0]
	rec := func(op string, err error, expected ...string) bool {
		return dt.record(op, err, false, l.redis, expected...)
	}

	// Queues: empty, and every message acked once.
	qc := coordv1.NewQueueServiceClient(conn)
	for _, q := range l.queues {
		st, err := qc.Stats(ctx, &coordv1.StatsRequest{Queue: q})
		if rec("check: Stats", err) && (st.GetReady() != 0 || st.GetDelayed() != 0 || st.GetInFlight() != 0 || st.GetDead() != 0) {
			dt.unexpected(fmt.Sprintf("queue %s after the quiet period: %v", q, st))
		}
	}
	b := &l.book
	v.enqueued, v.acked, v.maybeAcked = len(b.enqueued), len(b.acked), len(b.maybe)
	lost := 0
	for id := range b.enqueued {
		if _, ok := b.acked[id]; !ok {
			if _, ok := b.maybe[id]; !ok {
				if lost++; lost <= 5 {
					dt.unexpected(fmt.Sprintf("message %s was enqueued, the queues are empty, and no Ack of it succeeded", id))
				}
			}
		}
	}
	for id, n := range b.acked {
		if n > 1 {
			dt.unexpected(fmt.Sprintf("message %s was acked %d times", id, n))
		}
	}
	if lost > 5 {
		dt.unexpected(fmt.Sprintf("... %d messages lost in all", lost))
	}

	// Locks: every name free.
	lc := coordv1.NewLockServiceClient(conn)
	for _, name := range append(slices.Clone(l.lockNames), "probe") {
		info, err := lc.GetLock(ctx, &coordv1.GetLockRequest{Name: name})
		if rec("check: GetLock", err) && info.GetHeld() {
			dt.unexpected(fmt.Sprintf("lock %s is held after the quiet period: %v", name, info))
		}
	}

	// Idempotency keys: each begins afresh (EXECUTE); the probe's own record
	// is cleared by a retryable failure.
	ic := coordv1.NewIdempotencyServiceClient(conn)
	for _, key := range l.idemKeys {
		r, err := ic.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: "fp-" + key, ProcessingTtl: durationpb.New(time.Second)})
		if !rec("check: BeginIdempotent", err) {
			continue
		}
		if r.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
			dt.unexpected(fmt.Sprintf("idempotency key %s after the quiet period: %v", key, r.GetOutcome()))
			continue
		}
		_, err = ic.Finish(ctx, &coordv1.FinishRequest{Key: key, OwnerToken: r.GetOwnerToken(), Failure: &coordv1.Failure{Message: "probe", Retryable: true}})
		rec("check: Finish", err)
	}

	if l.e.mem != nil {
		v.lenQuiet = l.e.mem.Len()
	}

	// Sessions: resuming each must end with SESSION_NOT_FOUND.
	ids := slices.Sorted(maps.Keys(l.sessions))
	v.sessions = len(ids)
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	for range 8 {
		wg.Go(func() {
			for id := range work {
				notFound, graceEnd, locks, problem := probeSession(ctx, l, id)
				mu.Lock()
				rec("check: KeepAlive(resume)", nil)
				if problem != "" {
					dt.unexpected(problem)
				}
				if notFound {
					v.notFound++
				}
				if !graceEnd.IsZero() {
					v.inGrace++
					v.graceLocks += locks
					v.graceEnds = append(v.graceEnds, graceEnd)
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()

	if l.e.mem != nil {
		time.Sleep(2 * sweepInterval)
		// An expired session is remembered, with its loss reports, until a
		// heartbeat acknowledges them, which an expired session's stream
		// never sends, or until its grace ends: the probe leaves those,
		// but for those whose grace has ended since (the earliest of the
		// load's, when the probe is late).
		v.lenFinal = l.e.mem.Len()
		now := time.Now()
		still := 0
		for _, end := range v.graceEnds {
			if end.After(now) {
				still++
			}
		}
		if v.lenFinal < still || v.lenFinal > v.inGrace {
			dt.unexpected(fmt.Sprintf("memory store: Len() is %d after the quiet period and the session probe, want the %d expired sessions it found within their grace (at least the %d whose grace has not ended yet); it holds:\n%s",
				v.lenFinal, v.inGrace, still, memDump(l.e.mem)))
		}
		if v.lenQuiet < v.inGrace {
			dt.unexpected(fmt.Sprintf("memory store: Len() was %d before the session probe, less than the %d sessions it found", v.lenQuiet, v.inGrace))
		}
	} else {
		counts, examples, err := l.e.redisKeys()
		if err != nil {
			t.Errorf("scanning the Redis keys: %v", err)
		}
		v.redisKeys = counts
		// Meant to outlive everything: the fence counters of the lock names
		// (in their meta) and the enqueue counters of the queues (the load's
		// and the warm-up's, one per connection), the namespace's session
		// index.
		warm := len(l.e.stable) + 1
		// And the expired sessions within their grace (the session's hash
		// and its loss reports: at least once, until acknowledged).
		// And the stored layout's version: a key on each master from the
		// start, and one more on a master checked on a call's path
		// (internal/store/redis/layout.go): at most six on three masters.
		allowed := map[string]int{"l:m": len(l.lockNames) + warm, "q:seq": len(l.queues) + warm, "sn": 1, "s": 2 * v.inGrace, "v": 6}
		for kind, n := range counts {
			if n <= allowed[kind] {
				continue
			}
			msg := fmt.Sprintf("redis: %d keys of kind %q left after the quiet period and the probes, e.g. %v", n, kind, examples[kind])
			if kind == "s" && strings.Contains(fmt.Sprint(examples[kind]), "closing:1") {
				// What this has been so far: a KeepAlive half-closed and then
				// cancelled (or its connection closed) while the server was
				// closing the session: CloseSession runs under the stream's
				// context, marks the session closing, and stops there; a
				// resume answers SESSION_NOT_FOUND, nothing finishes the
				// close, and the keys stay until deadline + SessionGrace.
				msg += "\n    (closing:1: a session close interrupted after its first step — internal/server/session.go calls Close with the stream's context, " +
					"internal/store/redis/sessions.go CloseSession leaves the session closing when a later step fails, and nothing retries it)"
			}
			dt.unexpected(msg)
		}
	}
	return v
}

// probeSession resumes session id, which must be gone: SESSION_NOT_FOUND at
// once, or, within store.SessionGrace, an expired=true response (with the
// locks it lost) and then SESSION_NOT_FOUND; graceEnd is then when its
// grace ends (its expire time + store.SessionGrace).
func probeSession(ctx context.Context, l *load, id string) (notFound bool, graceEnd time.Time, locks int, problem string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := coordv1.NewSessionServiceClient(l.e.stable[0]).KeepAlive(ctx)
	if err != nil {
		return false, time.Time{}, 0, fmt.Sprintf("probe of session %s: %v", id, err)
	}
	if err := s.Send(&coordv1.KeepAliveRequest{SessionId: id, Ttl: durationpb.New(time.Second)}); err != nil && !errors.Is(err, io.EOF) {
		return false, time.Time{}, 0, fmt.Sprintf("probe of session %s: send: %v", id, err)
	}
	notFoundErr := func(err error) bool {
		c, reason := outcome(err)
		return c == codes.FailedPrecondition && reason == "SESSION_NOT_FOUND"
	}
	r, err := s.Recv()
	switch {
	case err != nil && notFoundErr(err):
		return true, time.Time{}, 0, ""
	case err != nil:
		return false, time.Time{}, 0, fmt.Sprintf("probe of session %s: %v, want SESSION_NOT_FOUND", id, err)
	case !r.GetExpired():
		_ = s.CloseSend()
		return false, time.Time{}, 0, fmt.Sprintf("session %s is alive after the quiet period: %v", id, r)
	}
	graceEnd = r.GetExpireTime().AsTime().Add(store.SessionGrace)
	if _, err := s.Recv(); !notFoundErr(err) {
		return false, graceEnd, len(r.GetLostLocks()), fmt.Sprintf("probe of session %s: expired=true, then %v, want SESSION_NOT_FOUND", id, err)
	}
	return false, graceEnd, len(r.GetLostLocks()), ""
}

// writeProfiles writes the heap (in use at the last GC) and goroutine
// profiles to -soak.profiles, if set.
func writeProfiles(t *testing.T, when string) {
	if *profilesFlag == "" {
		return
	}
	for _, p := range []string{"heap", "goroutine"} {
		f, err := os.Create(filepath.Join(*profilesFlag, p+"-"+when+".pb.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup(p).WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
}

// snapshot is the heap and the goroutines at one moment.
type snapshot struct {
	heapAlloc, heapInuse uint64
	goroutines           int
	stacks               map[string]int // goroutines by stack
}

// snap measures after two GCs.
func snap() snapshot {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return snapshot{heapAlloc: m.HeapAlloc, heapInuse: m.HeapInuse, goroutines: runtime.NumGoroutine(), stacks: stacks()}
}

// settle waits up to 10 s for the goroutines to come back to before's
// count, then measures; extra describes the stacks there are more of than
// before.
func settle(before snapshot) (snapshot, string) {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before.goroutines && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	after := snap()
	var b strings.Builder
	for _, st := range slices.Sorted(maps.Keys(after.stacks)) {
		if d := after.stacks[st] - before.stacks[st]; d > 0 {
			fmt.Fprintf(&b, "%d more of:\n%s\n", d, st)
		}
	}
	return after, b.String()
}

// stacks returns the goroutines by stack (function and line), from the
// goroutine profile.
func stacks() map[string]int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	out := map[string]int{}
	for _, block := range strings.Split(buf.String(), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		n, err := strconv.Atoi(strings.SplitN(lines[0], " ", 2)[0])
		if err != nil {
			continue
		}
		var key []string
		for _, ln := range lines[1:] {
			f := strings.Fields(strings.TrimPrefix(ln, "#"))
			if len(f) >= 3 {
				key = append(key, "    "+f[1]+" "+f[2])
			}
		}
		out[strings.Join(key, "\n")] += n
	}
	return out
}

func mib(b uint64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

func pctChange(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(a) * 100 }

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}

func mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return (sum / time.Duration(len(d))).Round(10 * time.Microsecond)
}
