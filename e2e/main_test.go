package e2e

// The harness: TestMain builds the coordd binary once (daemontest);
// startPair runs two daemons of it (A and B) on the shared Redis Cluster
// under a key prefix of the test's own, and startMemoryInstance one on the
// embedded memory store; each listens on loopback ports the kernel chose, and is ended with SIGTERM
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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/daemontest"
	"github.com/coordd/coordd/internal/redistest"
)

func TestMain(m *testing.M) { daemontest.Main(m, true, nil) }

// instance is one running coordd process and clients of it.
type instance struct {
	*daemontest.Daemon // Name is "A", "B" or another label, for messages

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

// startCoordd starts the binary with args and env (daemontest.Start: an
// environment without the caller's COORDD_* variables, ports the kernel
// chooses), waits until it reports SERVING, and connects to it. At the end
// of the test it is sent SIGTERM and must exit 0.
func startCoordd(t *testing.T, name string, args []string, env ...string) *instance {
	t.Helper()
	return startCoorddWith(t, daemontest.Options{Name: name, Args: args, Env: env})
}

// startCoorddWith is startCoordd with more of daemontest's options (a
// configuration file).
func startCoorddWith(t *testing.T, o daemontest.Options) *instance {
	t.Helper()
	o.WaitServing = true
	d := daemontest.Start(t, o)
	in := &instance{Daemon: d}
	conn, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient(%s): %v", in.GRPCAddr, err)
	}
	t.Cleanup(func() { _ = conn.Close() }) // before the daemon's end: cleanups run last first
	in.conn = conn
	in.locks = coordv1.NewLockServiceClient(conn)
	in.sessions = coordv1.NewSessionServiceClient(conn)
	in.queues = coordv1.NewQueueServiceClient(conn)
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

// started returns how many calls of service/method the instance has
// started, from the gRPC server metrics on its /metrics.
func (in *instance) started(t *testing.T, service, method string) int {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + in.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatalf("coordd %s: GET /metrics: %v", in.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("coordd %s: reading /metrics: %v", in.Name, err)
	}
	prefix := fmt.Sprintf(`grpc_server_started_total{grpc_method=%q,grpc_service=%q,grpc_type="unary"} `, method, service)
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("coordd %s: /metrics line %q: %v", in.Name, sc.Text(), err)
			}
			return int(n)
		}
	}
	t.Fatalf("coordd %s: /metrics has no line starting with %s", in.Name, prefix)
	return 0
}

// waitStarted waits until the instance has started n calls of
// service/method, then for settle more, so that the last one has had the
// time to subscribe and make its first attempt.
func (in *instance) waitStarted(t *testing.T, service, method string, n int, settle time.Duration) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); in.started(t, service, method) < n; {
		if time.Now().After(end) {
			t.Fatalf("coordd %s did not start call %d of %s/%s within 10s", in.Name, n, service, method)
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
