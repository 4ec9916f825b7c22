package main

// --coordd-bin: coordbench starts each coordd binary in turn, on free
// loopback ports, runs the scenarios against it, and stops it (SIGINT)
// before the next one starts, so that two builds (before and after a
// change) are measured on the same machine, Redis and load generator in one
// run. Only one binary runs at a time.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// BinaryRun is one --coordd-bin binary as it ran.
type BinaryRun struct {
	Label string `json:"label"`
	Path  string `json:"path"`
	Addr  string `json:"addr"`
	PID   int    `json:"pid"`
}

// targetName is target as the report names it: with --coordd-bin, coordd's
// rows carry the label of the binary measured (coordd@before).
func (b *bench) targetName(target string) string {
	if b.binLabel != "" && target == tCoordd {
		return tCoordd + "@" + b.binLabel
	}
	return target
}

// nameTag is added to the names a scenario uses, so that two binaries of
// one run never share a lock or a semaphore.
func (b *bench) nameTag() string {
	if b.binLabel == "" {
		return ""
	}
	return ":" + b.binLabel
}

// measured says whether scenario/target has a result already.
func (b *bench) measured(scenario, target string) bool {
	for _, r := range b.results {
		if r.Scenario == scenario && r.Target == target {
			return true
		}
	}
	return false
}

// runBins runs the scenarios against each --coordd-bin binary in turn.
func (b *bench) runBins(ctx context.Context) error {
	for _, bin := range b.cfg.Bins {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := b.runBin(ctx, bin); err != nil {
			return fmt.Errorf("coordd %s (%s): %w", bin.Label, bin.Path, err)
		}
	}
	return nil
}

func (b *bench) runBin(ctx context.Context, bin binSpec) error {
	conf := ""
	if slices.Contains(b.cfg.Scenarios, "queue-partitions") {
		conf = partitionedConfig
	}
	env := b.binEnv()
	if slices.Contains(b.cfg.Scenarios, "should-rate-limit") {
		dir, err := writeEnvoyConfig()
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		env = append(env, "COORDD_RATELIMIT_ENVOY_CONFIG="+dir)
	}
	p, err := launchCoordd(ctx, bin.Path, env, conf)
	if err != nil {
		return err
	}
	defer func() {
		if err := p.stop(); err != nil {
			b.progress("coordd %s: %v", bin.Label, err)
		}
	}()
	conns, err := b.dial(p.addr, b.cfg.Conns, true)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	b.progress("coordd %s: %s (pid %d) at %s", bin.Label, bin.Path, p.pid, p.addr)
	b.report.Binaries = append(b.report.Binaries, BinaryRun{Label: bin.Label, Path: bin.Path, Addr: p.addr, PID: p.pid})
	b.cl = newClients(conns)
	// cfg.Addr too: the sessions scenario dials connections of its own.
	addr := b.cfg.Addr
	b.binLabel, b.cfg.CoorddPID, b.cfg.CoorddMetr, b.cfg.Addr = bin.Label, p.pid, p.metricsURL, p.addr
	defer func() { b.binLabel, b.cfg.CoorddPID, b.cfg.CoorddMetr, b.cfg.Addr, b.cl = "", 0, "", addr, nil }()
	return b.runScenarios(ctx)
}

