package soak

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/token"
)

// The lifetimes the load uses and the server's configuration enforces: all
// short, so that the quiet period outlasts them.
const (
	maxLockTTL    = 2 * time.Second        // Lock ttl, Renew ttl, max_hold
	minSessionTTL = time.Second            // KeepAlive ttl: 1-2 s
	maxSessionTTL = 2 * time.Second        //
	maxVisibility = 2 * time.Second        // Claim and Extend visibility_timeout
	maxProcessing = 2 * time.Second        // BeginIdempotent and ExtendIdempotent processing_ttl
	maxResultTTL  = 2 * time.Second        // Finish result_ttl; also the retention of abandoned keys
	dedupWindow   = 2 * time.Second        // queue.dedup_window
	maxPeriod     = time.Second            // rate-limit periods (state lives at most 2 periods, or a burst's refill: 2 s)
	maxWait       = time.Second            // wait of Lock, BeginIdempotent, Claim
	maxDelay      = time.Second            // Enqueue delay, Nack delay; Nack backoff is capped at 1 s too
	sweepInterval = 100 * time.Millisecond // memory.sweep_interval
	// defaultQuiet outlasts the longest of them: an abandoned idempotency key
	// (processing_ttl, extended once, then retention) with a few sweeps.
	defaultQuiet = 6 * time.Second
)

// serverConfig is coordd's configuration for the soak: the defaults, with
// every default and cap on a lifetime cut to the constants above.
func serverConfig() server.Config {
	c := server.DefaultConfig()
	lc, sc, ic, qc, lim := &c.Lock, &c.Session, &c.Idem, &c.Queue, &c.Limiter
	lc.DefaultTTL, lc.MaxTTL, lc.HoldLimit = maxLockTTL, maxLockTTL, maxLockTTL
	sc.DefaultTTL, sc.MinTTL, sc.MaxTTL = maxSessionTTL, minSessionTTL, maxSessionTTL
	ic.DefaultProcessingTTL, ic.MaxProcessingTTL = maxProcessing, maxProcessing
	ic.DefaultResultTTL, ic.MaxResultTTL = maxResultTTL, maxResultTTL
	qc.DefaultVisibility, qc.MaxVisibility = maxVisibility, maxVisibility
	qc.DedupWindow = dedupWindow
	qc.BackoffBase, qc.BackoffMax = 100*time.Millisecond, maxDelay
	qc.MaxDelay = maxDelay
	lim.MaxPeriod = 2 * maxPeriod // a burst of twice the limit refills in 2 periods
	for _, w := range []*time.Duration{&lc.MaxWait, &ic.MaxWait, &qc.MaxWait} {
		*w = maxWait
	}
	c.Policies = policies()
	return c
}

// policies are the named rate-limit policies: one per algorithm, and one in
// shadow mode.
func policies() map[string]limiter.Policy {
	return map[string]limiter.Policy{
		"fixed":   {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 20, Period: 500 * time.Millisecond}},
		"sliding": {Limit: store.Limit{Algorithm: store.SlidingWindow, Limit: 20, Period: 500 * time.Millisecond}},
		"log":     {Limit: store.Limit{Algorithm: store.SlidingLog, Limit: 10, Period: 500 * time.Millisecond}},
		"token":   {Limit: store.Limit{Algorithm: store.TokenBucket, Limit: 20, Period: time.Second, Burst: 30}},
		"leaky":   {Limit: store.Limit{Algorithm: store.LeakyBucket, Limit: 20, Period: time.Second}, OnStoreFailure: limiter.FailOpen},
		"shadow":  {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 5, Period: time.Second}, Shadow: true},
	}
}

// limits are cmd/coordd's defaults for the limits against abuse
// (cmd/coordd/config.go), which the soak must stay under.
var limits = server.Limits{
	MaxWaitersPerNamespace: 10000, MaxWaitersPerConnection: 1000,
	MaxStreamsPerNamespace: 10000, MaxStreamsPerConnection: 1000,
	MaxStreamMessageRate: 10,
}

// env is coordd in this process, wired as cmd/coordd's newDaemon wires it,
// with the stable client connections.
type env struct {
	t        *testing.T
	backend  string
	st       store.Store
	mem      *memory.Store           // the memory backend's store; else nil
	rdb      goredis.UniversalClient // the Redis store's client (Client); else nil
	prefix   string                  // the Redis backends' key prefix
	reg      *prometheus.Registry
	logs     *logCounter
	gs       *grpc.Server
	hs       *health.Server
	drain    context.Context // done when the test drains the server (drainNow)
	drainNow context.CancelFunc
	locks    *lock.Service
	served   chan struct{}
	addr     string
	stable   []*grpc.ClientConn
	down     bool

	// sessions are the IDs of every session the server answered for, seen
	// by a stream interceptor: a session created for a client that never
	// got the answer (its connection closed) is among them.
	mu       sync.Mutex
	sessions map[string]struct{}
}

