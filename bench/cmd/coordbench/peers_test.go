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
		{"gubernator, etcd", []string{tEtcd, tGubernator}}, // allPeers' order
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
