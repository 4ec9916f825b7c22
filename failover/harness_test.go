package failover

// The harness: the summary table, coordd's gRPC server in process on a
// Redis store configured as cmd/coordd configures it, and helpers for
// statuses and counts. The real coordd processes of TestCoorddRestart are in
// process_test.go.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/daemontest"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store/redis"
)

// EnvSummary names a file to which TestMain appends the summary table.
const EnvSummary = "COORDD_FAILOVER_SUMMARY"

// quietRedis drops go-redis' own log lines ("failed to dial after 5
// attempts" for every connection to a killed node): the tests count the
// errors their calls get instead.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	goredis.SetLogger(quietRedis{})
	flag.Parse()
	if wantsTest("TestCoorddRestart") || wantsTest("TestReplicationLoss") {
		go daemontest.Build() // in the background, while the other tests run
	}
	code := m.Run()
	printSummary(os.Stdout)
	if path := os.Getenv(EnvSummary); path != "" {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			printSummary(f)
			_ = f.Close()
		} else {
			fmt.Fprintf(os.Stderr, "failover: %s: %v\n", EnvSummary, err)
		}
	}
	daemontest.RemoveBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "failover: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// wantsTest reports whether -test.run may select the top-level test name
// (a rough check: the pattern's first part, as a regexp).
func wantsTest(name string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(top)
	return err != nil || re.MatchString(name)
}

// The summary: one line per test (or subtest), printed by TestMain.
var (
	summaryMu sync.Mutex
	summary   [][2]string // test name, line
)

// report logs a test's one-line summary and keeps it for TestMain's table.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log("SUMMARY: " + line)
	summaryMu.Lock()
	defer summaryMu.Unlock()
	summary = append(summary, [2]string{t.Name(), line})
}

func printSummary(w io.Writer) {
	summaryMu.Lock()
	defer summaryMu.Unlock()
	if len(summary) == 0 {
		return
	}
	width := 0
	for _, s := range summary {
		width = max(width, len(s[0]))
	}
	fmt.Fprintf(w, "\n== failover summary (%s) ==\n", time.Now().Format(time.RFC3339))
	for _, s := range summary {
		fmt.Fprintf(w, "%-*s  %s\n", width, s[0], s[1])
	}
	fmt.Fprintln(w)
}

// keyPrefix is redis.key_prefix's default, which the in-process servers and
// the daemons use.
var keyPrefix = redis.DefaultConfig().Prefix

// Keys of the store's layout (internal/store/redis), in the default
// namespace: for redistest.ClusterProc.MasterFor, and to read a replica's
// copy.
func lockKey(name string) string {
	meta, _ := redis.LockKeys(keyPrefix, defaultNS(name))
	return meta
}
func queueKey(name string) string  { return redis.QueueKeys(keyPrefix, defaultNS(name)).Pending }
func dedupKey(queue string) string { return redis.QueueKeys(keyPrefix, defaultNS(queue)).Dedup }
func limiterKey(key string) string { return redis.LimiterTag(keyPrefix, defaultNS(key)) }

// defaultNS is the store's name of an object in the default namespace.
func defaultNS(name string) string { return server.DefaultNamespace + ":" + name }

// clients are gRPC clients of one coordd.
type clients struct {
	locks    coordv1.LockServiceClient
	limits   coordv1.RateLimitServiceClient
	queues   coordv1.QueueServiceClient
	sessions coordv1.SessionServiceClient
}

func newClients(conn *grpc.ClientConn) clients {
	return clients{
		locks:    coordv1.NewLockServiceClient(conn),
		limits:   coordv1.NewRateLimitServiceClient(conn),
		queues:   coordv1.NewQueueServiceClient(conn),
		sessions: coordv1.NewSessionServiceClient(conn),
	}
}

// startCoordd runs coordd's gRPC server in this process on a Redis store
// over addrs, opened as cmd/coordd opens it in cluster mode with its
// default redis section (redis.Open: a go-redis ClusterClient without
// retries, with the context's deadline on the socket and the store timeout
// as read and write timeout; one circuit breaker per node; concurrent
// scripts batched per node), with waitReplicas as redis.wait_replicas.
// Everything ends with the test.
func startCoordd(t *testing.T, addrs []string, waitReplicas int) clients {
	t.Helper()
	cfg := redis.DefaultConfig()
	cfg.Mode, cfg.Addrs, cfg.WaitReplicas = "cluster", addrs, waitReplicas
	st, err := redis.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	return newClients(servertest.Serve(t, st, clock.Real{}))
}

// codeCounts counts the status codes of failed calls, by RPC.
type codeCounts struct {
	mu sync.Mutex
	n  map[string]int // "RPC code"
}

func (c *codeCounts) add(rpc string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[rpc+" "+codeOf(err)]++
}

