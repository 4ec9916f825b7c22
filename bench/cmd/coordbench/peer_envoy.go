package main

// The envoy-rl peer of allow-fixed_window: envoyproxy/ratelimit's server
// (the service Envoy's global rate limit filter calls), at the pinned
// version envoyRatelimitVersion, built by `go install` from the Go module
// proxy into a temporary directory (or --envoy-ratelimit-bin), and run as a
// child process on free loopback ports against the Redis of --redis
// (REDIS_TYPE single, or cluster with --redis-mode cluster), keys under
// CACHE_KEY_PREFIX KEYPREFIX:envoy-rl:RUNID:, deleted at the end. Its
// configuration, a file in RUNTIME_ROOT: domain coordbench, one descriptor
// key "key" without a value (each value its own counter), the scenario's
// limit per its period (1,000,000 a second). Everything else is its
// default (REDIS_POOL_SIZE 10, no pipeline window, no local cache) but
// USE_STATSD=false (stats kept, logged to its stdout every 10 s); the
// environment of coordbench passes through, so that its other settings can
// be tried. Per op one envoy.service.ratelimit.v3.RateLimitService/
// ShouldRateLimit with that domain and the descriptor key=KEY, KEY the key
// coordd's scenario picks, through the gRPC client options coordd's calls
// use. It answers from Redis: a pipeline of INCRBY and EXPIRE per call.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// The envoy ratelimit server measured: its module, the package of its
// binary, and the pinned version (a pseudo-version: the project tags no
// release of its Go module since v1.4.0).
const (
	envoyRatelimitModule  = "github.com/envoyproxy/ratelimit"
	envoyRatelimitPkg     = envoyRatelimitModule + "/src/service_cmd"
	envoyRatelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"
	envoyDomain           = "coordbench"
)

// envoyUnit is the ratelimit config's unit of a period, if it has one.
func envoyUnit(periodMicros int64) (string, bool) {
	switch time.Duration(periodMicros) * time.Microsecond {
	case time.Second:
		return "second", true
	case time.Minute:
		return "minute", true
	case time.Hour:
		return "hour", true
	case 24 * time.Hour:
		return "day", true
	}
	return "", false
}

// envoyConfig is the ratelimit configuration of spec.
func envoyConfig(spec limitSpec) (string, error) {
	unit, ok := envoyUnit(spec.periodMicros)
	if !ok {
		return "", fmt.Errorf("envoy ratelimit has no unit of %v", time.Duration(spec.periodMicros)*time.Microsecond)
	}
	return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: key\n    rate_limit:\n      unit: %s\n      requests_per_unit: %d\n",
		envoyDomain, unit, spec.limit), nil
}

// envoyKeyPrefix is CACHE_KEY_PREFIX: every key the server writes starts
// with it.
func (b *bench) envoyKeyPrefix() string {
	return b.cfg.KeyPrefix + ":envoy-rl:" + b.runID + ":"
}

// buildEnvoyRatelimit builds the pinned server into dir with go install
// (the module's own go.mod and go.sum; the Go module proxy of the
// environment) and returns the binary's path.
func buildEnvoyRatelimit(ctx context.Context, dir string) (string, error) {
	return goInstallEnvoy(ctx, dir, envoyRatelimitPkg)
}

// goInstallEnvoy builds a command of the pinned envoy ratelimit module into
// dir with go install, and returns the binary's path.
func goInstallEnvoy(ctx context.Context, dir, pkg string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", pkg+"@"+envoyRatelimitVersion)
	// GOFLAGS=-mod=... is refused by go install PKG@VERSION; GOWORK would
	// be ignored anyway.
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", pkg, envoyRatelimitVersion, err, strings.TrimSpace(out.String()))
	}
	return filepath.Join(dir, filepath.Base(pkg)), nil
}

// envoyProc is a running envoy ratelimit server.
type envoyProc struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
	exited  chan struct{}
}

func (p *envoyProc) logTail() string { return fileTail(p.logPath) }

// stop interrupts the server, and kills it if it has not exited after 10 s.
func (p *envoyProc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// startEnvoyRatelimit runs bin with the configuration of spec in dir, and
// returns once it answers its gRPC health check SERVING (at most 30 s).
func (b *bench) startEnvoyRatelimit(ctx context.Context, bin, dir string, spec limitSpec) (*envoyProc, error) {
	conf, err := envoyConfig(spec)
	if err != nil {
		return nil, err
	}
	return b.startEnvoyConf(ctx, bin, dir, conf)
}

// startEnvoyConf runs bin with the configuration file conf in dir, and
// returns once it answers its gRPC health check SERVING (at most 30 s).
func (b *bench) startEnvoyConf(ctx context.Context, bin, dir, conf string) (*envoyProc, error) {
	confDir := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(confDir, "coordbench.yaml"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		a, err := freeLoopback()
		if err != nil {
			return nil, err
		}
		_, port, _ := strings.Cut(a, ":")
		ports[i], _ = strconv.Atoi(port)
	}
	redisType := "single"
	if b.cfg.RedisMode == "cluster" {
		redisType = "cluster"
	}
	p := &envoyProc{addr: "127.0.0.1:" + strconv.Itoa(ports[0]), logPath: filepath.Join(dir, "ratelimit.log"), exited: make(chan struct{})}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(ports[0]),
		"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[2]),
		"LOG_LEVEL=error", "USE_STATSD=false",
		"RUNTIME_ROOT="+filepath.Join(dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE="+redisType, "REDIS_URL="+strings.Join(b.cfg.Redis, ","),
		"CACHE_KEY_PREFIX="+b.envoyKeyPrefix(),
	)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		_ = logf.Close()
		close(p.exited)
	}()
	conns, err := b.dial(p.addr, 1, false)
	if err != nil {
		p.stop()
		return nil, err
	}
	defer closeAll(conns)
	if err := waitHealthy(ctx, conns[0], p.exited, p.logTail); err != nil {
		p.stop() // returns at once if it exited
		return nil, err
	}
	return p, nil
}

