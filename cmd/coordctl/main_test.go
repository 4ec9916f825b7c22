package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/internal/daemontest"
)

// coordctlBin is the binary under test, built once by TestMain; coordd is
// daemontest's.
var coordctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coordctl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	coordctlBin = filepath.Join(dir, "coordctl")
	if out, err := exec.Command("go", "build", "-o", coordctlBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build .: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	daemontest.Main(m, true, func() { os.RemoveAll(dir) })
}

// lockedBuffer collects a process's output, or a log, while the test
// reads it.
type lockedBuffer = daemontest.Buffer

// cleanEnv is the test's environment without COORDD_* and COORDCTL_*.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORDD_") && !strings.HasPrefix(kv, "COORDCTL_") {
			env = append(env, kv)
		}
	}
	return env
}

// daemon is a coordd process with the memory store.
type daemon struct {
	*daemontest.Daemon
	addr string // its gRPC address
}

// startDaemon starts coordd on loopback ports chosen by the kernel and
// waits until it logs its gRPC address. It is killed at the end of the test.
func startDaemon(t *testing.T) *daemon {
	t.Helper()
	return startDaemonConfig(t, "")
}

// startDaemonConfig is startDaemon with config (YAML) as coordd.yaml.
func startDaemonConfig(t *testing.T, config string) *daemon {
	t.Helper()
	d := daemontest.Start(t, daemontest.Options{Args: []string{"--store", "memory"}, Config: config, KillAtEnd: true, StartTimeout: 10 * time.Second})
	return &daemon{Daemon: d, addr: d.GRPCAddr}
}

// conn is a gRPC client connection to the daemon, closed at the end of
// the test.
func (d *daemon) conn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (d *daemon) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	d.Signal(t, sig)
}

// ctl describes how to run coordctl: against addr, in dir, with extra
// environment and stdin.
type ctl struct {
	t     *testing.T
	addr  string
	dir   string
	env   []string
	stdin string
}

func newCtl(t *testing.T, d *daemon) ctl {
	return ctl{t: t, addr: d.addr, dir: t.TempDir()}
}

// result is how a coordctl process ended.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout: %s\nstderr: %s", r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
}

// proc is a running coordctl.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
	start  time.Time
	exited chan struct{}
	res    result
}

// start runs coordctl with --addr and args, without waiting. The process is
// killed at the end of the test if still running.
func (c ctl) start(args ...string) *proc {
	c.t.Helper()
	if c.addr != "" {
		args = append([]string{"--addr", c.addr}, args...)
	}
	p := &proc{t: c.t, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(coordctlBin, args...)
	p.cmd.Dir = c.dir
	p.cmd.Env = append(cleanEnv(), c.env...)
	p.cmd.Stdin = strings.NewReader(c.stdin)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("starting coordctl: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.res = result{stdout: p.stdout.String(), stderr: p.stderr.String(), code: p.cmd.ProcessState.ExitCode(), took: time.Since(p.start)}
		close(p.exited)
	}()
	c.t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// run runs coordctl with --addr and args and waits for it to exit.
func (c ctl) run(args ...string) result {
	c.t.Helper()
	return c.start(args...).wait(30 * time.Second)
}

// wait waits up to within for the process to exit.
func (p *proc) wait(within time.Duration) result {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.res
	case <-time.After(within):
		p.t.Fatalf("coordctl %q still running after %v\nstderr: %s", p.cmd.Args[1:], within, p.stderr)
		return result{}
	}
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signalling coordctl: %v", err)
	}
}

// want checks a result's exit code and that its stdout and stderr contain
// the given strings.
func want(t *testing.T, r result, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stdout, stdout) || !strings.Contains(r.stderr, stderr) {
		t.Errorf("want exit %d, stdout containing %q, stderr containing %q; got %v", code, stdout, stderr, r)
	}
}

// waitFile waits until path holds a complete line and returns it, trimmed.
func waitFile(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	for end := time.Now().Add(within); ; {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(end) {
			t.Fatalf("%s was not written within %v", filepath.Base(path), within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// jsonOut parses a result's stdout as one JSON object.
func jsonOut(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%v", err, r)
	}
	return m
}

// getLock returns GetLock's answer as JSON.
func (c ctl) getLock(name string) map[string]any {
	c.t.Helper()
	r := c.run("--json", "get-lock", name)
	if r.code != 0 {
		c.t.Fatalf("get-lock %s: %v", name, r)
	}
	return jsonOut(c.t, r)
}

// alive reports whether pid is a live process (not a zombie).
func alive(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, err := os.Stat("/proc/self/stat"); err != nil {
			return syscall.Kill(pid, 0) == nil // no /proc: zombies count as alive
		}
		return false
	}
	// pid (comm) STATE ...; comm may contain spaces.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
