// Command coordd is the coordination daemon: leases and locks with fencing,
// sessions, rate limiting, idempotency keys and a delayed work queue, over
// gRPC. With no configuration it serves on 127.0.0.1:7070 (gRPC) and
// 127.0.0.1:7071 (/metrics, /healthz) from the embedded memory store.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	_ "time/tzdata" // schedules' time zones, on a machine or image without zoneinfo

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	goredis "github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/console"
	"github.com/coordd/coordd/internal/gateway"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/tracing"
	"github.com/coordd/coordd/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "coordd:", err)
		os.Exit(1)
	}
}

// run loads the configuration, serves until ctx ends, then shuts down
// gracefully. SIGHUP, or a change to the TLS files or auth.api_keys_file,
// reloads what can change while running (reload.go).
func run(ctx context.Context, args []string, logOut io.Writer) error {
	if len(args) > 0 && args[0] == "healthcheck" {
		return healthcheck(ctx, args[1:])
	}
	cfg, err := loadConfig(args)
	if errors.Is(err, pflag.ErrHelp) {
		return nil
	}
	if errors.Is(err, errVersion) {
		fmt.Println(version.String("coordd"))
		return nil
	}
	if err != nil {
		return err
	}
	log, err := newLogger(cfg, logOut)
	if err != nil {
		return err
	}
	goredis.SetLogger(redisLog{log}) // go-redis's own lines: through the same logger (JSON with log_format json)
	for _, name := range unknownEnv(os.Environ()) {
		log.Warn("an environment variable names no configuration key: ignored (a typo?)", "name", name)
	}
	for _, msg := range cfg.Deprecated {
		log.Warn(msg)
	}
	d, err := newDaemon(cfg, log)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	rctx, stopReloads := context.WithCancel(ctx)
	reloads := make(chan struct{})
	go func() {
		defer close(reloads)
		d.reloads(rctx, args, hup)
	}()
	defer func() { stopReloads(); <-reloads }() // serve can end on a listener's failure, before ctx
	return d.serve(ctx)
}

// healthcheck asks a running coordd's /healthz, on the http_addr the same
// configuration names (on loopback if it listens on every interface), and
// fails unless it answers 200: for a container's HEALTHCHECK.
func healthcheck(ctx context.Context, args []string) error {
	cfg, err := loadConfig(args)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http_addr: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz answered %s", resp.Status)
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

func newLogger(cfg Config, out io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(out, opts)), nil
	}
	return slog.New(slog.NewTextHandler(out, opts)), nil
}

// The HTTP port's bounds (metrics, health, the console), so that a stranger
// cannot hold connections open by sending or reading slowly: a request's
// headers within 10 s and the whole request within 30 s, a response written
// within 60 s, an idle keep-alive connection closed after 2 minutes, and
// headers of at most 64 KiB (README, "HTTP port").
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = 30 * time.Second
	httpWriteTimeout      = 60 * time.Second
	httpIdleTimeout       = 2 * time.Minute
	httpMaxHeaderBytes    = 64 << 10
)

// newHTTPServer is the HTTP port's server, with its bounds.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: httpWriteTimeout, IdleTimeout: httpIdleTimeout, MaxHeaderBytes: httpMaxHeaderBytes}
}

// daemon is one running coordd: its store, services and listeners.
type daemon struct {
	cfg      Config
	log      *slog.Logger
	store    store.Store
	limiter  *limiter.Service
	grpc     *grpc.Server
	health   *health.Server
	http     *http.Server
	grpcLis  net.Listener
	httpLis  net.Listener
	drain    context.Context // done when the daemon drains (drainNow)
	drainNow context.CancelFunc
	draining atomic.Bool
	services server.Services  // their waits and background clean-ups end with the drain
	activity *server.Activity // each queue's counts by minute, for the console
	auth     *server.Authenticator
	tls      *tlsFiles // nil without TLS
	metrics  *metrics.Metrics
	tp       *sdktrace.TracerProvider // nil: tracing off
	redlock  bool                     // redis.mode redlock: locks only, no background work on the store
	// recovering, in redlock mode, names the masters that count for
	// nothing now (/healthz lists them).
	recovering func() []string
}

// storeFailure is the kind label of a store operation's error in
// coordd_store_errors_total: "" (no error), unavailable (the store could not
// be reached) or other.
func storeFailure(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, store.ErrUnavailable):
		return "unavailable"
	default:
		return "other"
	}
}

