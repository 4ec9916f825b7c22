// Command coordbench benchmarks a running coordd through its generated Go
// client and, with --baseline, the same work done the library way against
// the same Redis in the same run: coordd's own Lua scripts sent straight to
// Redis with go-redis, and the libraries users would otherwise pick
// (redis_rate, redislock, asynq). Every run also measures an empty unary
// gRPC call, the floor no gRPC service can beat, and, with --peers (all by
// default), the services users would deploy instead, each started by
// coordbench in the scenario it compares with: etcd (lock-release),
// gubernator (allow-token_bucket), envoy ratelimit (allow-fixed_window,
// on --redis) and redsync (redlock-lock-release, on the --redlock masters,
// beside a coordd in Redlock mode that coordbench starts). See
// docs/benchmarks.md.
//
//	coordbench --addr 127.0.0.1:7070 --duration 5s
//	coordbench --baseline --redis 127.0.0.1:17001,127.0.0.1:17002 --coordd-pid $PID --json out.json
//
// It lives in a module of its own (bench/) so that the peer libraries never
// become dependencies of the daemon.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "coordd-config" {
		fmt.Print(partitionedConfig)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "envoy-config" {
		// should-rate-limit's file for coordd's ratelimit.envoy_config.
		conf, _ := envoyConfig(limitSpecs["fixed_window"])
		fmt.Print(conf)
		return
	}
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "serve-") {
		// The child modes: servers of coordbench's own (empty.go, peers.go).
		var err error
		switch os.Args[1] {
		case "serve-empty":
			err = serveEmpty(os.Stdin, os.Stdout)
		case "serve-etcd":
			err = serveEtcd(os.Args[2:], os.Stdin, os.Stdout)
		case "serve-gubernator":
			err = serveGubernator(os.Stdin, os.Stdout)
		default:
			err = errors.New("unknown child mode")
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "coordbench %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordbench:", err)
		os.Exit(1)
	}
}

// bench is one run.
type bench struct {
	cfg      *config
	out, log io.Writer
	runID    string
	seed     uint64
	cl       *clients
	rdb      redis.UniversalClient // nil without --baseline
	// With --redis, its masters' counters, read around each measurement;
	// redlock-lock-release reads the --redlock servers' instead.
	stats    func(context.Context) (redisCounters, error)
	lua      *luaScripts
	keys     keyLayout
	keyNames []string
	results  []*Result
	report   *Report
	seq      atomic.Int64 // for unique keys

	// What the run created in Redis, cleaned up at the end.
	usedLocks       []string
	usedQueues      []string
	usedAsynqQueues []string
	usedRedisKeys   []string // keys that would outlive the run: allow-hot's hour-long buckets
	contended       bool     // a contention scenario ran: its names' keys (contendedPattern) are deleted
	envoyUsed       bool     // envoy ratelimit ran on --redis: its keys (envoyKeyPrefix) are deleted

	// With --coordd-bin: the label of the binary whose turn it is.
	binLabel string
}

