package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// sessions: open --sessions KeepAlive streams, each holding
// --locks-per-session session-bound locks, keep them alive with a heartbeat
// every ttl/3 for --duration, and close them (half-close: the session ends
// and its locks are released). Reported: opening (sessions/s, latency of
// the first heartbeat and the locks), heartbeats (per second, round-trip
// latency) and, with --coordd-pid, coordd's RSS before, while they are
// open, and its growth per session.

// streamsPerConn stays under coordd's limits.max_streams_per_connection
// (1000).
const streamsPerConn = 500

type liveSession struct {
	stream grpc.BidiStreamingClient[coordv1.KeepAliveRequest, coordv1.KeepAliveResponse]
	id     string
}

func (b *bench) sessionLockName(i, j int) string {
	return "cb:s:" + strconv.Itoa(i) + ":" + strconv.Itoa(j)
}

func (b *bench) runSessions(ctx context.Context) error {
	const scenario = "sessions"
	cfg := b.cfg
	n, m := cfg.Sessions, cfg.LocksPerSes
	nconn := (n + streamsPerConn - 1) / streamsPerConn
	conns, err := b.dial(cfg.Addr, nconn, true)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	cl := newClients(conns)
	for i := range n {
		for j := range m {
			b.usedLocks = append(b.usedLocks, b.sessionLockName(i, j))
		}
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ttl := durationpb.New(cfg.SessionTTL)
	sessions := make([]*liveSession, n)
	var nextIdx atomic.Int64

	// Every session heartbeats every ttl/3 (from a random offset) from the
	// moment it is open until the end of the hold; latencies are recorded
	// during the hold only. A stream that breaks (UNAVAILABLE: the store
	// timed out, say) is resumed with the session's ID, as a client would,
	// and counted as an error; a session that cannot be resumed is lost.
	var hbs lockedHist
	var hbErrs, resumes counter
	var measuring atomic.Bool
	var live atomic.Int64
	var wg sync.WaitGroup
	period := cfg.SessionTTL / 3
	stop := make(chan struct{})
	heartbeat := func(i int, s *liveSession, c int) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(b.seed, uint64(i)))
		t := time.NewTimer(time.Duration(rng.Int64N(int64(period))))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			t.Reset(period)
			t0 := time.Now()
			err := s.stream.Send(&coordv1.KeepAliveRequest{})
			var r *coordv1.KeepAliveResponse
			if err == nil {
				r, err = s.stream.Recv()
			}
			if err != nil {
				if sctx.Err() != nil {
					return
				}
				hbErrs.add(fmt.Errorf("heartbeat: %w", err))
				st, rerr := cl.session[c].KeepAlive(sctx)
				if rerr == nil {
					rerr = st.Send(&coordv1.KeepAliveRequest{SessionId: s.id})
				}
				if rerr == nil {
					_, rerr = st.Recv()
				}
				if rerr != nil {
					resumes.add(fmt.Errorf("resume: %w", rerr))
					live.Add(-1)
					s.stream = nil
					return
				}
				s.stream = st
				continue
			}
			if measuring.Load() {
				hbs.record(time.Since(t0))
			}
			if r.GetExpired() || len(r.GetLostLocks()) > 0 {
				hbErrs.add(fmt.Errorf("session %s: expired=%v, lost %d lock(s)", s.id, r.GetExpired(), len(r.GetLostLocks())))
			}
		}
	}

	b.progress("%s: opening %d sessions with %d lock(s) each on %d connections", scenario, n, m, nconn)
	runtimeBefore := b.snapshot(cfg.CoorddPID)
	goBefore := b.scrape(ctx)
	open := runCount(sctx, cfg.Concurrency, n, func(_ context.Context, w *worker) error {
		i := int(nextIdx.Add(1)) - 1 // < n: runCount hands out n tickets in all
		c := i % nconn
		st, err := cl.session[c].KeepAlive(sctx)
		if err != nil {
			return err
		}
		if err := st.Send(&coordv1.KeepAliveRequest{Ttl: ttl}); err != nil {
			return fmt.Errorf("keepalive send: %w", err)
		}
		r, err := st.Recv()
		if err != nil {
			return fmt.Errorf("keepalive: %w", err)
		}
		s := &liveSession{stream: st, id: r.GetSessionId()}
		sessions[i] = s
		live.Add(1)
		wg.Add(1)
		go heartbeat(i, s, c)
		for j := range m {
			g, err := cl.locks[c].Lock(ctx, &coordv1.LockRequest{Name: b.sessionLockName(i, j), SessionId: s.id})
			if err != nil {
				return fmt.Errorf("session lock: %w", err)
			}
			if !g.GetAcquired() {
				return fmt.Errorf("session lock %s: held by %q", b.sessionLockName(i, j), g.GetHolder())
			}
		}
		return nil
	}, b.seed)
	openRes := phaseResult(scenario+"/open", tCoordd, open)
	openRes.Unit = "sessions"

	b.progress("%s: %d open; heartbeats every %v for %v", scenario, live.Load(), period, cfg.Duration)
	before := b.snapshot(cfg.CoorddPID)
	peakRSS := before.server.rss
	measuring.Store(true)
	tick := time.NewTicker(250 * time.Millisecond)
	deadline := time.After(cfg.Duration)
	start := time.Now()