// codeOf is err's code, or "OVERLOADED" for a RESOURCE_EXHAUSTED refusal
// of new work while the store is slow (limits.shed_store_latency).
func codeOf(err error) string {
	st := status.Convert(err)
	if st.Code() == codes.ResourceExhausted {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "OVERLOADED" {
				return "OVERLOADED"
			}
		}
	}
	return st.Code().String()
}

func (c *codeCounts) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// String is "Lock Unavailable=12 Release Unavailable=3", or "none".
func (c *codeCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.n) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.n)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c.n[k]))
	}
	return strings.Join(parts, " ")
}

// unexpected returns the counts of codes other than those a client must
// expect while Redis fails over: UNAVAILABLE (the store could not be
// reached; outcome unknown), DEADLINE_EXCEEDED (the client's own
// deadline) and OVERLOADED (a call that would wait, refused unrun while
// the store answers slowly: limits.shed_store_latency).
func (c *codeCounts) unexpected() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		if !strings.HasSuffix(k, " "+codes.Unavailable.String()) && !strings.HasSuffix(k, " "+codes.DeadlineExceeded.String()) && !strings.HasSuffix(k, " OVERLOADED") {
			out[k] = v
		}
	}
	return out
}

// checkCodes fails the test if any call failed with a code other than
// UNAVAILABLE, DEADLINE_EXCEEDED or OVERLOADED: GUARANTEES.md promises
// UNAVAILABLE when the store is unreachable, OVERLOADED only for new work
// refused unrun, and INTERNAL only for bugs.
func checkCodes(t *testing.T, c *codeCounts, ignore ...string) {
	t.Helper()
	for k, v := range c.unexpected() {
		if !slices.Contains(ignore, k) {
			t.Errorf("%d calls failed with %s; want only UNAVAILABLE (or the client's DEADLINE_EXCEEDED, or OVERLOADED for a call that would wait) during a failover", v, k)
		}
	}
}

// failover is the timeline of one master kill: when it was killed, when
// the cluster was healthy again (its replica promoted), when the old master
// was started again, and when the cluster was healthy after that.
type failover struct {
	killed, promoted, restarted, rejoined time.Time
	master, replica                       string
}

func (f failover) String() string {
	return fmt.Sprintf("master %s killed; %s promoted after %v; old master restarted, healthy %v after its restart",
		f.master, f.replica, f.promoted.Sub(f.killed).Round(time.Millisecond), f.rejoined.Sub(f.restarted).Round(time.Millisecond))
}

// healthyTimeout bounds each wait for the private cluster to be healthy.
const healthyTimeout = 30 * time.Second

// replicationInfo returns the role and connected_slaves of a node's INFO
// replication, for the log.
func replicationInfo(addr string) string {
	c := goredis.NewClient(redistest.Options(addr))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Sprintf("INFO replication: %v", err)
	}
	var out []string
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "role:") || strings.HasPrefix(line, "connected_slaves:") {
			out = append(out, line)
		}
	}
	return strings.Join(out, " ")
}

// startCluster starts the private cluster of a test: 3 masters with 1
// replica each. Its nodes are killed when the test ends, before t.TempDir's
// removal: StartCluster registers its own end before it creates the
// directory, so Go's cleanups (last in, first out) would remove the
// directory while the nodes still run and write to it (a replica's sync
// file, nodes.conf), and fail the test with "TempDir RemoveAll cleanup:
// directory not empty".
func startCluster(t *testing.T) *redistest.ClusterProc {
	t.Helper()
	c := redistest.StartCluster(t, 3, 1)
	t.Cleanup(func() {
		for _, n := range c.Nodes() {
			n.Kill()
		}
	})
	return c
}

// killMaster kills (SIGKILL) the master that serves key, waits until its
// replica has taken over and the cluster is healthy, lets the load run for
// settle, starts the old master again (it rejoins as a replica of the
// promoted one, empty, and resyncs), and waits until the cluster is healthy
// again. It must be called from the test's goroutine.
func killMaster(t *testing.T, c *redistest.ClusterProc, key string, settle time.Duration) failover {
	t.Helper()
	var f failover
	m := c.MasterFor(key)
	f.master = m.Addr()
	f.killed = time.Now()
	m.Kill()
	c.WaitHealthy(healthyTimeout)
	f.promoted = time.Now()
	f.replica = c.MasterFor(key).Addr()
	if f.replica == f.master {
		t.Fatalf("%s still serves %s after it was killed", f.master, key)
	}
	t.Logf("master %s of %s killed; replica %s promoted, cluster healthy after %v (%s)", f.master, key, f.replica,
		ms(f.promoted.Sub(f.killed)), replicationInfo(f.replica))
	time.Sleep(settle)
	t.Logf("before the old master's restart, the promoted master %s has %s", f.replica, replicationInfo(f.replica))
	f.restarted = time.Now()
	m.Start()
	c.WaitHealthy(healthyTimeout)
	f.rejoined = time.Now()
	t.Logf("old master %s restarted; cluster healthy %v later; %s serves %s", f.master, ms(f.rejoined.Sub(f.restarted)), c.MasterFor(key).Addr(), key)
	return f
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
