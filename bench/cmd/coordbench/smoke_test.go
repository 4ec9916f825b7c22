package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/coordd/coordd/internal/redistest"
)

// The smoke tests build coordd and coordbench (with the race detector when
// the test has it, so that the packages compiled by the repository's
// race-enabled test runs are reused) and run every scenario for 0.2 s at
// low concurrency against a coordd of their own: on the memory store, and,
// with COORDD_TEST_REDIS_CLUSTER (or COORDD_TEST_REDIS) set — the shared
// instances of scripts/redis-cluster.sh — on that Redis with a key prefix of
// its own and --baseline against it. The two run side by side; neither needs
// a coordd already running. The peers run too: etcd, etcd-fsync and
// gubernator in the memory run, envoy ratelimit (built once with go
// install, as coordbench builds it) in the Redis run.

var (
	buildOnce          sync.Once
	coorddBin, cbBin   string
	buildErr           error
	buildDir           string
	repoRoot, _        = filepath.Abs("../../..")
	smokeScenarioFlags = []string{
		"--duration", "200ms", "--warmup", "50ms", "--concurrency", "4", "--keys", "200",
		"--sessions", "40", "--locks-per-session", "2", "--session-ttl", "3s",
		"--queue-messages", "400", "--queues", "4", "--quiet",
	}
)

func build(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "coordbench-smoke-")
		if buildErr != nil {
			return
		}
		coorddBin, cbBin = filepath.Join(buildDir, "coordd"), filepath.Join(buildDir, "coordbench")
		for _, b := range []struct{ dir, out, pkg string }{
			{repoRoot, coorddBin, "./cmd/coordd"}, // in the root module: its dependencies are not the bench module's
			{".", cbBin, "."},
		} {
			args := []string{"build", "-o", b.out}
			if raceEnabled {
				args = append(args, "-race")
			}
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Dir = b.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

var (
	envoyOnce sync.Once
	envoyBin  string
	envoyErr  error
)

// buildEnvoy builds the pinned envoy ratelimit server into the build
// directory, once.
func buildEnvoy(t *testing.T) string {
	t.Helper()
	build(t)
	envoyOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		envoyBin, envoyErr = buildEnvoyRatelimit(ctx, buildDir)
	})
	if envoyErr != nil {
		t.Fatal(envoyErr)
	}
	return envoyBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// startCoordd runs the built coordd with env added and returns its gRPC