hold:
	for {
		select {
		case <-ctx.Done():
			break hold
		case <-deadline:
			break hold
		case <-tick.C:
			if cfg.CoorddPID > 0 {
				if p, err := readProc(cfg.CoorddPID); err == nil && p.rss > peakRSS {
					peakRSS = p.rss
				}
			}
		}
	}
	tick.Stop()
	after := b.snapshot(cfg.CoorddPID)
	goOpen := b.scrape(ctx)
	elapsed := time.Since(start)
	close(stop)
	if !waitTimeout(&wg, 30*time.Second) {
		cancel() // a heartbeat got no answer: end the streams
		wg.Wait()
	}

	res := &Result{Scenario: scenario, Target: tCoordd, Seconds: elapsed.Seconds(), Unit: "heartbeats"}
	hbs.mu.Lock()
	res.Ops = int64(hbs.h.total)
	if hbs.h.total > 0 {
		l := hbs.h.summary()
		res.Latency = &l
	}
	hbs.mu.Unlock()
	res.OpsPerSec = float64(res.Ops) / elapsed.Seconds()
	res.Errors = hbErrs.n.Load() + resumes.n.Load() + open.errs
	var msgs []string
	if open.firstErr != nil {
		msgs = append(msgs, fmt.Sprintf("open: %d errors, first %v", open.errs, open.firstErr))
	}
	if err := hbErrs.firstErr(); err != nil {
		msgs = append(msgs, fmt.Sprintf("%d heartbeat errors, first %v", hbErrs.n.Load(), err))
	}
	if err := resumes.firstErr(); err != nil {
		msgs = append(msgs, fmt.Sprintf("%d sessions lost, first %v", resumes.n.Load(), err))
	}
	res.FirstError = strings.Join(msgs, "; ")
	res.setProc(before, after)
	res.Sessions = &SessionStats{Open: open.ops, Live: live.Load(), LocksEach: m, TTL: cfg.SessionTTL.String(), Connections: nconn}
	if cfg.CoorddPID > 0 && runtimeBefore.serverOK && after.serverOK {
		res.Sessions.RSSBefore = runtimeBefore.server.rss
		res.Sessions.RSSOpen = after.server.rss
		res.Sessions.RSSPeak = max(peakRSS, after.server.rss)
		if open.ops > 0 {
			res.Sessions.BytesPerSession = float64(res.Sessions.RSSPeak-runtimeBefore.server.rss) / float64(open.ops)
		}
	}
	res.Sessions.RuntimeBefore, res.Sessions.RuntimeOpen = goBefore, goOpen
	res.Phases = []*Result{openRes}

	// Close: half-close each stream and wait for the server to end it (the
	// session ends and its locks are released).
	b.progress("%s: closing", scenario)
	var closeErrs counter
	var next atomic.Int64
	var cw sync.WaitGroup
	for range cfg.Concurrency {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(sessions) {
					return
				}
				s := sessions[i]
				if s == nil || s.stream == nil {
					continue
				}
				if err := s.stream.CloseSend(); err != nil {
					closeErrs.add(err)
					continue
				}
				for {
					if _, err := s.stream.Recv(); err != nil {
						if !errors.Is(err, io.EOF) {
							closeErrs.add(err)
						}
						break
					}
				}
			}
		}()
	}
	cw.Wait()
	if goBefore != nil {
		// The server ends a half-closed stream once its session is closed:
		// give its goroutines a moment to exit.
		time.Sleep(time.Second)
		res.Sessions.RuntimeClosed = b.scrape(ctx)
	}
	res.Errors += closeErrs.n.Load()
	if res.FirstError == "" && closeErrs.firstErr() != nil {
		res.FirstError = "close: " + closeErrs.firstErr().Error()
	}
	b.add(res)
	return nil
}

// scrape reads coordd's Go runtime from --coordd-metrics, or returns nil.
func (b *bench) scrape(ctx context.Context) *goRuntime {
	if b.cfg.CoorddMetr == "" {
		return nil
	}
	g, err := scrapeRuntime(ctx, b.cfg.CoorddMetr)
	if err != nil {
		b.progress("--coordd-metrics: %v", err)
		return nil
	}
	return &g
}

// waitTimeout waits for wg for at most d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
