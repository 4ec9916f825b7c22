package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// The hand-off pairs each grant with the oldest unpaired Release call: with
// limit 1 that is the previous holder's; the first grant has none.
func TestContentionHandOff(t *testing.T) {
	var c contention
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c.granted(at(0), at(5)) // the first holder: no Release before it
	c.releasing(at(6))
	c.granted(at(1), at(8)) // 2 ms after the Release call started
	c.releasing(at(9))
	c.releasing(at(10)) // a second permit released before any grant
	c.granted(at(2), at(13))
	c.granted(at(3), at(14))
	r := &Result{Ops: 5, Seconds: 2}
	s := c.stats(r, 64, 2, time.Millisecond)
	if s.Grants != 4 || s.GrantsPerSec != 2 || s.Waiters != 64 || s.Limit != 2 || s.Hold != "1ms" {
		t.Fatalf("stats %+v", s)
	}
	// Hand-offs: 8-6=2, 13-9=4, 14-10=4 (ms); waits: 5, 7, 11, 11.
	if s.HandOff == nil || s.HandOff.Count != 3 || s.HandOff.Min != 2000 || s.HandOff.Max != 4000 {
		t.Fatalf("hand-off %+v", s.HandOff)
	}
	if s.Wait == nil || s.Wait.Count != 4 || s.Wait.Min != 5000 || s.Wait.Max != 11000 {
		t.Fatalf("wait %+v", s.Wait)
	}
	if s.ScriptsPerGrant != 0 {
		t.Fatalf("scripts per grant without Redis's counters: %v", s.ScriptsPerGrant)
	}
	// Redis's cost is per op; a miss (no grant) is an op too.
	r.Redis = &RedisCost{ScriptsPerOp: 2, CommandsPerOp: 4}
	if s := c.stats(r, 64, 2, 0); s.ScriptsPerGrant != 2.5 || s.CommandsPerGrant != 5 {
		t.Fatalf("per grant: %+v", s)
	}
	c.reset()
	if s := c.stats(r, 64, 2, 0); s.Grants != 0 || s.HandOff != nil || s.Wait != nil || len(c.pending) != 0 {
		t.Fatalf("after reset: %+v", s)
	}
}