// address, PID and /metrics URL once it serves.
func startCoordd(t *testing.T, env ...string) (addr string, pid int, metricsURL string) {
	t.Helper()
	addr = freeAddr(t)
	httpAddr := freeAddr(t)
	var logs bytes.Buffer
	args := []string{"--grpc-addr", addr, "--http-addr", httpAddr}
	envoyDir, err := writeEnvoyConfig() // should-rate-limit's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(envoyDir) })
	vars := []string{"COORDD_LOG_LEVEL=warn", "COORDD_RATELIMIT_ENVOY_CONFIG=" + envoyDir}
	for _, e := range env { // "--flag=value" entries are arguments
		if strings.HasPrefix(e, "--") {
			args = append(args, e)
		} else {
			vars = append(vars, e)
		}
	}
	cmd := exec.Command(coorddBin, args...)
	cmd.Env = append(os.Environ(), vars...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("coordd's output:\n%s", logs.String())
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return addr, cmd.Process.Pid, "http://" + httpAddr + "/metrics"
		}
		select {
		case <-exited:
			t.Fatalf("coordd exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordd does not serve: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runBench runs the built coordbench and returns its report and table.
func runBench(t *testing.T, args ...string) (*Report, string) {
	t.Helper()
	jsonFile := filepath.Join(t.TempDir(), "out.json")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cbBin, append(args, "--json", jsonFile)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("coordbench %s: %v\n%s\n%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("the JSON output: %v", err)
	}
	return &rep, stdout.String()
}

// checkResults checks that every wanted scenario/target ran, did work and
// had no errors.
func checkResults(t *testing.T, rep *Report, table string, want map[string][]string) {
	t.Helper()
	for scenario, targets := range want {
		for _, target := range targets {
			r := rep.find(scenario, target)
			if r == nil {
				t.Errorf("%s/%s: not in the results", scenario, target)
				continue
			}
			if r.Ops == 0 || r.OpsPerSec <= 0 || r.Errors != 0 {
				t.Errorf("%s/%s: %d ops, %.0f/s, %d errors (%s)", scenario, target, r.Ops, r.OpsPerSec, r.Errors, r.FirstError)
			}
			if r.Latency == nil && scenario != "queue-e2e" && scenario != "queue-partitions" {
				t.Errorf("%s/%s: no latency", scenario, target)
			}
			if r.Latency != nil && (r.Latency.P50 <= 0 || r.Latency.P99 < r.Latency.P50 || r.Latency.P999 < r.Latency.P99) {
				t.Errorf("%s/%s: latency out of order: %+v", scenario, target, r.Latency)
			}
			if !strings.Contains(table, scenario) {
				t.Errorf("the table lacks %s", scenario)
			}
		}
	}
	if !strings.Contains(table, "ratios") || !strings.Contains(table, "goals (speed)") {
		t.Errorf("the table lacks ratios or goals:\n%s", table)
	}
}

func TestSmokeMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs coordd")
	}
	t.Parallel() // the scenarios run for a fixed time: the two runs overlap
	build(t)
	addr, pid, metricsURL := startCoordd(t)
	rep, table := runBench(t, append([]string{"--addr", addr, "--coordd-pid", strconv.Itoa(pid), "--coordd-metrics", metricsURL}, smokeScenarioFlags...)...)
	t.Log("\n" + table)
	want := map[string][]string{"empty": {tCoordd, tBare}}
	for _, s := range rep.Config.Scenarios[1:] { // all: every scenario but redlock-lock-release (no --redlock)
		want[s] = []string{tCoordd}
	}
	if len(want) != len(allScenarios)-1 || want[scRedlock] != nil {
		t.Errorf("scenarios run %v, want all but %s", rep.Config.Scenarios, scRedlock)
	}
	// The peers that need no Redis; envoy ratelimit is skipped, and says why.
	want["lock-release"] = []string{tEtcd, tEtcdFsync, tCoordd}
	want["allow-token_bucket"] = []string{tGubernator, tCoordd}
	checkResults(t, rep, table, want)
	if !slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.HasPrefix(s, "allow-fixed_window/envoy-rl: needs --redis") }) {
		t.Errorf("envoy-rl without --redis: not skipped: %q", rep.Skipped)
	}
	for _, vs := range []string{tEtcd, tEtcdFsync, tGubernator} {
		if r := rep.find(peerScenario[vs], vs); r == nil || r.ServerCPUPerOpUs <= 0 {
			t.Errorf("%s: its server process not read: %+v", vs, r)
		}
		if r := rep.ratioOf(peerScenario[vs], vs); r == nil || r.Ops == 0 || r.CPU == 0 {
			t.Errorf("coordd ÷ %s: %+v", vs, r)
		}
	}
	if r := rep.find("allow-token_bucket", tCoordd); r == nil || r.ServerRSSAfter <= 0 {
		t.Errorf("coordd's process not read with --coordd-pid: %+v", r)
	}
	if r := rep.find("sessions", tCoordd); r == nil || r.Sessions == nil || r.Sessions.Open != 40 || r.Sessions.RSSPeak == 0 {
		t.Errorf("sessions: %+v", r)
	} else if s := r.Sessions; s.RuntimeOpen == nil || s.RuntimeOpen.Sessions != 40 || s.RuntimeClosed == nil || s.RuntimeClosed.Sessions != 0 {
		t.Errorf("sessions: coordd's runtime before %+v, open %+v, closed %+v", s.RuntimeBefore, s.RuntimeOpen, s.RuntimeClosed)
	}
	if r := rep.find("queue-e2e", tCoordd); r == nil || r.Ops != 400 || len(r.Phases) != 2 {
		t.Errorf("queue-e2e: %+v", r)
	}
	if rep.ratioOf("lock-release", "floor/2") == nil || rep.ratioOf("allow-token_bucket", "floor") == nil {
		t.Errorf("ratios to the floor missing: %+v", rep.Ratios)
	}
}

func TestSmokeRedisBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs coordd")
	}
	addrs, mode := os.Getenv("COORDD_TEST_REDIS_CLUSTER"), "cluster"
	if addrs == "" {
		addrs, mode = os.Getenv("COORDD_TEST_REDIS"), "standalone"
	}
	if addrs == "" {
		t.Skip("no Redis: set COORDD_TEST_REDIS_CLUSTER or COORDD_TEST_REDIS (eval \"$(scripts/redis-cluster.sh start)\")")
	}
	t.Parallel()
	build(t)
	envoy := buildEnvoy(t)
	prefix := "cbtest" + newToken()[:8]
	t.Cleanup(func() { deletePrefix(t, addrs, mode, prefix) })
	conf := filepath.Join(t.TempDir(), "coordd.yaml")
	if err := os.WriteFile(conf, []byte(partitionedConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, pid, _ := startCoordd(t, "COORDD_STORE=redis", "COORDD_REDIS_ADDRS="+addrs, "COORDD_REDIS_MODE="+mode,
		"COORDD_REDIS_KEY_PREFIX="+prefix, "--config="+conf)
	rep, table := runBench(t, append([]string{"--addr", addr, "--coordd-pid", strconv.Itoa(pid), "--baseline",
		"--redis", addrs, "--redis-mode", mode, "--key-prefix", prefix, "--peers", "envoy-rl", "--envoy-ratelimit-bin", envoy,
		"--scenarios", "allow-fixed_window,allow-token_bucket,allow-sliding_log,allow-hot,should-rate-limit,lock-release,lock-contention,semaphore-contention,idem,enqueue,queue-e2e,queue-partitions,sessions"}, smokeScenarioFlags...)...)
	t.Log("\n" + table)
	checkResults(t, rep, table, map[string][]string{
		"empty":                {tCoordd, tBare},
		"allow-fixed_window":   {tDirect, tEnvoy, tCoordd},
		"allow-token_bucket":   {tDirect, tRedisRate, tCoordd},
		"allow-sliding_log":    {tDirect, tCoordd},
		"allow-hot":            {tDirect, tRedisRate, tCoordd},
		"should-rate-limit":    {tEnvoy, tCoordd},
		"lock-release":         {tDirect, tRedislock, tCoordd},
		"lock-contention":      {tCoordd},
		"semaphore-contention": {tCoordd},
		"idem":                 {tDirect, tCoordd},
		"enqueue":              {tDirect, tAsynq, tCoordd},
		"queue-e2e":            {tDirect, tAsynq, tCoordd},
		"queue-partitions":     {tCoordd},
		"sessions":             {tCoordd},
	})
	if r := rep.find("queue-partitions", tCoordd); mode == "cluster" && (r == nil || r.Redis == nil || len(r.Redis.CPUShare) != 3) {
		t.Errorf("queue-partitions: want each of the 3 masters' share of Redis CPU: %+v", r)
	}
	if rep.ratioOf("allow-token_bucket", tRedisRate) == nil || rep.ratioOf("queue-e2e", tAsynq) == nil {
		t.Errorf("baseline ratios missing: %+v", rep.Ratios)
	}
	if rep.Machine.RedisVersion == "" {
		t.Error("no Redis version in the report")
	}
	// Every Allow runs one script (none is denied): Redis's counters say so.
	if r := rep.find("allow-token_bucket", tCoordd); r == nil || r.Redis == nil || r.Redis.ScriptsPerOp < 0.9 || r.Redis.BytesInPerOp <= 0 {
		t.Errorf("allow-token_bucket/coordd: Redis per op %+v", r.Redis)
	}
	if !strings.Contains(table, "Redis per op") {
		t.Error("the table lacks Redis's cost per op")
	}
	// Every grant runs at least its acquire's script; the contended names'
	// keys are gone after the run.
	for _, s := range []string{"lock-contention", "semaphore-contention"} {
		if r := rep.find(s, tCoordd); r == nil || r.Contention == nil || r.Contention.ScriptsPerGrant < 0.9 {
			t.Errorf("%s/coordd: %+v", s, r)
		}
	}
	// envoy ratelimit: two commands an op (INCRBY, EXPIRE), its keys gone.
	if r := rep.find("allow-fixed_window", tEnvoy); r == nil || r.Redis == nil || r.Redis.CommandsPerOp < 1.9 || r.ServerCPUPerOpUs <= 0 {
		t.Errorf("allow-fixed_window/envoy-rl: %+v", r)
	}
	for _, pattern := range []string{prefix + ":{l:*:cb:contended:*", prefix + ":{m:*:cb:sem:*", prefix + ":envoy-rl:*"} {
		if n := countKeys(t, addrs, mode, pattern); n != 0 {
			t.Errorf("%d keys matching %s left after the run", n, pattern)
		}
	}
}

// countKeys counts the keys matching pattern on every master.
func countKeys(t *testing.T, addrs, mode, pattern string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	n := 0
	count := func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, pattern).Result()
		mu.Lock()
		n += len(keys)
		mu.Unlock()
		return err
	}
	var err error
	if mode == "cluster" {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
		defer c.Close()
		err = c.ForEachMaster(ctx, count)
	} else {
		c := redis.NewClient(&redis.Options{Addr: addrs})
		defer c.Close()
		err = count(ctx, c)
	}
	if err != nil {
		t.Fatalf("counting keys: %v", err)
	}
	return n
}