func run(ctx context.Context, args []string, out, log io.Writer) error {
	cfg, err := parseArgs(args, log)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, out: out, log: log, keys: keyLayout{prefix: cfg.KeyPrefix}}
	b.runID = newToken()[:8]
	b.seed, _ = strconv.ParseUint(b.runID, 16, 64)
	if cfg.Quiet {
		b.log = io.Discard
	}
	b.keyNames = make([]string, cfg.Keys)
	for i := range b.keyNames {
		b.keyNames[i] = "cb:k" + strconv.Itoa(i)
	}
	b.report = &Report{
		Tool: "coordbench", RunID: b.runID, Start: time.Now().UTC().Format(time.RFC3339), Config: cfg,
		Machine: Machine{NumCPU: runtime.NumCPU(), CPUModel: cpuModel(), GoVersion: runtime.Version(),
			GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, LoadStart: loadAvg()},
	}
	if h, err := os.Hostname(); err == nil {
		b.report.Machine.Hostname = h
	}

	if len(cfg.Bins) == 0 { // else each binary's turn dials it
		conns, err := b.dial(cfg.Addr, cfg.Conns, true)
		if err != nil {
			return err
		}
		defer closeAll(conns)
		b.cl = newClients(conns)
	}
	if cfg.CoorddPID > 0 {
		if _, err := readProc(cfg.CoorddPID); err != nil {
			return fmt.Errorf("--coordd-pid: %w", err)
		}
	}
	var rdb redis.UniversalClient // --redis: the baselines' client, and the cleanup's
	if len(cfg.Redis) > 0 {
		rdb = newRedisClient(cfg)
		defer func() { _ = rdb.Close() }()
		v, err := redisVersion(ctx, rdb)
		if err != nil {
			return fmt.Errorf("--redis: %w", err)
		}
		b.report.Machine.RedisVersion = v
		b.stats = func(ctx context.Context) (redisCounters, error) { return readRedisCounters(ctx, rdb) }
	}
	if cfg.Baseline {
		dir, err := findLuaDir(cfg.LuaDir)
		if err != nil {
			return err
		}
		cfg.LuaDir = dir
		if b.lua, err = loadLua(dir); err != nil {
			return fmt.Errorf("coordd's Lua scripts: %w", err)
		}
		if err := b.lua.preload(ctx, rdb); err != nil {
			return fmt.Errorf("loading the scripts into Redis: %w", err)
		}
		b.rdb = rdb
	}
	var runErr error
	if len(cfg.Bins) == 0 {
		b.progress("run %s: coordd at %s (%s store), %d callers, %v per target (+%v warm-up), scenarios %s",
			b.runID, cfg.Addr, cfg.Store, cfg.Concurrency, cfg.Duration, cfg.Warmup, strings.Join(cfg.Scenarios, ","))
		runErr = b.runScenarios(ctx)
	} else {
		b.progress("run %s: %d coordd binaries in turn (%s store), %d callers, %v per target (+%v warm-up), scenarios %s",
			b.runID, len(cfg.Bins), cfg.Store, cfg.Concurrency, cfg.Duration, cfg.Warmup, strings.Join(cfg.Scenarios, ","))
		runErr = b.runBins(ctx)
	}
	if cfg.has(scRedlock) && runErr == nil && ctx.Err() == nil {
		b.runRedlock(ctx)
	}
	if rdb != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := b.cleanup(cctx, rdb); err != nil {
			fmt.Fprintln(b.log, "coordbench: cleanup:", err)
		}
		cancel()
	}
	b.report.End = time.Now().UTC().Format(time.RFC3339)
	b.report.Machine.LoadEnd = loadAvg()
	b.report.Results = b.results
	b.report.analyze()
	b.report.writeText(out)
	if cfg.JSONFile != "" {
		if err := b.report.writeJSON(cfg.JSONFile); err != nil {
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	return ctx.Err()
}

func (b *bench) runScenarios(ctx context.Context) error {
	for _, s := range b.cfg.Scenarios {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case s == "empty":
			if err := b.runEmpty(ctx); err != nil {
				return err
			}
		case s == "sessions":
			if err := b.runSessions(ctx); err != nil {
				return err
			}
		case s == "allow-hot":
			b.runAllowHot(ctx)
		case s == "should-rate-limit":
			b.runShouldRateLimit(ctx)
		case strings.HasPrefix(s, "allow-"):
			b.runAllow(ctx, s, strings.TrimPrefix(s, "allow-"))
		case s == "lock-release":
			b.runLockRelease(ctx)
		case s == "lock-contention":
			b.runLockContention(ctx)
		case s == "semaphore-contention":
			b.runSemaphoreContention(ctx)
		case s == "idem":
			b.runIdem(ctx)
		case s == "enqueue":
			b.runEnqueue(ctx)
		case s == "queue-e2e":
			b.runQueueE2E(ctx)
		case s == "queue-partitions":
			b.runQueuePartitions(ctx)
		case s == scRedlock:
			// Once, after the others (run): its coordd is its own.
		}
	}
	return nil
}

