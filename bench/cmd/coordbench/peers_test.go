package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-redsync/redsync/v4"
)

func TestParsePeers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"all", allPeers},
		{"none", nil},
		{"", nil},
		{"envoy-rl, etcd", []string{tEtcd, tEnvoy}}, // allPeers' order
		{"gubernator,all,etcd", allPeers},
		{"etcd-fsync,etcd-fsync", []string{tEtcdFsync}},
	} {
		got, err := parsePeers(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, p := range allPeers {
		if !slices.Contains(allScenarios, peerScenario[p]) {
			t.Errorf("peer %s: scenario %q is not a scenario", p, peerScenario[p])
		}
	}
}

// envoy ratelimit's configuration: the scenario's fixed window, a limit a
// second per value of the descriptor key.
func TestEnvoyConfig(t *testing.T) {
	got, err := envoyConfig(limitSpecs["fixed_window"])
	if err != nil {
		t.Fatal(err)
	}
	want := "domain: coordbench\ndescriptors:\n  - key: key\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000000\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := envoyConfig(limitSpec{limit: 5, periodMicros: 1500}); err == nil {
		t.Fatal("a period of 1.5 ms has no unit in envoy ratelimit: want an error")
	}
	b := &bench{cfg: &config{KeyPrefix: "cb1"}, runID: "0123abcd"}
	if got := b.envoyKeyPrefix(); got != "cb1:envoy-rl:0123abcd:" {
		t.Fatalf("CACHE_KEY_PREFIX %q", got)
	}
}