// deletePrefix deletes every key under prefix (coordd's, and the direct
// baseline's) from every master.
func deletePrefix(t *testing.T, addrs, mode, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	del := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for it.Next(ctx) {
			if err := c.Del(ctx, it.Val()).Err(); err != nil {
				return err
			}
		}
		return it.Err()
	}
	var err error
	if mode == "cluster" {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
		defer c.Close()
		err = c.ForEachMaster(ctx, del)
	} else {
		c := redis.NewClient(&redis.Options{Addr: addrs})
		defer c.Close()
		err = del(ctx, c)
	}
	if err != nil {
		t.Logf("deleting the test's keys: %v", err)
	}
}

// --coordd-bin: coordbench starts the binaries itself, one after the other,
// and names their rows; the same build twice here (before and after).
func TestSmokeCoorddBin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs coordd")
	}
	t.Parallel()
	build(t)
	rep, table := runBench(t, append([]string{"--coordd-bin", "before=" + coorddBin + ",after=" + coorddBin,
		"--scenarios", "contention,sessions"}, smokeScenarioFlags...)...)
	t.Log("\n" + table)
	want := map[string][]string{"empty": {"coordd@before", tBare, "coordd@after"},
		"lock-contention": {"coordd@before", "coordd@after"}, "semaphore-contention": {"coordd@before", "coordd@after"},
		"sessions": {"coordd@before", "coordd@after"}}
	checkResults(t, rep, table, want)
	// The sessions scenario dials connections of its own: to each binary.
	for _, target := range want["sessions"] {
		if r := rep.find("sessions", target); r == nil || r.Sessions == nil || r.Sessions.Open != 40 || r.Errors != 0 {
			t.Errorf("sessions/%s: %+v", target, r)
		}
	}
	if len(rep.Binaries) != 2 || rep.Binaries[0].PID == rep.Binaries[1].PID || rep.Binaries[0].PID == 0 {
		t.Errorf("binaries: %+v", rep.Binaries)
	}
	for _, s := range []struct {
		scenario string
		limit    int
	}{{"lock-contention", 1}, {"semaphore-contention", 4}} {
		for _, target := range want[s.scenario] {
			r := rep.find(s.scenario, target)
			if r == nil || r.Contention == nil || r.Contention.Grants == 0 || r.Contention.Waiters != 4 || r.Contention.Limit != s.limit ||
				r.Contention.HandOff == nil || r.ServerCPUPerOpUs == 0 {
				t.Errorf("%s/%s: %+v", s.scenario, target, r)
			}
		}
	}
	if rep.ratioOf("lock-contention", "coordd@before") == nil {
		t.Errorf("no after ÷ before ratio: %+v", rep.Ratios)
	}
	if !strings.Contains(table, "coordd@after: "+coorddBin) {
		t.Error("the table does not name the binaries")
	}
}