// newDaemon builds the daemon and opens its listeners, so that their
// addresses are known before serve.
func newDaemon(cfg Config, log *slog.Logger) (_ *daemon, err error) {
	policies, err := cfg.policies()
	if err != nil {
		return nil, err
	}
	envoy, err := cfg.envoyConfig()
	if err != nil {
		return nil, err
	}
	d := &daemon{cfg: cfg, log: log}
	d.drain, d.drainNow = context.WithCancel(context.Background())
	if d.tp, err = newTracerProvider(context.Background(), os.Getenv, log); err != nil {
		return nil, err
	}
	var tracer trace.TracerProvider // nil unless on: never a nil *TracerProvider in an interface
	if d.tp != nil {
		tracer = d.tp
		defer func() {
			if err != nil {
				_ = d.tp.Shutdown(context.Background())
			}
		}()
	}
	auth, err := cfg.Auth.config()
	if err != nil {
		return nil, err
	}
	if d.auth, err = server.NewAuthenticator(auth); err != nil {
		return nil, err
	}
	var serverOpts []grpc.ServerOption
	if cfg.TLS.enabled() {
		d.tls = &tlsFiles{}
		if err := d.tls.load(cfg.TLS); err != nil {
			return nil, err
		}
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(d.tls.serverConfig())))
	}
	workers := cfg.GRPC.StreamWorkers
	if workers == 0 {
		workers = runtime.NumCPU()
	}
	serverOpts = append(serverOpts,
		grpc.MaxRecvMsgSize(cfg.Limits.MaxMessageBytes),
		grpc.MaxConcurrentStreams(uint32(cfg.Limits.MaxConcurrentStreams)),
		grpc.NumStreamWorkers(uint32(workers)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.GRPC.KeepaliveTime, Timeout: cfg.GRPC.KeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.GRPC.MinClientPing, PermitWithoutStream: true}),
	)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	domain := metrics.New(reg)
	var storeLatency *server.StoreLatency // the Redis store's: the memory store's calls do not queue on a network
	if cfg.Store == "redis" && cfg.Limits.ShedStoreLatency > 0 {
		storeLatency = server.NewStoreLatency(cfg.Limits.ShedStoreLatency)
	}
	switch {
	case cfg.Store == "redis" && cfg.Redis.Mode == "redlock":
		st, err := newRedlockStore(context.Background(), cfg.Redis, cfg.Lock.MaxTTL, log)
		if err != nil {
			return nil, err
		}
		d.store, d.redlock = st, true
		d.recovering = st.Recovering
		metrics.WatchRedlock(reg, func() int { return len(st.Recovering()) })
		log.Info("redis.mode redlock: serving LockService only (exclusive locks without sessions, fenced) over independent masters; "+
			"every other service answers FAILED_PRECONDITION REDLOCK_MODE", "masters", len(cfg.Redis.Addrs))
	case cfg.Store == "redis":
		observe := func(op string, d time.Duration, err error) {
			domain.StoreCall(op, d, storeFailure(err))
			if storeLatency != nil && err == nil {
				// Saturation shows as slow answers; an outage as failures,
				// which answer UNAVAILABLE, not OVERLOADED.
				storeLatency.Observe(d)
			}
		}
		st, err := newRedisStore(context.Background(), cfg.Redis, cfg.Queue.DeadLetterTTL, observe, tracing.NewStore(tracer, "redis"), log)
		if err != nil {
			return nil, err
		}
		d.store = st
		metrics.WatchBreakers(reg, st.BreakersOpen)
		metrics.WatchEviction(reg, cfg.Redis.AllowEviction, st.EvictingNodes)
	default:
		d.store = tracing.WrapStore(memory.New(memory.Options{
			Clock: clock.Real{}, SweepInterval: cfg.Memory.SweepInterval, DeadLetterTTL: cfg.Queue.DeadLetterTTL,
		}), tracing.NewStore(tracer, "memory"))
	}
	svc, err := server.NewServices(d.store, clock.Real{}, server.Config{
		Lock: cfg.Lock, Semaphore: cfg.Semaphore, Election: cfg.Election,
		Session: cfg.Session, Limiter: cfg.RateLimit.Config, Policies: policies, Envoy: envoy,
		Idem: cfg.Idempotency, Queue: cfg.Queue,
	}, d.drain)
	if err != nil {
		_ = d.closeStore()
		return nil, err
	}
	d.limiter = svc.Limiter
	d.services = svc
	metrics.WatchPolicies(reg, svc.Limiter.RuntimePolicies)
	metrics.WatchQueues(reg, cfg.Metrics.Queues, func(ctx context.Context, q metrics.QueueRef) (metrics.QueueDepth, error) {
		st, err := svc.Queues.Stats(ctx, q.Namespace, q.Name) // summed over a partitioned queue's partitions
		return metrics.QueueDepth{Ready: st.Ready, Delayed: st.Delayed, InFlight: st.InFlight, Dead: st.Dead}, err
	}, time.Second)

	// Counts only: grpc_server_handling_seconds is coordd's own (package
	// metrics), which keeps waiting calls and streams out of it.
	grpcMetrics := grpcprom.NewServerMetrics()
	reg.MustRegister(grpcMetrics, buildInfo())
	d.metrics = domain
	d.initPolicies(policies)
	var local *server.Local // the console's way in: nil unless it is on
	if cfg.UI.Enabled {
		local = &server.Local{}
	}
	var inProcess *server.InProcess // the HTTP/JSON API's way in: nil unless it is on
	if cfg.HTTPAPI.Enabled {
		inProcess = &server.InProcess{}
	}
	limits := cfg.Limits.Limits
	switch limits.MaxSessions {
	case 0:
		budget, from := memoryBudget()
		limits.MaxSessions = server.DerivedMaxSessions(budget)
		log.Info("limits.max_sessions derived from the memory coordd may use", "max_sessions", limits.MaxSessions, "memory_bytes", budget, "from", from)
	case -1:
		limits.MaxSessions = 0 // no limit
	}
	d.activity = server.NewActivity(d.store, clock.Real{})
	d.grpc, d.health = server.New(svc, server.Options{
		Log: log, Metrics: domain, Auth: d.auth, Limits: limits, Local: local, InProcess: inProcess, StoreLatency: storeLatency, Activity: d.activity,
		Unary:         []grpc.UnaryServerInterceptor{grpcMetrics.UnaryServerInterceptor()},
		Stream:        []grpc.StreamServerInterceptor{grpcMetrics.StreamServerInterceptor()},
		ServerOptions: serverOpts, Tracer: tracer,
	})
	grpcMetrics.InitializeMetrics(d.grpc) // every method's counts at 0, for every code

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if d.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
		if d.recovering != nil {
			if r := d.recovering(); len(r) > 0 {
				_, _ = fmt.Fprintf(w, "redlock masters recovering (restarted or emptied less than lock.max_ttl ago, counting for no lock): %s\n", strings.Join(r, ", "))
			}
		}
	})
	if cfg.UI.Enabled {
		mux.Handle("/ui/", d.console(local))
	}
	if cfg.HTTPAPI.Enabled {
		api, err := gateway.New(gateway.Options{
			Conn: inProcess, AuthEnabled: d.auth.Enabled, MaxMessageBytes: cfg.Limits.MaxMessageBytes,
			WriteTimeout: httpWriteTimeout, MaxWait: cfg.Limits.MaxWait, Tracer: tracer,
		})
		if err != nil {
			d.grpc.Stop()
			_ = d.closeStore()
			return nil, err
		}
		mux.Handle(gateway.Prefix, api)
	}
	d.http = newHTTPServer(mux)

	if d.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		d.grpc.Stop() // its stream workers
		_ = d.closeStore()
		return nil, fmt.Errorf("grpc_addr: %w", err)
	}
	if d.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		_ = d.grpcLis.Close()
		d.grpc.Stop()
		_ = d.closeStore()
		return nil, fmt.Errorf("http_addr: %w", err)
	}
	if cfg.HTTPAPI.Enabled && !isLoopback(d.httpLis.Addr()) && !d.auth.Enabled() {
		log.Warn("the HTTP/JSON API (http_api.enabled) is on a non-loopback address with auth off: anyone who can reach the HTTP port can use every namespace; set auth.enabled (README: HTTP/JSON API)", "addr", d.httpLis.Addr().String())
	}
	if cfg.UI.Enabled && !isLoopback(d.httpLis.Addr()) && !d.auth.Enabled() {
		log.Warn("the console (ui.enabled) is on a non-loopback address with auth off: anyone who can reach the HTTP port can redrive and purge every queue; keep it private (README: Console)", "addr", d.httpLis.Addr().String())
	}
	if !isLoopback(d.grpcLis.Addr()) && !d.auth.Enabled() {
		log.Warn("gRPC is listening on a non-loopback address with auth off: anyone who can reach it can use every namespace; set auth.enabled (README: Security)", "addr", d.grpcLis.Addr().String())
	}
	return d, nil
}