// writeEnvoyConfig writes should-rate-limit's envoy ratelimit
// configuration into a new temporary directory, for coordd's
// ratelimit.envoy_config; the caller removes it.
func writeEnvoyConfig() (string, error) {
	conf, err := envoyConfig(limitSpecs["fixed_window"])
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "coordbench-envoy-config-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, envoyDomain+".yaml"), []byte(conf), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// binEnv is the environment of a --coordd-bin binary: warn-level logs
// unless coordbench's environment says otherwise, that environment, then
// the store of --store and, with --redis, its addresses, mode and key
// prefix, so that coordd uses the Redis whose counters are read and whose
// keys are cleaned up.
func (b *bench) binEnv() []string {
	env := append([]string{"COORDD_LOG_LEVEL=warn"}, os.Environ()...)
	env = append(env, "COORDD_STORE="+b.cfg.Store)
	if b.cfg.Store == "redis" && len(b.cfg.Redis) > 0 {
		env = append(env, "COORDD_REDIS_ADDRS="+strings.Join(b.cfg.Redis, ","), "COORDD_REDIS_MODE="+b.cfg.RedisMode,
			"COORDD_REDIS_KEY_PREFIX="+b.cfg.KeyPrefix)
	}
	return env
}

// coorddProc is a coordd started by coordbench.
type coorddProc struct {
	cmd        *exec.Cmd
	addr       string
	metricsURL string
	pid        int
	logPath    string
	dir        string
	exited     chan struct{}
}

// launchCoordd starts the binary at path on free loopback ports and returns
// once it answers Health/Check SERVING (at most 30 s). With conf it is
// started with that configuration file's content (a binary older than a
// key it holds refuses to start).
func launchCoordd(ctx context.Context, path string, env []string, conf string) (*coorddProc, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "coordbench-coordd-")
	if err != nil {
		return nil, err
	}
	p := &coorddProc{addr: addr, metricsURL: "http://" + httpAddr + "/metrics", logPath: filepath.Join(dir, "coordd.log"),
		dir: dir, exited: make(chan struct{})}
	logf, err := os.Create(p.logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	args := []string{"--grpc-addr", addr, "--http-addr", httpAddr}
	if conf != "" {
		file := filepath.Join(dir, "coordd.yaml")
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			_ = logf.Close()
			_ = os.RemoveAll(dir)
			return nil, err
		}
		args = append(args, "--config", file)
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		_ = logf.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p.pid = p.cmd.Process.Pid
	go func() {
		_ = p.cmd.Wait()
		_ = logf.Close()
		close(p.exited)
	}()
	if err := p.waitServing(ctx); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

func (p *coorddProc) waitServing(ctx context.Context) error {
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	return waitHealthy(ctx, conn, p.exited, p.logTail)
}

// waitHealthy waits up to 30 s for the gRPC health service on conn to
// answer SERVING; an error if the server exits first (exited closes) or
// does not, with the tail of its log.
func waitHealthy(ctx context.Context, conn *grpc.ClientConn, exited <-chan struct{}, logTail func() string) error {
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		r, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before serving:\n%s", logTail())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving after 30s (%v):\n%s", err, logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop interrupts coordd (a graceful stop), kills it if it has not exited
// after 15 s, and removes its log; an unclean exit or errors in the log
// are returned with the log's tail.
func (p *coorddProc) stop() error {
	_ = p.cmd.Process.Signal(os.Interrupt)
	var errs []error
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		errs = append(errs, errors.New("did not exit within 15s of SIGINT: killed"))
	}
	if st := p.cmd.ProcessState; st != nil && !st.Success() && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("exited with %v", st))
	}
	if b, err := os.ReadFile(p.logPath); err == nil && logHasErrors(b) {
		errs = append(errs, errors.New("logged errors"))
	}
	var err error
	if len(errs) > 0 {
		err = fmt.Errorf("%w; its log ends:\n%s", errors.Join(errs...), p.logTail())
	}
	_ = os.RemoveAll(p.dir)
	return err
}

// logHasErrors says whether a coordd log (text or JSON) has an error or a
// panic.
func logHasErrors(b []byte) bool {
	return bytes.Contains(b, []byte("panic")) || bytes.Contains(b, []byte("level=ERROR")) || bytes.Contains(b, []byte(`"level":"ERROR"`))
}

// logTail is the last 20 lines of coordd's log.
func (p *coorddProc) logTail() string { return fileTail(p.logPath) }

// fileTail is the last 20 lines of the log at path.
func fileTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// freeLoopback is a loopback address no one listens on right now.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