// redlock-lock-release on 5 private standalone masters: redsync's row, and
// the row of the coordd coordbench starts in Redlock mode from
// --redlock-coordd-bin; afterwards no key is left on any of them.
func TestSmokeRedlock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs coordd")
	}
	t.Parallel()
	build(t)
	var addrs []string
	for range 5 {
		addrs = append(addrs, redistest.StartStandalone(t).Addr())
	}
	addr, pid, _ := startCoordd(t) // --addr: the floor of the empty scenario
	rep, table := runBench(t, append([]string{"--addr", addr, "--coordd-pid", strconv.Itoa(pid),
		"--redlock", strings.Join(addrs, ","), "--redlock-coordd-bin", coorddBin, "--key-prefix", "cbtest" + newToken()[:8],
		"--scenarios", scRedlock, "--peers", tRedsync}, smokeScenarioFlags...)...)
	t.Log("\n" + table)
	checkResults(t, rep, table, map[string][]string{"empty": {tCoordd, tBare}, scRedlock: {tRedsync}})
	// redsync: a SET NX on each master and its delete script on each, per
	// op; the counters are the 5 masters'.
	if r := rep.find(scRedlock, tRedsync); r == nil || r.Redis == nil || r.Redis.Masters != 5 ||
		r.Redis.Calls["set"] < 4 || r.Redis.ScriptsPerOp < 4 || len(r.Redis.CPUShare) != 5 {
		t.Errorf("%s/redsync: Redis per op %+v", scRedlock, r)
	}
	c := rep.find(scRedlock, tCoordd)
	if c == nil {
		t.Fatalf("%s: no coordd row (not even a failed one): %+v", scRedlock, rep.Results)
	}
	goal := slices.IndexFunc(rep.Goals, func(g Goal) bool { return g.Goal == redlockGoalText })
	if goal < 0 {
		t.Fatalf("no Redlock goal: %+v", rep.Goals)
	}
	checkResults(t, rep, table, map[string][]string{scRedlock: {tCoordd}})
	if c.Redis == nil || c.Redis.Masters != 5 || c.ServerCPUPerOpUs <= 0 {
		t.Errorf("%s/coordd: its process or the masters' counters not read: %+v", scRedlock, c)
	}
	if r := rep.ratioOf(scRedlock, tRedsync); r == nil || r.Ops == 0 {
		t.Errorf("coordd ÷ redsync: %+v", r)
	}
	if g := rep.Goals[goal]; g.Status == "not measured" {
		t.Errorf("the Redlock goal: %+v", g)
	}
	// Every key either target wrote is gone.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range addrs {
		c := redis.NewClient(redistest.Options(a))
		n, err := c.DBSize(ctx).Result()
		_ = c.Close()
		if err != nil || n != 0 {
			t.Errorf("%s: %d keys left after the run (%v)", a, n, err)
		}
	}
}