// console is the operator's console over local, with the queues the
// configuration names.
func (d *daemon) console(local *server.Local) *console.Console {
	queues := map[string][]string{}
	for _, q := range d.cfg.Queue.Partitioned {
		queues[q.Namespace] = append(queues[q.Namespace], q.Name)
	}
	for _, q := range d.cfg.Metrics.Queues {
		queues[q.Namespace] = append(queues[q.Namespace], q.Name)
	}
	nodes, _ := d.store.(store.NodeHealther)
	var activity store.QueueActivity = d.store
	if d.redlock {
		activity = nil // no queues in Redlock mode
	}
	return console.New(console.Options{
		Local: local, Auth: d.auth, Nodes: nodes, Queues: queues, Activity: activity, AllowedHosts: d.cfg.UI.AllowedHosts,
		Redlock: d.redlock, Log: d.log,
	})
}

// closeStore closes the store (and with it its Redis client, if any).
func (d *daemon) closeStore() error { return d.store.Close() }

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// serve serves until ctx ends or a listener fails, then shuts down: it
// reports NOT_SERVING, ends waits and session streams (sessions stay alive
// for their TTL, resumable elsewhere), lets in-flight calls finish for up to
// shutdown_timeout, and closes the store.
func (d *daemon) serve(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- d.grpc.Serve(d.grpcLis) }()
	go func() {
		if err := d.http.Serve(d.httpLis); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	schedCtx, stopSchedules := context.WithCancel(context.Background())
	schedDone, actDone, policiesDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	if d.redlock {
		// Locks only: no schedules, queue activity or runtime policies.
		close(schedDone)
		close(actDone)
		close(policiesDone)
	} else {
		go func() {
			defer close(schedDone)
			d.services.Queues.RunSchedules(schedCtx, d.scheduleHooks())
		}()
		go func() {
			defer close(actDone)
			d.activity.Run(schedCtx, func(err error) { d.log.Debug("queue activity not recorded", "err", err) })
		}()
		go func() {
			defer close(policiesDone)
			d.services.Limiter.RunPolicies(schedCtx) // every instance's runtime policies, within a second
		}()
	}
	d.log.Info("coordd serving", "grpc", d.grpcLis.Addr().String(), "http", d.httpLis.Addr().String(), "store", d.cfg.Store)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	d.log.Info("coordd shutting down")
	d.draining.Store(true)
	d.health.Shutdown()
	d.drainNow()
	stopped := make(chan struct{})
	go func() {
		d.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(d.cfg.ShutdownTimeout):
		d.log.Warn("in-flight calls did not finish in time; closing them", "shutdown_timeout", d.cfg.ShutdownTimeout)
		d.grpc.Stop()
		<-stopped
	}
	hctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	if herr := d.http.Shutdown(hctx); herr != nil && err == nil {
		err = herr
	}
	stopSchedules()
	<-schedDone
	<-actDone
	<-policiesDone
	d.services.Wait()
	if serr := d.closeStore(); serr != nil && err == nil {
		err = serr
	}
	if d.tp != nil {
		// The last spans, within shutdown_timeout: a collector that is
		// down costs a warning, not a stuck shutdown.
		tctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
		if terr := d.tp.Shutdown(tctx); terr != nil {
			d.log.Warn("tracing: the last spans were not exported", "err", terr)
		}
		cancel()
	}
	d.log.Info("coordd stopped")
	return err
}

