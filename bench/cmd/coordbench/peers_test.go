package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
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