// runEnvoy measures allow-fixed_window on envoy ratelimit.
func (b *bench) runEnvoy(ctx context.Context, scenario string, spec limitSpec) error {
	dir, err := os.MkdirTemp("", "coordbench-envoy-rl-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := b.cfg.EnvoyBin
	if bin == "" {
		b.progress("building envoy ratelimit %s (go install; a first build takes minutes)", envoyRatelimitVersion)
		if bin, err = buildEnvoyRatelimit(ctx, dir); err != nil {
			return err
		}
	}
	b.envoyUsed = true // from now on its keys may be in Redis
	p, err := b.startEnvoyRatelimit(ctx, bin, dir, spec)
	if err != nil {
		return err
	}
	defer p.stop()
	conns, err := b.dial(p.addr, b.cfg.Conns, false)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	cls := make([]rlsv3.RateLimitServiceClient, len(conns))
	for i, c := range conns {
		cls[i] = rlsv3.NewRateLimitServiceClient(c)
	}
	return b.measureRLS(ctx, scenario, tEnvoy, p.cmd.Process.Pid, cls, p.logTail, spec)
}

// envoyRequest is the ShouldRateLimit of an op on key: domain coordbench,
// the descriptor key=KEY, one hit.
func envoyRequest(key string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: envoyDomain, HitsAddend: 1, Descriptors: []*commonrl.RateLimitDescriptor{{
		Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: "key", Value: key}},
	}}}
}

// measureRLS measures ShouldRateLimit on cls (envoy ratelimit's server, or
// coordd's) as target, after one call that shows the configuration of spec
// in force (a descriptor no configuration matches is answered OK,
// unlimited, without touching Redis); logTail tells why not.
func (b *bench) measureRLS(ctx context.Context, scenario, target string, pid int, cls []rlsv3.RateLimitServiceClient, logTail func() string, spec limitSpec) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	r, err := cls[0].ShouldRateLimit(cctx, envoyRequest("cb:check"))
	cancel()
	if err != nil {
		return err
	}
	if st := r.GetStatuses(); len(st) != 1 || st[0].GetCurrentLimit().GetRequestsPerUnit() != uint32(spec.limit) {
		return fmt.Errorf("the configuration is not in force: first ShouldRateLimit answered %v; %s", r, logTail())
	}
	b.measure(ctx, scenario, target, pid, func(ctx context.Context, w *worker) error {
		r, err := cls[w.id%len(cls)].ShouldRateLimit(ctx, envoyRequest(b.key(w)))
		if err != nil {
			return err
		}
		switch r.GetOverallCode() {
		case rlsv3.RateLimitResponse_OK:
		case rlsv3.RateLimitResponse_OVER_LIMIT:
			w.misses++
		default:
			return errors.New("ShouldRateLimit: " + r.GetOverallCode().String())
		}
		return nil
	})
	return nil
}

// runShouldRateLimit measures should-rate-limit: Envoy's ShouldRateLimit
// on envoy ratelimit's server (the peer, on --redis) and on coordd (whose
// ratelimit.envoy_config must hold envoyConfig of the fixed window: with
// --coordd-bin coordbench gives it one), the same requests.
func (b *bench) runShouldRateLimit(ctx context.Context) {
	const scenario = "should-rate-limit"
	spec := limitSpecs["fixed_window"]
	switch {
	case !slices.Contains(b.cfg.Peers, tEnvoy) || b.measured(scenario, tEnvoy):
	case len(b.cfg.Redis) == 0:
		b.peerSkipped(scenario, tEnvoy, "needs --redis (the Redis it keeps its counters in: coordd's)")
	default:
		if err := b.runEnvoy(ctx, scenario, spec); err != nil {
			b.peerFailed(scenario, tEnvoy, err)
		}
	}
	if ctx.Err() != nil {
		return
	}
	conf, _ := envoyConfig(spec)
	logTail := func() string {
		return "coordd needs ratelimit.envoy_config naming a directory that holds this file:\n" + conf
	}
	if err := b.measureRLS(ctx, scenario, tCoordd, b.cfg.CoorddPID, b.cl.rls, logTail, spec); err != nil {
		b.add(&Result{Scenario: scenario, Target: b.targetName(tCoordd), Failed: err.Error()})
	}
}