// scheduleHooks count what the schedules do, and log a schedule that
// fails at most once a minute (each instance tries every second).
func (d *daemon) scheduleHooks() queue.ScheduleHooks {
	var mu sync.Mutex
	logged := map[[3]string]time.Time{}
	return queue.ScheduleHooks{
		Ticked: d.metrics.ScheduleTicked,
		Missed: func(n int) {
			d.metrics.ScheduleMissed(n)
		},
		Failed: func(ns, q, name string, err error) {
			d.metrics.ScheduleFailed()
			k := [3]string{ns, q, name}
			mu.Lock()
			defer mu.Unlock()
			if time.Since(logged[k]) < time.Minute {
				return
			}
			for old, at := range logged {
				if time.Since(at) >= time.Minute {
					delete(logged, old)
				}
			}
			logged[k] = time.Now()
			d.log.Warn("a schedule's tick could not be enqueued; retrying every second", "namespace", ns, "queue", q, "schedule", name, "err", err)
		},
	}
}

// initPolicies creates the decision series of each policy at 0, so that a
// policy's first denial is a rate, not a new series. A policy a reload
// removed keeps its series until the restart.
func (d *daemon) initPolicies(policies map[string]limiter.Policy) {
	for name, p := range policies {
		algs := []string{limiter.AlgorithmName(p.Limit.Algorithm)}
		if len(p.Limits) > 0 {
			algs = algs[:0]
			for _, l := range p.Limits {
				algs = append(algs, limiter.AlgorithmName(l.Algorithm))
			}
		}
		d.metrics.InitPolicy(name, algs...)
	}
}

// buildInfo is coordd_build_info: 1, labelled with the build's version,
// VCS revision and Go version.
func buildInfo() prometheus.Gauge {
	bi := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "coordd_build_info", Help: "1, labelled with the running build's version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion},
	})
	g.Set(1)
	return g
}

// redisLog is go-redis's logger: its lines (a failed dial, a cluster
// reload) go to coordd's logger at warn, as JSON with log_format json,
// rather than as plain text on stderr.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
