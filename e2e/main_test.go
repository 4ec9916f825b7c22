package e2e

// The harness: TestMain builds the coordd binary once; startPair runs two
// daemons of it (A and B) on the shared Redis Cluster under a key prefix of
// the test's own, and startMemoryInstance one on the embedded memory store;
// each listens on loopback ports the kernel chose, and is ended with SIGTERM
// when the test ends, failing it if it does not exit 0.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/redistest"
)

// coorddBin is the binary TestMain built.
var coorddBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coordd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	coorddBin = filepath.Join(dir, "coordd")
	args := []string{"build", "-o", coorddBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/coordd/coordd/cmd/coordd")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n%s", strings.Join(args, " "), err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// startTimeout bounds how long a daemon may take to serve; stopTimeout how
// long it may take to exit after SIGTERM (its shutdown_timeout is 10s).
const (
	startTimeout = 15 * time.Second
	stopTimeout  = 15 * time.Second
)

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

// instance is one running coordd process and clients of it.
type instance struct {
	name     string // "A", "B" or another label, for messages
	cmd      *exec.Cmd
	out      *lockedBuffer // stdout and stderr
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // Wait's result, once exited is closed
	grpcAddr string
	httpAddr string

	conn     *grpc.ClientConn
	locks    coordv1.LockServiceClient
	sessions coordv1.SessionServiceClient
	queues   coordv1.QueueServiceClient
}

// startPair starts instances A and B on the shared Redis Cluster with one
// random key prefix, so that they share state with each other and with no
// other test.
func startPair(t *testing.T) (a, b *instance) {
	t.Helper()
	addrs := redistest.Cluster(t)
	prefix := "e2e-" + randomHex(t, 8)
	t.Logf("redis.key_prefix %s on %s", prefix, strings.Join(addrs, ","))
	return startInstance(t, "A", addrs, prefix), startInstance(t, "B", addrs, prefix)
}

// servingLine is the daemon's "coordd serving" log line, in the text format.
var servingLine = regexp.MustCompile(`msg="coordd serving" grpc=(\S+) http=(\S+)`)

// startInstance starts the binary with --store redis in cluster mode under
// key prefix (see startCoordd).
func startInstance(t *testing.T, name string, addrs []string, prefix string) *instance {
	t.Helper()
	return startCoordd(t, name, []string{"--store", "redis"},
		"COORDD_REDIS_ADDRS="+strings.Join(addrs, ","),
		"COORDD_REDIS_MODE=cluster",
		"COORDD_REDIS_KEY_PREFIX="+prefix,
	)
}

// startMemoryInstance starts the binary with --store memory (see
// startCoordd): a daemon of its own, which needs no Redis.
func startMemoryInstance(t *testing.T, name string) *instance {
	t.Helper()
	return startCoordd(t, name, []string{"--store", "memory"})
}

// startCoordd starts the binary with args and env, in an environment without
// the caller's COORDD_* variables, on ports the kernel chooses (read back
// from its log), and waits until it reports SERVING. At the end of the test
// it sends SIGTERM and checks that the process exits 0.
func startCoordd(t *testing.T, name string, args []string, env ...string) *instance {
	t.Helper()
	cmd := exec.Command(coorddBin, append(slices.Clip(args), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(environWithout("COORDD_"), env...)
	cmd.Env = append(cmd.Env, "COORDD_LOG_FORMAT=text")
	in := &instance{name: name, cmd: cmd, out: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = in.out, in.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting coordd %s: %v", name, err)
	}
	go func() {
		in.waitErr = cmd.Wait()
		close(in.exited)
	}()
	t.Cleanup(func() { in.stop(t) })

	for end := time.Now().Add(startTimeout); ; {
		if m := servingLine.FindStringSubmatch(in.out.String()); m != nil {
			in.grpcAddr, in.httpAddr = m[1], m[2]
			break
		}
		if time.Now().After(end) {
			t.Fatalf("coordd %s did not log that it serves within %v:\n%s", name, startTimeout, in.out)
		}
		select {
		case <-in.exited:
			t.Fatalf("coordd %s exited (%v) before serving:\n%s", name, in.waitErr, in.out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	conn, err := grpc.NewClient(in.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient(%s): %v", in.grpcAddr, err)
	}
	t.Cleanup(func() { _ = conn.Close() }) // before stop: cleanups run last first
	in.conn = conn
	in.locks = coordv1.NewLockServiceClient(conn)
	in.sessions = coordv1.NewSessionServiceClient(conn)
	in.queues = coordv1.NewQueueServiceClient(conn)
	in.waitServing(t)
	return in
}

// environWithout returns the environment less the variables whose names
// start with prefix.
func environWithout(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			env = append(env, kv)
		}
	}
	return env
}

// waitServing polls the health service until it reports SERVING.
func (in *instance) waitServing(t *testing.T) {
	t.Helper()
	hc := healthpb.NewHealthClient(in.conn)
	var last error
	for end := time.Now().Add(startTimeout); time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if err == nil {
			err = fmt.Errorf("status %v", resp.GetStatus())
		}
		last = err
		select {
		case <-in.exited:
			t.Fatalf("coordd %s exited (%v) before serving:\n%s", in.name, in.waitErr, in.out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("coordd %s: health did not report SERVING within %v; last: %v\n%s", in.name, startTimeout, last, in.out)
}

// stop ends the process with SIGTERM and checks that it exits 0 in time; it
// logs the process's output if anything failed.
func (in *instance) stop(t *testing.T) {
	t.Helper()
	select {
	case <-in.exited:
		t.Errorf("coordd %s exited (%v) before the end of the test", in.name, in.waitErr)
	default:
		if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("coordd %s: SIGTERM: %v", in.name, err)
		}
		select {
		case <-in.exited:
			if in.waitErr != nil {
				t.Errorf("coordd %s exited with %v after SIGTERM, want exit status 0", in.name, in.waitErr)
			}
		case <-time.After(stopTimeout):
			t.Errorf("coordd %s did not exit within %v of SIGTERM; killing it", in.name, stopTimeout)
			_ = in.cmd.Process.Kill()
			<-in.exited
		}
	}
	if t.Failed() {
		t.Logf("coordd %s output:\n%s", in.name, in.out)
	}
}

// started returns how many calls of service/method the instance has
// started, from the gRPC server metrics on its /metrics.
func (in *instance) started(t *testing.T, service, method string) int {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + in.httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("coordd %s: GET /metrics: %v", in.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("coordd %s: reading /metrics: %v", in.name, err)
	}
	prefix := fmt.Sprintf(`grpc_server_started_total{grpc_method=%q,grpc_service=%q,grpc_type="unary"} `, method, service)
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("coordd %s: /metrics line %q: %v", in.name, sc.Text(), err)
			}
			return int(n)
		}
	}
	t.Fatalf("coordd %s: /metrics has no line starting with %s", in.name, prefix)
	return 0
}

// waitStarted waits until the instance has started n calls of
// service/method, then for settle more, so that the last one has had the
// time to subscribe and make its first attempt.
func (in *instance) waitStarted(t *testing.T, service, method string, n int, settle time.Duration) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); in.started(t, service, method) < n; {
		if time.Now().After(end) {
			t.Fatalf("coordd %s did not start call %d of %s/%s within 10s", in.name, n, service, method)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(settle)
}

// testContext returns a context for the calls of a test, which bounds how
// long a hung call can hold it up.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// errorReason returns the reason of err's google.rpc.ErrorInfo, if any.
func errorReason(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// quantiles returns the nearest-rank median, 90th percentile and maximum.
func quantiles(ds []time.Duration) (p50, p90, maxD time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p int) time.Duration { return s[max((p*len(s)+99)/100, 1)-1] }
	return rank(50), rank(90), s[len(s)-1]
}
