package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseArgsDefaults(t *testing.T) {
	c, err := parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.Addr != "127.0.0.1:7070", c.Concurrency != 64, c.Duration != 10*time.Second, c.Keys != 10000,
		c.Sessions != 10000, c.LocksPerSes != 1, c.SessionTTL != 10*time.Second, c.QueueMsgs != 50000,
		c.KeyPrefix != "coord", c.Namespace != "default", c.Conns != 1, c.Baseline, c.Store != "memory",
		c.RedisMode != "", c.EmptyServer != "child", c.ClaimMax != 32, c.AckBatch:
		t.Fatalf("defaults: %+v", c)
	}
	// all but redlock-lock-release, which needs --redlock.
	if want := slices.DeleteFunc(slices.Clone(allScenarios), func(s string) bool { return s == scRedlock }); !slices.Equal(c.Scenarios, want) {
		t.Fatalf("default scenarios %v, want %v", c.Scenarios, want)
	}
	if !slices.Equal(c.Peers, allPeers) || c.EnvoyBin != "" {
		t.Fatalf("default peers %v (envoy binary %q), want all %v", c.Peers, c.EnvoyBin, allPeers)
	}
}

func TestParseArgs(t *testing.T) {
	c, err := parseArgs(strings.Fields(
		"--addr 10.0.0.1:7070 --api-key k --redis 127.0.0.1:17001,127.0.0.1:17002 --key-prefix bench "+
			"--concurrency 8 --duration 5s --keys 100 --scenarios queue-e2e,allow-token_bucket,lock "+
			"--baseline --json out.json --coordd-pid 42 --sessions 10 --locks-per-session 3 --session-ttl 3s --ack-batch"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.Addr != "10.0.0.1:7070", c.APIKey != "k", c.KeyPrefix != "bench", c.Concurrency != 8,
		c.Duration != 5*time.Second, c.Keys != 100, !c.Baseline, c.JSONFile != "out.json", c.CoorddPID != 42,
		c.Sessions != 10, c.LocksPerSes != 3, c.SessionTTL != 3*time.Second, !c.AckBatch:
		t.Fatalf("parsed: %+v", c)
	}
	if !slices.Equal(c.Redis, []string{"127.0.0.1:17001", "127.0.0.1:17002"}) || c.RedisMode != "cluster" || c.Store != "redis" {
		t.Fatalf("redis %v mode %q store %q", c.Redis, c.RedisMode, c.Store)
	}
	// Run order, groups expanded, the floor first.
	want := []string{"empty", "allow-token_bucket", "lock-release", "lock-contention", "queue-e2e"}
	if !slices.Equal(c.Scenarios, want) {
		t.Fatalf("scenarios %v, want %v", c.Scenarios, want)
	}
	if c.DurationS != "5s" || c.SessionTTLS != "3s" {
		t.Fatalf("durations for JSON: %q %q", c.DurationS, c.SessionTTLS)
	}
}

func TestParseArgsRedisMode(t *testing.T) {
	for _, c := range []struct{ args, mode string }{
		{"--redis a:1", "standalone"},
		{"--redis a:1,b:2", "cluster"},
		{"--redis a:1 --redis-mode cluster", "cluster"},
		{"--redis a:1,b:2 --redis-mode standalone", "standalone"},
		{"", ""},
	} {
		cfg, err := parseArgs(strings.Fields(c.args), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if cfg.RedisMode != c.mode {
			t.Errorf("%q: mode %q, want %q", c.args, cfg.RedisMode, c.mode)
		}
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--baseline", "--baseline needs --redis"},
		{"--scenarios allow-nope", `unknown scenario "allow-nope"`},
		{"--redis a:1 --redis-mode sentinel", "--redis-mode"},
		{"--concurrency 0", "--concurrency"},
		{"--duration 0s", "--duration"},
		{"--keys 0", "--keys"},
		{"--key-prefix a{b}", "--key-prefix"},
		{"--store disk", "--store"},
		{"--empty-server remote", "--empty-server"},
		{"--claim-max 0", "--claim-max"},
		{"--peers etcd,consul", `unknown peer "consul"`},
		{"stray", `unexpected argument "stray"`},
		{"--duration soon", "invalid value"},
	} {
		_, err := parseArgs(strings.Fields(c.args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.args, err, c.want)
		}
	}
	var out strings.Builder
	if _, err := parseArgs([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if !strings.Contains(out.String(), "queue-e2e") || !strings.Contains(out.String(), "--baseline") {
		t.Fatalf("usage lacks the scenarios or flags:\n%s", out.String())
	}
}

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses; utime 250 and stime
	// 50 ticks are 3 s.
	line := "1234 (co ord) d) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 1000000 2000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil || got != 3*time.Second {
		t.Fatalf("parseStatCPU = %v, %v; want 3s", got, err)
	}
	if _, err := parseStatCPU([]byte("1234 (x) S 1")); err == nil {
		t.Fatal("a short stat line parsed")
	}
	rss, err := parseStatusRSS([]byte("Name:\tcoordd\nVmPeak:\t  99 kB\nVmRSS:\t   2048 kB\nThreads:\t7\n"))
	if err != nil || rss != 2048*1024 {
		t.Fatalf("parseStatusRSS = %d, %v", rss, err)
	}
	if _, err := parseStatusRSS([]byte("Name:\tx\n")); err == nil {
		t.Fatal("status without VmRSS parsed")
	}
}

func TestCheckAcked(t *testing.T) {
	for _, c := range []struct {
		v  any
		n  int
		ok bool
	}{
		{int64(1), 1, true}, {int64(0), 1, false}, {int64(1), 2, false},
		{[]any{int64(1), int64(1)}, 2, true}, {[]any{int64(1), int64(0)}, 2, false}, {[]any{int64(1)}, 2, false},
		{"OK", 1, false},
	} {
		if err := checkAcked(c.v, c.n); (err == nil) != c.ok {
			t.Errorf("checkAcked(%v, %d) = %v", c.v, c.n, err)
		}
	}
}

func TestKeyLayoutMatchesCoordd(t *testing.T) {
	k := keyLayout{prefix: "coord"}
	if got := k.lock("default:a"); len(got) != 9 || got[0] != "coord:{l:default:a}:h" || got[7] != "coord:{l:default:a}:m" || got[8] != "coord:{l:default:a}:log" {
		t.Errorf("lock keys %v", got)
	}
	if got := k.limit("default:k", limitSpecs["token_bucket"]); !slices.Equal(got, []string{"coord:{r:default:k}:4:1000000:1000000:0"}) {
		t.Errorf("limit keys %v", got)
	}
	if got := k.limit("default:k", limitSpecs["sliding_log"]); len(got) != 2 || got[1] != "coord:{r:default:k}:3:1000:1000000:0:sum" {
		t.Errorf("sliding log keys %v", got)
	}
	if got := k.queue("default:q"); len(got) != 15 || got[0] != "coord:{q:default:q}:pending" || got[9] != "coord:{q:default:q}:seq" ||
		got[12] != "coord:{q:default:q}:gwait" || got[13] != "coord:{q:default:q}:conf" {
		t.Errorf("queue keys %v", got)
	}
	if k.idemChannel("default:i") != "coord:{i:default:i}:ev" || k.lockChannel("default:a") != "coord:{l:default:a}:ev" {
		t.Error("channels")
	}
}

func TestLoadLua(t *testing.T) {
	dir, err := findLuaDir("")
	if err != nil {
		t.Skip(err)
	}
	s, err := loadLua(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range s.all() {
		if sc == nil || sc.Hash() == "" {
			t.Fatal("a script is missing")
		}
	}
	if s.limit["token_bucket"] != s.limit["leaky_bucket"] && s.limit["token_bucket"].Hash() != s.limit["leaky_bucket"].Hash() {
		t.Error("token and leaky bucket differ: both are limit_allow.lua (limit_gcra.lua before it)")
	}
	if _, err := loadLua(t.TempDir()); err == nil {
		t.Error("an empty directory loaded")
	}
}

func TestGoals(t *testing.T) {
	rep := &Report{Config: &config{Store: "redis"}, Results: []*Result{
		{Scenario: "empty", Target: tBare, OpsPerSec: 10000, Latency: &Latency{P99: 1000}, ServerCPUPerOpUs: 50},
		{Scenario: "empty", Target: tCoordd, OpsPerSec: 8000, Latency: &Latency{P99: 1200}, ServerCPUPerOpUs: 64},
		{Scenario: "allow-token_bucket", Target: tRedisRate, OpsPerSec: 7000, Latency: &Latency{P99: 800}},
		{Scenario: "allow-token_bucket", Target: tCoordd, OpsPerSec: 8500, Latency: &Latency{P99: 1700}, ServerCPUPerOpUs: 80},
		{Scenario: "lock-release", Target: tCoordd, OpsPerSec: 3000, Latency: &Latency{P99: 2000}},
		{Scenario: "queue-e2e", Target: tAsynq, OpsPerSec: 1000},
		{Scenario: "queue-e2e", Target: tCoordd, OpsPerSec: 1500},
	}}
	rep.analyze()
	status := map[string]string{}
	for _, g := range rep.Goals {
		status[g.Goal] = g.Status
	}
	for goal, want := range map[string]string{
		"Allow token bucket on Redis, ops/s ≥ 0.8× the empty gRPC call":             "met",     // 0.85 (1.06 vs Health/Check)
		"Allow token bucket on Redis, ops/s ≥ 1.0× redis_rate":                      "met",     // 1.21
		"Allow token bucket on Redis, p99 ≤ 2× redis_rate's":                        "NOT met", // 2.125
		"Lock+Release on Redis, cycles/s ≥ 0.8× half the empty-call rate":           "NOT met", // 0.6
		"queue-e2e, msgs/s end to end ≥ 2× asynq (concurrency 64)":                  "NOT met", // 1.5
		"coordd CPU per Allow (token bucket, Redis) ≤ 1.5× CPU per empty gRPC call": "NOT met", // 1.6 (1.25 vs Health/Check)
		"Allow token_bucket on the memory store, ops/s ≥ 0.9× the empty gRPC call":  "not measured",
	} {
		if status[goal] != want {
			t.Errorf("%s: %q, want %q", goal, status[goal], want)
		}
	}
	if r := rep.ratioOf("lock-release", "bare-floor/2"); r == nil || math.Abs(r.Ops-0.6) > 1e-9 {
		t.Errorf("lock-release vs bare-floor/2: %+v", r)
	}
	if r := rep.ratioOf("lock-release", "floor/2"); r == nil || math.Abs(r.Ops-0.75) > 1e-9 {
		t.Errorf("lock-release vs floor/2 (coordd's Health/Check): %+v", r)
	}
	for _, g := range rep.Goals {
		if strings.HasPrefix(g.Goal, "Allow token bucket on Redis, ops/s ≥ 0.8×") && g.Measured != "0.85× (vs coordd's Health/Check: 1.06×)" {
			t.Errorf("the goal's measure: %q", g.Measured)
		}
	}
}

func TestParseRuntime(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 20014
go_memstats_heap_inuse_bytes 1.2345e+08
go_memstats_stack_inuse_bytes 1.6384e+08
go_memstats_sys_bytes 3.5e+08
go_gc_duration_seconds{quantile="0"} 1e-05
process_resident_memory_bytes 4.4e+08
coordd_session_streams 10000
coordd_holds_granted_total{kind="lock",mode="exclusive"} 12
`
	g, err := parseRuntime(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := goRuntime{Goroutines: 20014, HeapInuse: 123450000, StackInuse: 163840000, Sys: 350000000, RSS: 440000000, Sessions: 10000}
	if g != want {
		t.Fatalf("parsed %+v, want %+v", g, want)
	}
	if _, err := parseRuntime(strings.NewReader("x 1\n")); err == nil {
		t.Fatal("no runtime metrics parsed")
	}
}

func TestRedisCost(t *testing.T) {
	info := func(cmds, in, out, repl int64, cpu float64, evalsha, get int64) string {
		return fmt.Sprintf("# Stats\r\ntotal_commands_processed:%d\r\ntotal_net_input_bytes:%d\r\ntotal_net_output_bytes:%d\r\n"+
			"total_net_repl_output_bytes:%d\r\n# CPU\r\nused_cpu_sys:%f\r\nused_cpu_user:0.5\r\n# Commandstats\r\n"+
			"cmdstat_evalsha:calls=%d,usec=10,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n"+
			"cmdstat_get:calls=%d,usec=10,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n", cmds, in, out, repl, cpu, evalsha, get)
	}
	before := parseRedisInfo(info(100, 1000, 5000, 3000, 1.0, 10, 10))
	after := parseRedisInfo(info(400, 21000, 11000, 6000, 1.1, 110, 110))
	before.masters, after.masters = 1, 1
	c := after.cost(before, 100)
	if c == nil || c.CommandsPerOp != 3 || c.ScriptsPerOp != 1 || c.BytesInPerOp != 200 || c.BytesOutPerOp != 30 ||
		math.Abs(c.CPUPerOpUs-1000) > 1e-6 || c.Calls["get"] != 1 {
		t.Fatalf("cost %+v", c)
	}
	if got := c.topCalls(1); got != "evalsha 1, …" {
		t.Fatalf("topCalls %q", got)
	}
	if after.cost(before, 0) != nil {
		t.Fatal("a cost per op of no ops")
	}
}

func TestAsynqStatKeys(t *testing.T) {
	got := asynqStatKeys("q1", time.Date(2026, 11, 30, 0, 30, 0, 0, time.UTC))
	want := []string{"asynq:{q1}:processed", "asynq:{q1}:failed",
		"asynq:{q1}:processed:2026-11-30", "asynq:{q1}:failed:2026-11-30",
		"asynq:{q1}:processed:2026-11-29", "asynq:{q1}:failed:2026-11-29"}
	if !slices.Equal(got, want) {
		t.Fatalf("asynqStatKeys = %v", got)
	}
}

// --redlock: N distinct servers, N odd and at least 3; the scenario joins
// all only with it, and cannot be named without it.
func TestParseArgsRedlock(t *testing.T) {
	five := "a:1,a:2,a:3,a:4,a:5"
	c, err := parseArgs(strings.Fields("--redlock "+five+" --redlock-coordd-bin /bin/coordd"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Redlock, strings.Split(five, ",")) || c.RedlockBin != "/bin/coordd" {
		t.Fatalf("redlock %v, binary %q", c.Redlock, c.RedlockBin)
	}
	if !slices.Equal(c.Scenarios, allScenarios) || !slices.Contains(c.Peers, tRedsync) {
		t.Fatalf("with --redlock, all is every scenario: %v; peers %v", c.Scenarios, c.Peers)
	}
	for _, cs := range []struct {
		args []string
		want []string
	}{
		{[]string{"--redlock", "a:1,a:2,a:3", "--scenarios", "redlock-lock-release"}, []string{"empty", scRedlock}},
		{[]string{"--redlock", "a:1,a:2,a:3", "--scenarios", "lock"}, []string{"empty", "lock-release", "lock-contention"}},
		{[]string{"--scenarios", "all"}, slices.DeleteFunc(slices.Clone(allScenarios), func(s string) bool { return s == scRedlock })},
		{[]string{"--redlock", " a:1 , a:2,a:3,", "--scenarios", "idem"}, []string{"empty", "idem"}},
	} {
		c, err := parseArgs(cs.args, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", cs.args, err)
			continue
		}
		if !slices.Equal(c.Scenarios, cs.want) {
			t.Errorf("%q: scenarios %v, want %v", cs.args, c.Scenarios, cs.want)
		}
	}
	for _, cs := range []struct{ args, want string }{
		{"--redlock a:1", "--redlock: 1 servers; Redlock needs an odd number, at least 3"},
		{"--redlock a:1,a:2", "--redlock: 2 servers"},
		{"--redlock a:1,a:2,a:3,a:4", "--redlock: 4 servers"},
		{"--redlock a:1,a:2,a:1", "--redlock: a:1 given twice"},
		{"--redlock-coordd-bin /bin/coordd", "--redlock-coordd-bin needs --redlock"},
		{"--scenarios redlock-lock-release", "redlock-lock-release needs --redlock"},
		{"--scenarios lock,redlock-lock-release --redlock-coordd-bin x", "needs --redlock"},
	} {
		_, err := parseArgs(strings.Fields(cs.args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), cs.want) {
			t.Errorf("%q: error %v, want one containing %q", cs.args, err, cs.want)
		}
	}
}