// A peer that could not start: its row says failed and why, no ratio is
// made of it, and its goal says why it was not measured.
func TestPeerFailedReport(t *testing.T) {
	rep := &Report{Config: &config{Store: "memory"}, Results: []*Result{
		{Scenario: "allow-token_bucket", Target: tGubernator, Failed: "coordbench serve-gubernator: address in use\nmore"},
		{Scenario: "allow-token_bucket", Target: tCoordd, Ops: 1000, OpsPerSec: 100, Latency: &Latency{P50: 100, P99: 200, P999: 300}},
		{Scenario: "lock-release", Target: tEtcd, Ops: 500, OpsPerSec: 50, ServerCPUPerOpUs: 200, Latency: &Latency{P50: 100, P99: 400, P999: 500}},
		{Scenario: "lock-release", Target: tCoordd, Ops: 1000, OpsPerSec: 100, ServerCPUPerOpUs: 100, Latency: &Latency{P50: 100, P99: 200, P999: 300}},
	}}
	rep.analyze()
	if rep.ratioOf("allow-token_bucket", tGubernator) != nil {
		t.Errorf("a ratio to a failed row: %+v", rep.Ratios)
	}
	if r := rep.ratioOf("lock-release", tEtcd); r == nil || r.Ops != 2 || r.P99 != 0.5 || r.CPU != 0.5 {
		t.Errorf("coordd ÷ etcd: %+v", r)
	}
	var g *Goal
	for i := range rep.Goals {
		if strings.Contains(rep.Goals[i].Goal, "gubernator") {
			g = &rep.Goals[i]
		}
	}
	if g == nil || g.Status != "not measured" || g.Measured != "gubernator failed: coordbench serve-gubernator: address in use" {
		t.Errorf("gubernator's goal: %+v", g)
	}
	var out bytes.Buffer
	rep.writeText(&out)
	for _, want := range []string{"gubernator  failed", "failed (not measured):\n  allow-token_bucket/gubernator: coordbench serve-gubernator: address in use\n    more"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

// The Redlock goal: measured only from both rows of redlock-lock-release
// on 5 masters; otherwise "not measured", saying why.
func TestRedlockGoal(t *testing.T) {
	five := []string{"a:1", "a:2", "a:3", "a:4", "a:5"}
	lat := &Latency{P50: 100, P99: 2000, P999: 3000}
	coordd := &Result{Scenario: scRedlock, Target: tCoordd, Ops: 1200, OpsPerSec: 1200, Latency: lat}
	rs := &Result{Scenario: scRedlock, Target: tRedsync, Ops: 1000, OpsPerSec: 1000, Latency: lat}
	cfg := func(addrs []string, bin string, scenarios ...string) *config {
		return &config{Store: "memory", Redlock: addrs, RedlockBin: bin, Scenarios: append([]string{"empty"}, scenarios...)}
	}
	for _, c := range []struct {
		name    string
		cfg     *config
		results []*Result
		status  string
		want    string
	}{
		{"no --redlock", cfg(nil, ""), nil, "not measured", "needs --redlock (5 standalone masters) and --redlock-coordd-bin"},
		{"scenario not chosen", cfg(five, "/bin/coordd", "idem"), nil, "not measured", "scenario redlock-lock-release not run"},
		{"3 masters", cfg(five[:3], "/bin/coordd", scRedlock), []*Result{coordd, rs}, "not measured", "run on 3 masters (--redlock), not 5"},
		{"no --redlock-coordd-bin", cfg(five, "", scRedlock), []*Result{rs}, "not measured", "coordd's row not run: needs --redlock-coordd-bin"},
		{"coordd refused to start", cfg(five, "/bin/coordd", scRedlock),
			[]*Result{rs, {Scenario: scRedlock, Target: tCoordd, Failed: "coordd in Redlock mode (/bin/coordd): exited before serving:\nredis.mode"}},
			"not measured", "coordd failed: coordd in Redlock mode (/bin/coordd): exited before serving:"},
		{"redsync left out", cfg(five, "/bin/coordd", scRedlock), []*Result{coordd}, "not measured", "redsync's row not run (--peers)"},
		{"redsync failed", cfg(five, "/bin/coordd", scRedlock),
			[]*Result{{Scenario: scRedlock, Target: tRedsync, Failed: "--redlock: a:3: connection refused"}, coordd},
			"not measured", "redsync failed: --redlock: a:3: connection refused"},
		{"no ops", cfg(five, "/bin/coordd", scRedlock), []*Result{rs, {Scenario: scRedlock, Target: tCoordd, Errors: 9}},
			"not measured", "no ops: coordd 0/s, redsync 1000/s"},
		{"met", cfg(five, "/bin/coordd", scRedlock), []*Result{rs, coordd}, "met", "1.20× (1,200 vs 1,000/s; p99 2.00ms vs 2.00ms)"},
		{"not met", cfg(five, "/bin/coordd", scRedlock), []*Result{coordd, {Scenario: scRedlock, Target: tRedsync, Ops: 2400, OpsPerSec: 2400, Latency: lat}},
			"NOT met", "0.50× (1,200 vs 2,400/s; p99 2.00ms vs 2.00ms)"},
	} {
		rep := &Report{Config: c.cfg, Results: c.results}
		rep.analyze()
		i := slices.IndexFunc(rep.Goals, func(g Goal) bool { return g.Goal == redlockGoalText })
		if i < 0 {
			t.Fatalf("%s: no Redlock goal in %+v", c.name, rep.Goals)
		}
		if g := rep.Goals[i]; g.Status != c.status || g.Measured != c.want || g.Set != setServices {
			t.Errorf("%s: %s %q (set %s), want %s %q", c.name, g.Status, g.Measured, g.Set, c.status, c.want)
		}
	}
}

// What TryLock's errors mean: a name held elsewhere is a miss; a server's
// failure is an error, even beside nodes that were taken.
func TestRedsyncNotAcquired(t *testing.T) {
	refused := &redsync.RedisError{Node: 2, Err: errors.New("connection refused")}
	for _, c := range []struct {
		err  error
		miss bool
	}{
		{&redsync.ErrTaken{Nodes: []int{0, 1, 2}}, true},
		{errors.Join(&redsync.ErrNodeTaken{Node: 0}, &redsync.ErrNodeTaken{Node: 3}), true},
		{redsync.ErrFailed, true},
		{errors.Join(&redsync.ErrNodeTaken{Node: 0}, refused), false},
		{refused, false},
		{fmt.Errorf("dial: %w", errors.New("timeout")), false},
	} {
		if got := redsyncNotAcquired(c.err); got != c.miss {
			t.Errorf("%v: not acquired %v, want %v", c.err, got, c.miss)
		}
	}
}