func TestParseBins(t *testing.T) {
	bins, err := parseBins(" before=/tmp/a/coordd , after=./coordd")
	if err != nil {
		t.Fatal(err)
	}
	if want := []binSpec{{"before", "/tmp/a/coordd"}, {"after", "./coordd"}}; !slices.Equal(bins, want) {
		t.Fatalf("parsed %v, want %v", bins, want)
	}
	if bins, err := parseBins(""); err != nil || bins != nil {
		t.Fatalf("empty: %v %v", bins, err)
	}
	for _, bad := range []string{"coordd", "=x", "a=", "a b=x", "a=x,a=y", "a@b=x"} {
		if _, err := parseBins(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c, err := parseArgs(strings.Fields("--coordd-bin before=/a,after=/b --redis 127.0.0.1:1,127.0.0.1:2 --scenarios contention --hold 1ms --semaphore-limit 8"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Bins) != 2 || c.Hold != time.Millisecond || c.HoldS != "1ms" || c.SemLimit != 8 || !c.has("lock-contention") {
		t.Fatalf("parsed %+v", c)
	}
	for _, bad := range []string{
		"--coordd-bin a=/x --baseline --redis 127.0.0.1:1",
		"--coordd-bin a=/x --coordd-pid 4",
		"--hold -1s",
		"--semaphore-limit 0",
	} {
		if _, err := parseArgs(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func contentionRow(scenario, target string, grants float64, scripts float64, handOffP99 float64) *Result {
	return &Result{Scenario: scenario, Target: target, OpsPerSec: grants, Latency: &Latency{P99: 1000},
		Contention: &ContentionStats{Waiters: 64, Limit: 1, Hold: "0s", GrantsPerSec: grants, ScriptsPerGrant: scripts,
			HandOff: &Latency{P99: handOffP99}}}
}

func TestContentionGoals(t *testing.T) {
	rep := &Report{Config: &config{Store: "redis", RedisMode: "cluster"}, Results: []*Result{
		contentionRow("lock-contention", "coordd@before", 700, 63.75, 30_000),
		contentionRow("lock-contention", "coordd@after", 4000, 2.5, 9_000),
	}}
	rep.analyze()
	status := map[string]string{}
	measured := map[string]string{}
	for _, g := range rep.Goals {
		if g.Set == setContention {
			status[g.Goal], measured[g.Goal] = g.Status, g.Measured
		}
	}
	for goal, want := range map[string]string{
		goalScripts: "met", goalGrants: "met", goalHandOff: "met", goalSemaphore: "not measured",
	} {
		if status[goal] != want {
			t.Errorf("%s: %q (%s), want %q", goal, status[goal], measured[goal], want)
		}
	}
	if m := measured[goalScripts]; m != "2.50 (coordd@before: 63.75)" {
		t.Errorf("scripts measured %q", m)
	}
	if m := measured[goalGrants]; !strings.HasPrefix(m, "5.71×") {
		t.Errorf("grants measured %q", m)
	}
	if r := rep.ratioOf("lock-contention", "coordd@before"); r == nil || r.Ops < 5.7 || r.Ops > 5.72 {
		t.Errorf("after ÷ before ratio %+v", r)
	}

	// One binary (or --addr): no before, so no grants goal; memory: nothing.
	rep.Results = rep.Results[1:]
	rep.analyze()
	for _, g := range rep.Goals {
		if g.Goal == goalGrants && g.Status != "not measured" || g.Goal == goalScripts && g.Status != "met" {
			t.Errorf("one binary: %+v", g)
		}
	}
	rep.Config.Store, rep.Config.RedisMode = "memory", ""
	rep.analyze()
	for _, g := range rep.Goals {
		if g.Set == setContention && g.Goal != goalSemaphore && g.Status != "not measured" {
			t.Errorf("memory store: %+v", g)
		}
	}
}

func TestWriteContention(t *testing.T) {
	rep := &Report{Config: &config{Store: "memory"}, Results: []*Result{
		contentionRow("lock-contention", tCoordd, 700, 0, 30_000),
	}}
	rep.Skipped = []string{"semaphore-contention/coordd: the server answers Unimplemented"}
	rep.analyze()
	var out bytes.Buffer
	rep.writeText(&out)
	for _, want := range []string{"contention, per grant", "hand-off: each grant is paired", "skipped:\n  semaphore-contention/coordd", "goals (contention):"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestContendedPattern(t *testing.T) {
	b := &bench{keys: keyLayout{prefix: "cb*1"}, runID: "0123abcd"}
	if got, want := b.contendedPattern(), `cb\*1:{?:*:cb:*:0123abcd*`; got != want {
		t.Fatalf("pattern %q, want %q", got, want)
	}
	// The lock-contention name's keys (in any namespace) match it.
	b.binLabel = "after"
	name := "cb:contended:" + b.runID + b.nameTag()
	for _, k := range b.keys.lock(scope("default", name)) {
		if !strings.HasPrefix(k, `cb*1:{l:default:cb:contended:0123abcd:after}`) {
			t.Errorf("key %q", k)
		}
	}
}

// A server without SemaphoreService (a coordd without semaphores): the
// scenario is skipped, said in the report, not measured as errors.
func TestSemaphoreContentionSkipsUnimplemented(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	b := &bench{cfg: &config{Concurrency: 2, Duration: time.Second, SemLimit: 4, Conns: 1}, log: io.Discard, report: &Report{}, runID: "00000000"}
	conns, err := b.dial(l.Addr().String(), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(conns)
	b.cl = newClients(conns)
	b.binLabel = "before"
	b.runSemaphoreContention(context.Background())
	if len(b.results) != 0 || len(b.report.Skipped) != 1 ||
		!strings.HasPrefix(b.report.Skipped[0], "semaphore-contention/coordd@before: the server answers Unimplemented") {
		t.Fatalf("results %v, skipped %q", b.results, b.report.Skipped)
	}
}