func (b *bench) progress(format string, a ...any) {
	fmt.Fprintf(b.log, "coordbench: "+format+"\n", a...)
}

// snapshot is the state of the server process (if any), this process's CPU,
// the load and Redis's counters (with --redis), at one instant.
type snapshot struct {
	at       time.Time
	server   procSample
	serverOK bool
	self     time.Duration
	load     float64
	redis    *redisCounters
}

func (b *bench) snapshot(pid int) snapshot {
	s := snapshot{at: time.Now(), self: selfCPU(), load: loadAvg()}
	if pid > 0 {
		if p, err := readProc(pid); err == nil {
			s.server, s.serverOK = p, true
		}
	}
	if b.stats != nil {
		if r, err := b.stats(context.Background()); err == nil {
			s.redis = &r
		} else {
			b.progress("reading Redis's counters: %v", err)
		}
	}
	return s
}

// measure runs op for the warm-up, then measures it for --duration on
// --concurrency workers, reading pid's CPU and RSS around the measurement.
func (b *bench) measure(ctx context.Context, scenario, target string, pid int, op opFunc) *Result {
	return b.measureWith(ctx, scenario, target, pid, op, nil)
}

// measureWith is measure with reset, if not nil, called between the
// warm-up and the measurement (no op runs then).
func (b *bench) measureWith(ctx context.Context, scenario, target string, pid int, op opFunc, reset func()) *Result {
	if ctx.Err() != nil {
		return nil
	}
	b.progress("%s/%s", scenario, b.targetName(target))
	if b.cfg.Warmup > 0 {
		runPaced(ctx, b.cfg.Concurrency, b.cfg.Rate, b.cfg.Warmup, op, b.seed^1)
	}
	if reset != nil {
		reset()
	}
	before := b.snapshot(pid)
	lr := runPaced(ctx, b.cfg.Concurrency, b.cfg.Rate, b.cfg.Duration, op, b.seed)
	after := b.snapshot(pid)
	res := phaseResult(scenario, target, lr)
	res.setProc(before, after)
	b.add(res)
	return res
}

func (b *bench) add(r *Result) {
	r.Target = b.targetName(r.Target)
	for _, p := range r.Phases {
		p.Target = b.targetName(p.Target)
	}
	b.results = append(b.results, r)
	if r.Failed != "" {
		fmt.Fprintf(b.log, "  %s/%s: failed: %s\n", r.Scenario, r.Target, r.Failed)
		return
	}
	line := fmt.Sprintf("  %s/%s: %.0f %s/s", r.Scenario, r.Target, r.OpsPerSec, r.unit())
	if r.Latency != nil {
		line += fmt.Sprintf(", p50 %s p99 %s", fmtUs(r.Latency.P50), fmtUs(r.Latency.P99))
	}
	if r.Errors > 0 {
		line += fmt.Sprintf(", %d errors (first: %s)", r.Errors, r.FirstError)
	}
	fmt.Fprintln(b.log, line)
}

// dial opens n connections to addr; with auth, each call carries the API
// key.
func (b *bench) dial(addr string, n int, auth bool) ([]*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if auth && b.cfg.APIKey != "" {
		bearer := "Bearer " + b.cfg.APIKey
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", bearer), method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, "authorization", bearer), desc, cc, method, opts...)
			}))
	}
	conns := make([]*grpc.ClientConn, 0, n)
	for range n {
		c, err := grpc.NewClient(addr, opts...)
		if err != nil {
			closeAll(conns)
			return nil, err
		}
		c.Connect()
		conns = append(conns, c)
	}
	return conns, nil
}

func closeAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

func redisVersion(ctx context.Context, c redis.UniversalClient) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", nil
}