// sessionSpy is a KeepAlive stream whose responses env.sessions records.
type sessionSpy struct {
	grpc.ServerStream
	e *env
}

func (s sessionSpy) SendMsg(m any) error {
	if r, ok := m.(*coordv1.KeepAliveResponse); ok && r.GetSessionId() != "" {
		s.e.mu.Lock()
		if s.e.sessions != nil {
			s.e.sessions[r.GetSessionId()] = struct{}{}
		}
		s.e.mu.Unlock()
	}
	return s.ServerStream.SendMsg(m)
}

func (e *env) spy(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, sessionSpy{ss, e})
}

func newEnv(t *testing.T, backend string, conns int) *env {
	e := &env{
		t: t, backend: backend, served: make(chan struct{}), logs: newLogCounter(),
		sessions: map[string]struct{}{},
	}
	e.drain, e.drainNow = context.WithCancel(context.Background())
	switch backend {
	case "memory":
		e.mem = memory.New(memory.Options{Clock: clock.Real{}, SweepInterval: sweepInterval})
		e.st = e.mem
	case "redis", "cluster":
		e.st = e.newRedis(t, backend)
	default:
		t.Fatalf("-soak.backend=%q: want memory, redis or cluster", backend)
	}

	e.reg = prometheus.NewRegistry()
	domain := metrics.New(e.reg)
	svc, err := server.NewServices(e.st, clock.Real{}, serverConfig(), e.drain)
	if err != nil {
		t.Fatal(err)
	}
	e.locks = svc.Locks
	grpcMetrics := grpcprom.NewServerMetrics() // counts; the latency histograms are the domain metrics', as in cmd/coordd
	e.reg.MustRegister(grpcMetrics)
	e.gs, e.hs = server.New(svc, server.Options{
		Log: slog.New(e.logs), Metrics: domain, Limits: limits,
		Unary:  []grpc.UnaryServerInterceptor{grpcMetrics.UnaryServerInterceptor()},
		Stream: []grpc.StreamServerInterceptor{grpcMetrics.StreamServerInterceptor(), e.spy},
		ServerOptions: []grpc.ServerOption{
			grpc.MaxRecvMsgSize(4 << 20),
			grpc.MaxConcurrentStreams(1000),
		},
	})
	grpcMetrics.InitializeMetrics(e.gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	go func() {
		defer close(e.served)
		_ = e.gs.Serve(lis)
	}()
	t.Cleanup(e.shutdown) // if the test ends early; a no-op after shutdown
	for range conns {
		e.stable = append(e.stable, e.dial())
	}
	return e
}

func (e *env) newRedis(t *testing.T, backend string) store.Store {
	cfg := redis.Config{Mode: "standalone", Timeout: 2 * time.Second}
	if backend == "cluster" {
		cfg.Mode, cfg.Addrs = "cluster", redistest.Cluster(t)
	} else {
		cfg.Addrs = []string{redistest.Standalone(t)}
	}
	// A prefix of its own keeps the soak apart on the shared instances; its
	// keys are deleted at the end, the fence counters (which never expire)
	// included.
	e.prefix = "soak" + token.New()[:12]
	cfg.Prefix = e.prefix
	// Opened as cmd/coordd opens it; its client, with go-redis' default
	// buffer sizes (redisPoolBytes), also serves that clean-up.
	st, err := redis.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.rdb = st.Client()
	return st
}

// go-redis's buffer sizes (its defaults, which Open's client keeps): each
// connection its pools open holds a read and a write buffer for as long as
// it stays open, idle ones included.
const (
	redisBuf     = 32 << 10  // a regular connection's
	redisPipeBuf = 128 << 10 // a pipeline connection's
)

// redisPoolBytes is what the Redis client's open connections hold in
// buffers, with their counts: the pools grow to the load's peak
// concurrency and keep their connections, which the heap check allows for.
func (e *env) redisPoolBytes() (bytes uint64, conns, pipeConns uint32) {
	var st *goredis.PoolStats
	switch c := e.rdb.(type) {
	case *goredis.ClusterClient:
		st = c.PoolStats()
	case *goredis.Client:
		st = c.PoolStats()
	default:
		return 0, 0, 0
	}
	conns = st.TotalConns
	if st.PipelineStats != nil {
		pipeConns = st.PipelineStats.TotalConns
	}
	return uint64(conns)*2*redisBuf + uint64(pipeConns)*2*redisPipeBuf, conns, pipeConns
}

func (e *env) dial() *grpc.ClientConn {
	c, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// shutdown closes the stable connections and stops the server as
// cmd/coordd's serve does (health NOT_SERVING, drain, graceful stop), then
// closes the store. Gracefully stopping must not need the forced stop: every
// client is gone by then.
func (e *env) shutdown() {
	if e.down {
		return
	}
	e.down = true
	for _, c := range e.stable {
		_ = c.Close()
	}
	e.hs.Shutdown()
	e.drainNow()
	stopped := make(chan struct{})
	go func() {
		e.gs.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		e.t.Errorf("GracefulStop did not return within 10 s with every client gone: a call or stream is stuck")
		e.gs.Stop()
		<-stopped
	}
	<-e.served
	e.locks.Wait()
	// The keys first: the store's Close closes e.rdb, its client.
	if e.rdb != nil {
		if err := e.deleteKeys(); err != nil {
			e.t.Errorf("deleting the soak's Redis keys: %v", err)
		}
	}
	if err := e.st.Close(); err != nil {
		e.t.Errorf("closing the store: %v", err)
	}
}

// gauge returns the value of a gauge or counter without labels from the
// server's metrics, and whether it exists.
func (e *env) gauge(name string) (float64, bool) {
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// forEachNode runs fn on every Redis node that holds keys: the masters of a
// cluster, or the standalone server.
func (e *env) forEachNode(ctx context.Context, fn func(context.Context, *goredis.Client) error) error {
	if cc, ok := e.rdb.(*goredis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, fn)
	}
	return fn(ctx, e.rdb.(*goredis.Client))
}

// redisKeys returns the soak's keys, grouped by kind (the object's tag
// kind and the key's suffix, e.g. "l:m"), with up to 3 examples each
// and their PTTL.
func (e *env) redisKeys() (map[string]int, map[string][]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	counts := map[string]int{}
	examples := map[string][]string{}
	err := e.forEachNode(ctx, func(ctx context.Context, c *goredis.Client) error {
		it := c.Scan(ctx, 0, e.prefix+":*", 1000).Iterator()
		for it.Next(ctx) {
			k := it.Val()
			kind := keyKind(e.prefix, k)
			mu.Lock()
			counts[kind]++
			example := len(examples[kind]) < 3
			mu.Unlock()
			if !example {
				continue
			}
			desc := fmt.Sprintf("%s (pttl %v", k, c.PTTL(ctx, k).Val())
			if c.Type(ctx, k).Val() == "hash" {
				desc += fmt.Sprintf(", %v", c.HGetAll(ctx, k).Val())
			}
			mu.Lock()
			examples[kind] = append(examples[kind], desc+")")
			mu.Unlock()
		}
		return it.Err()
	})
	return counts, examples, err
}

// keyKind is a key's kind: "l", "s", "r", "i", "q" or "sn", and its suffix
// after the tag, if any (internal/store/redis/keys.go).
func keyKind(prefix, k string) string {
	rest := strings.TrimPrefix(k, prefix+":{")
	kind, _, _ := strings.Cut(rest, ":")
	if i := strings.LastIndex(rest, "}"); i >= 0 && i+1 < len(rest) {
		return kind + rest[i+1:]
	}
	return kind
}

// deleteKeys deletes every key of the soak's prefix.
func (e *env) deleteKeys() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.forEachNode(ctx, func(ctx context.Context, c *goredis.Client) error {
		it := c.Scan(ctx, 0, e.prefix+":*", 1000).Iterator()
		for it.Next(ctx) {
			if err := c.Del(ctx, it.Val()).Err(); err != nil {
				return err
			}
		}
		return it.Err()
	})
}

// logCounter is the server's slog handler: it counts the lines at warn
// level and above (calls that did not go as the client asked) by level and
// gRPC code, and keeps the error-level ones (INTERNAL, UNKNOWN, panics,
// unexpected errors), which the soak must not produce.
type logCounter struct {
	mu     sync.Mutex
	counts map[string]int // "WARN Unavailable", "ERROR Internal", ...
	errors []string       // the first error-level lines, with their attributes
	nerr   int
	warns  map[string][]string // the first warn-level lines of each code but CANCELLED and DEADLINE_EXCEEDED
}

func newLogCounter() *logCounter {
	return &logCounter{counts: map[string]int{}, warns: map[string][]string{}}
}

func (l *logCounter) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelWarn }

func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	code := "-"
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "grpc.code" {
			code = a.Value.String()
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[r.Level.String()+" "+code]++
	switch {
	case r.Level >= slog.LevelError:
		l.nerr++
		if len(l.errors) < 10 {
			l.errors = append(l.errors, b.String())
		}
	case code != "Canceled" && code != "DeadlineExceeded" && len(l.warns[code]) < 3:
		l.warns[code] = append(l.warns[code], b.String())
	}
	return nil
}

func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func (l *logCounter) summary() (string, int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.counts))
	for k := range l.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, l.counts[k])
	}
	if b.Len() == 0 {
		b.WriteString(" none")
	}
	for _, code := range slices.Sorted(maps.Keys(l.warns)) {
		for _, w := range l.warns[code] {
			fmt.Fprintf(&b, "\n  %s", w)
		}
	}
	return b.String(), l.nerr, append([]string(nil), l.errors...)
}
