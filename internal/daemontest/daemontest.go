// Package daemontest runs the coordd binary as a process, for the tests that
// need a real daemon (e2e, failover, cmd/coordd, cmd/coordctl): the binary
// is built once per test binary, each process is started in a directory and
// an environment of its own (without the caller's COORDD_* and OTEL_*
// variables, so that a developer's settings change no test), on
// the addresses it is given ("127.0.0.1:0" by default, read back from its
// "coordd serving" log line), and ended with the test.
//
// Only tests import it.
package daemontest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
	buildTook time.Duration
)

// Build builds cmd/coordd, once per test binary, with -race when the tests
// run with it (so that a data race in a daemon fails its exit status). It
// may be called in the background (a TestMain starting the build while
// other tests run): every later call waits for that one. It returns how
// long the build took.
func Build() (path string, took time.Duration, err error) {
	buildOnce.Do(func() {
		start := time.Now()
		defer func() { buildTook = time.Since(start) }()
		binDir, buildErr = os.MkdirTemp("", "coordd-daemontest-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "coordd")
		args := []string{"build", "-o", binPath}
		if Race {
			args = append(args, "-race")
		}
		args = append(args, "github.com/coordd/coordd/cmd/coordd")
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	return binPath, buildTook, buildErr
}

// Binary returns the path of the coordd binary (see Build), failing tb if
// it could not be built.
func Binary(tb testing.TB) string {
	tb.Helper()
	path, _, err := Build()
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// RemoveBinary waits for a build in progress and removes the binary: a
// TestMain calls it after m.Run.
func RemoveBinary() {
	buildOnce.Do(func() {})
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// Main is a TestMain for a package that runs daemons: it runs the tests
// with goroutine leak checks, then removes the binary and runs cleanup
// (e.g. other binaries the package built), if any. With build, the daemon
// is built first, and a failed build ends the run.
func Main(m *testing.M, build bool, cleanup func()) {
	end := func(code int) {
		RemoveBinary()
		if cleanup != nil {
			cleanup()
		}
		os.Exit(code)
	}
	if build {
		if _, _, err := Build(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			end(1)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(end))
}

// Options says how to start a daemon.
type Options struct {
	// Name labels the daemon in messages; default "coordd".
	Name string
	// Args are its flags (e.g. "--store", "memory"); Start adds --config,
	// --grpc-addr and --http-addr.
	Args []string
	// Env is added to its environment: the test's, less every COORDD_* and
	// OTEL_* variable, with COORDD_LOG_FORMAT=text (for the serving line).
	Env []string
	// Config, if not empty, is written to coordd.yaml in the daemon's
	// directory and passed as --config.
	Config string
	// GRPCAddr and HTTPAddr are its --grpc-addr and --http-addr; ""
	// is "127.0.0.1:0", ports the kernel chooses.
	GRPCAddr, HTTPAddr string
	// DefaultAddrs passes neither --grpc-addr nor --http-addr: the daemon
	// listens where its configuration (or its defaults) say.
	DefaultAddrs bool
	// WaitServing makes Start also wait until the health service reports
	// SERVING.
	WaitServing bool
	// KillAtEnd makes the end of the test kill the daemon (SIGKILL) if it
	// still runs, without checking how it exits; by default it is sent
	// SIGTERM and must exit 0, and must not have exited before (unless the
	// test stopped or killed it).
	KillAtEnd bool
	// StartTimeout bounds how long it may take to serve; default 15s.
	// StopTimeout how long it may take to exit after SIGTERM; default 15s.
	StartTimeout, StopTimeout time.Duration
	// LogLines, if > 0, is how many of its last output lines a failed test
	// logs; 0: all of them.
	LogLines int
}

// servingLine is the daemon's "coordd serving" log line, in the text format.
var servingLine = regexp.MustCompile(`msg="coordd serving" grpc=(\S+) http=(\S+)`)

// Buffer collects a process's output (or a log) while the test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Daemon is one coordd process.
type Daemon struct {
	Name string
	// GRPCAddr and HTTPAddr are where it serves, from its serving line.
	GRPCAddr, HTTPAddr string

	opts    Options
	cmd     *exec.Cmd
	out     *Buffer       // stdout and stderr
	exited  chan struct{} // closed when the process has exited
	waitErr error         // Wait's result, once exited is closed
	ended   bool          // Stop or Kill was called: the end of the test leaves it alone
}

// Start starts a daemon as opts says and waits until it logs that it
// serves (and, with opts.WaitServing, until its health service reports
// SERVING). When the test ends it is ended as opts.KillAtEnd says, and its
// output logged if the test failed.
func Start(tb testing.TB, opts Options) *Daemon {
	tb.Helper()
	if opts.Name == "" {
		opts.Name = "coordd"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 15 * time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 15 * time.Second
	}
	dir := tb.TempDir()
	args := slices.Clone(opts.Args)
	if opts.Config != "" {
		path := filepath.Join(dir, "coordd.yaml")
		if err := os.WriteFile(path, []byte(opts.Config), 0o600); err != nil {
			tb.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	if !opts.DefaultAddrs {
		args = append(args, "--grpc-addr", cmp.Or(opts.GRPCAddr, "127.0.0.1:0"), "--http-addr", cmp.Or(opts.HTTPAddr, "127.0.0.1:0"))
	}
	cmd := exec.Command(Binary(tb), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORDD_") && !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "COORDD_LOG_FORMAT=text")
	cmd.Env = append(cmd.Env, opts.Env...)
	cmd.SysProcAttr = sysProcAttr()
	d := &Daemon{Name: opts.Name, opts: opts, cmd: cmd, out: &Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting coordd %s: %v", d.Name, err)
	}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	tb.Cleanup(func() { d.end(tb) })

	for end := time.Now().Add(opts.StartTimeout); ; {
		if m := servingLine.FindStringSubmatch(d.out.String()); m != nil {
			d.GRPCAddr, d.HTTPAddr = m[1], m[2]
			break
		}
		if time.Now().After(end) {
			tb.Fatalf("coordd %s did not log that it serves within %v:\n%s", d.Name, opts.StartTimeout, d.out)
		}
		select {
		case <-d.exited:
			tb.Fatalf("coordd %s exited (%v) before serving:\n%s", d.Name, d.waitErr, d.out)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if opts.WaitServing {
		d.waitServing(tb)
	}
	return d
}

// waitServing waits until the daemon's health service reports SERVING.
func (d *Daemon) waitServing(tb testing.TB) {
	tb.Helper()
	conn, err := grpc.NewClient(d.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatalf("grpc.NewClient(%s): %v", d.GRPCAddr, err)
	}
	defer conn.Close()
	if err := WaitServing(conn, d.opts.StartTimeout, d.exited); err != nil {
		tb.Fatalf("coordd %s: %v\n%s", d.Name, err, d.out)
	}
}

// WaitServing polls the health service on conn until it reports SERVING,
// for at most within; it fails at once when exited (if not nil) is closed:
// the daemon died.
func WaitServing(conn *grpc.ClientConn, within time.Duration, exited <-chan struct{}) error {
	hc := healthpb.NewHealthClient(conn)
	var last error
	for end := time.Now().Add(within); time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("status %v", resp.GetStatus())
		}
		last = err
		select {
		case <-exited:
			return fmt.Errorf("coordd exited before serving (last health check: %v)", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("health did not report SERVING within %v; last: %v", within, last)
}

// Output is what the daemon has written so far, stdout and stderr: its log.
func (d *Daemon) Output() string { return d.out.String() }

// Exited is closed when the process has exited.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Pid is the process's ID.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Signal sends sig to the process.
func (d *Daemon) Signal(tb testing.TB, sig os.Signal) {
	tb.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("coordd %s: signal %v: %v", d.Name, sig, err)
	}
}

// WaitLog waits until the daemon's output contains substr n times.
func (d *Daemon) WaitLog(tb testing.TB, substr string, n int, within time.Duration) {
	tb.Helper()
	for end := time.Now().Add(within); strings.Count(d.out.String(), substr) < n; {
		if time.Now().After(end) {
			tb.Fatalf("coordd %s did not log %q (%d times) within %v", d.Name, substr, n, within)
		}
		select {
		case <-d.exited:
			tb.Fatalf("coordd %s exited (%v) while waiting for %q in its log", d.Name, d.waitErr, substr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and checks that the process exits 0 within
// opts.StopTimeout (a data race under -race makes it exit 66); if it does
// not, it is killed.
func (d *Daemon) Stop(tb testing.TB) {
	tb.Helper()
	d.ended = true
	select {
	case <-d.exited:
		tb.Errorf("coordd %s exited (%v) before it was stopped", d.Name, d.waitErr)
		return
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Errorf("coordd %s: SIGTERM: %v", d.Name, err)
	}
	select {
	case <-d.exited:
		if d.waitErr != nil {
			tb.Errorf("coordd %s exited with %v after SIGTERM, want exit status 0", d.Name, d.waitErr)
		}
	case <-time.After(d.opts.StopTimeout):
		tb.Errorf("coordd %s did not exit within %v of SIGTERM; killing it", d.Name, d.opts.StopTimeout)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (d *Daemon) Kill(tb testing.TB) {
	tb.Helper()
	d.ended = true
	if err := d.cmd.Process.Kill(); err != nil {
		tb.Fatalf("kill coordd %s: %v", d.Name, err)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		tb.Fatalf("coordd %s still running 10s after SIGKILL", d.Name)
	}
}

// Restart starts the daemon again, with the same options, on the addresses
// it served on (so that clients' addresses stay good), after stopping it
// if it still runs. The new process is named name.
func (d *Daemon) Restart(tb testing.TB, name string) *Daemon {
	tb.Helper()
	select {
	case <-d.exited:
		d.ended = true
	default:
		d.Stop(tb)
	}
	opts := d.opts
	opts.Name = name
	opts.GRPCAddr, opts.HTTPAddr, opts.DefaultAddrs = d.GRPCAddr, d.HTTPAddr, false
	return Start(tb, opts)
}

// end is the end of the test: see Options.KillAtEnd.
func (d *Daemon) end(tb testing.TB) {
	tb.Helper()
	switch {
	case d.opts.KillAtEnd:
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	case d.ended:
	default:
		select {
		case <-d.exited:
			tb.Errorf("coordd %s exited (%v) before the end of the test", d.Name, d.waitErr)
		default:
			d.Stop(tb)
		}
	}
	if tb.Failed() {
		out := d.out.String()
		if n := d.opts.LogLines; n > 0 {
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			out = strings.Join(lines[max(0, len(lines)-n):], "\n")
			tb.Logf("coordd %s output (last %d lines):\n%s", d.Name, n, out)
			return
		}
		tb.Logf("coordd %s output:\n%s", d.Name, out)
	}
}
