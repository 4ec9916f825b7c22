package failover

// Real coordd processes, for TestCoorddRestart: the binary is built once,
// the first time a test needs it (with -race when the tests run with it,
// so that a data race in a daemon fails its exit status), and each process
// is read for its "coordd serving" log line to learn its ports.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// buildBinary builds cmd/coordd, once: TestMain starts it in the background
// when TestCoorddRestart is to run, and coorddBinary waits for it.
func buildBinary() {
	buildOnce.Do(func() {
		start := time.Now()
		defer func() { buildTook = time.Since(start) }()
		binDir, buildErr = os.MkdirTemp("", "coordd-failover-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "coordd")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/coordd/coordd/cmd/coordd")
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
}

// coorddBinary returns the path of the coordd binary, built with -race when
// the tests run with it (so that a data race in a daemon fails its exit
// status).
func coorddBinary(t *testing.T) string {
	t.Helper()
	buildBinary()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// removeBinary waits for a build in progress, and removes the binary.
func removeBinary() {
	buildOnce.Do(func() {})
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// daemon is one coordd process.
type daemon struct {
	name     string
	cmd      *exec.Cmd
	out      *lockedBuffer
	exited   chan struct{}
	waitErr  error
	killed   bool
	grpcAddr string
	httpAddr string
}

// servingLine is the daemon's "coordd serving" log line, in the text format.
var servingLine = regexp.MustCompile(`msg="coordd serving" grpc=(\S+) http=(\S+)`)

const (
	daemonStartTimeout = 20 * time.Second
	daemonStopTimeout  = 15 * time.Second
)

// startDaemon runs coordd with --store redis in cluster mode on addrs,
// listening on grpcAddr and httpAddr ("127.0.0.1:0" for ports the kernel
// chooses), and waits until its health service reports SERVING. At the end
// of the test it is sent SIGTERM and must exit 0 (unless the test killed
// it).
func startDaemon(t *testing.T, name string, addrs []string, grpcAddr, httpAddr string, env ...string) *daemon {
	t.Helper()
	return startDaemonMode(t, name, "cluster", addrs, grpcAddr, httpAddr, env...)
}

// startDaemonMode is startDaemon with redis.mode mode ("cluster",
// "standalone").
func startDaemonMode(t *testing.T, name, mode string, addrs []string, grpcAddr, httpAddr string, env ...string) *daemon {
	t.Helper()
	cmd := exec.Command(coorddBinary(t), "--store", "redis", "--grpc-addr", grpcAddr, "--http-addr", httpAddr)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORDD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		"COORDD_LOG_FORMAT=text",
		"COORDD_REDIS_MODE="+mode,
		"COORDD_REDIS_ADDRS="+strings.Join(addrs, ","),
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d := &daemon{name: name, cmd: cmd, out: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting coordd %s: %v", name, err)
	}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() { d.stop(t) })

	for end := time.Now().Add(daemonStartTimeout); ; {
		if m := servingLine.FindStringSubmatch(d.out.String()); m != nil {
			d.grpcAddr, d.httpAddr = m[1], m[2]
			break
		}
		if time.Now().After(end) {
			t.Fatalf("coordd %s did not log that it serves within %v:\n%s", name, daemonStartTimeout, d.out)
		}
		select {
		case <-d.exited:
			t.Fatalf("coordd %s exited (%v) before serving:\n%s", name, d.waitErr, d.out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	conn := dial(t, d.grpcAddr)
	hc := healthpb.NewHealthClient(conn)
	var last error
	for end := time.Now().Add(daemonStartTimeout); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if err == nil {
			err = fmt.Errorf("status %v", resp.GetStatus())
		}
		last = err
		if time.Now().After(end) {
			t.Fatalf("coordd %s: health not SERVING within %v; last: %v\n%s", name, daemonStartTimeout, last, d.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = conn.Close()
	return d
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	d.killed = true
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill coordd %s: %v", d.name, err)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("coordd %s still running 10s after SIGKILL", d.name)
	}
}

// stop sends SIGTERM and checks that the process exits 0 in time (a data
// race under -race makes it exit 66); a killed process is left alone.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if d.killed {
		return
	}
	select {
	case <-d.exited:
		t.Errorf("coordd %s exited (%v) before the end of the test", d.name, d.waitErr)
	default:
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("coordd %s: SIGTERM: %v", d.name, err)
		}
		select {
		case <-d.exited:
			if d.waitErr != nil {
				t.Errorf("coordd %s exited with %v after SIGTERM, want exit status 0", d.name, d.waitErr)
			}
		case <-time.After(daemonStopTimeout):
			t.Errorf("coordd %s did not exit within %v of SIGTERM; killing it", d.name, daemonStopTimeout)
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	}
	if t.Failed() {
		t.Logf("coordd %s output (last 60 lines):\n%s", d.name, lastLines(d.out.String(), 60))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// dial opens a client connection that ends with the test.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient(%s): %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
