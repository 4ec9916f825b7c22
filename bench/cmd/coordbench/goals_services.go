package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// The services targets: a decision little more than a gRPC call, coordd
// against the services users would deploy instead (etcd, envoy ratelimit,
// gubernator, asynq), sessions that cost little, and one queue over the
// Cluster's masters. Each is a ratio of one run, or a figure of one; those
// whose scenario, baseline or store this run lacks are "not measured",
// saying why.

// Targets the peers' scenarios measure (targets added in their files).
const (
	tEtcd       = "etcd"       // go.etcd.io/etcd: an embedded single-node server, concurrency.Mutex
	tEnvoy      = "envoy-rl"   // github.com/envoyproxy/ratelimit's server on the same Redis
	tGubernator = "gubernator" // github.com/gubernator-io/gubernator: one node
	// tRedsync: peer_redsync.go.
)

// serviceGoals evaluates the services targets.
func (rep *Report) serviceGoals() {
	add := func(goal string, ok bool, v float64, measured, why string) {
		rep.addGoal(setServices, goal, v, measured, ok, why)
	}
	store, cluster := rep.Config.Store, rep.Config.RedisMode == "cluster"
	need := func(s string, clusterToo bool) string {
		switch {
		case store != s:
			return "needs coordd on the " + s + " store"
		case clusterToo && !cluster:
			return "needs the Redis Cluster (--redis with its addresses)"
		}
		return ""
	}
	// ratioGoal checks a ratio of coordd's row of scenario to vs's.
	ratioGoal := func(goal, scenario, vs string, pick func(*Ratio) float64, bound float64, atMost bool, needStore string, clusterToo bool) {
		r := rep.ratioOf(scenario, vs)
		why := need(needStore, clusterToo)
		if f := rep.find(scenario, vs); why == "" && f != nil && f.Failed != "" {
			why = vs + " failed: " + firstLine(f.Failed)
		}
		if why == "" && (r == nil || pick(r) == 0) {
			why = "scenario " + scenario + " or its " + vs + " row not run"
		}
		var v float64
		if why == "" {
			v = pick(r)
		}
		ok := v >= bound
		if atMost {
			ok = v <= bound
		}
		add(goal, ok, v, fmt.Sprintf("%.2f×", v), why)
	}
	// redisCPUGoal checks coordd's Redis CPU per op over other's.
	redisCPUGoal := func(goal, scenario, other string, bound float64) {
		c, o := rep.find(scenario, tCoordd), rep.find(scenario, other)
		why := need("redis", true)
		if why == "" && (c == nil || o == nil || c.Redis == nil || o.Redis == nil || o.Redis.CPUPerOpUs == 0) {
			why = "scenario " + scenario + " with --baseline and --redis not run"
		}
		if why != "" {
			add(goal, false, 0, "", why)
			return
		}
		v := c.Redis.CPUPerOpUs / o.Redis.CPUPerOpUs
		add(goal, v <= bound, v, fmt.Sprintf("%.2f× (%.1f µs vs %.1f µs)", v, c.Redis.CPUPerOpUs, o.Redis.CPUPerOpUs), "")
	}
	ops := func(r *Ratio) float64 { return r.Ops }
	cpu := func(r *Ratio) float64 { return r.CPU }

	ratioGoal("coordd CPU per Allow (token bucket) on Redis ÷ bare gRPC server's CPU per call ≤ 1.6×",
		"allow-token_bucket", "bare-floor", cpu, 1.6, true, "redis", false)
	ratioGoal("coordd CPU per Allow (token bucket) on memory ÷ bare gRPC server's CPU per call ≤ 1.2×",
		"allow-token_bucket", "bare-floor", cpu, 1.2, true, "memory", false)
	redisCPUGoal("Redis CPU per Lock+Release ÷ redislock's ≤ 1.25×", "lock-release", tRedislock, 1.25)
	redisCPUGoal("Redis CPU per Enqueue ÷ asynq's ≤ 1.25×", "enqueue", tAsynq, 1.25)
	ratioGoal("Lock+Release on Redis ÷ etcd (no fsync) concurrency.Mutex ≥ 2×", "lock-release", tEtcd, ops, 2, false, "redis", false)
	rep.redlockGoal(add)
	ratioGoal("Allow (fixed window, Redis) ÷ envoy ratelimit ≥ 1.5×", "allow-fixed_window", tEnvoy, ops, 1.5, false, "redis", false)
	ratioGoal("ShouldRateLimit on coordd ÷ envoy ratelimit's server, same Redis ≥ 1.5×", "should-rate-limit", tEnvoy, ops, 1.5, false, "redis", false)
	ratioGoal("Allow (token bucket, memory) ÷ gubernator ≥ 2×", "allow-token_bucket", tGubernator, ops, 2, false, "memory", false)
	ratioGoal("queue end to end on the Cluster ÷ asynq ≥ 1.5×", "queue-e2e", tAsynq, ops, 1.5, false, "redis", true)

	s := rep.find("sessions", tCoordd)
	const sessionsGoal = "10,000 sessions with a lock each on Redis: coordd RSS ≤ 200 MB"
	switch why := need("redis", false); {
	case why != "":
		add(sessionsGoal, false, 0, "", why)
	case s == nil || s.Sessions == nil || s.Sessions.RSSPeak == 0:
		add(sessionsGoal, false, 0, "", "sessions scenario not run with --coordd-pid")
	case s.Sessions.Open < 10000 || s.Sessions.LocksEach != 1:
		add(sessionsGoal, false, 0, "", fmt.Sprintf("run had %d sessions × %d locks", s.Sessions.Open, s.Sessions.LocksEach))
	default:
		add(sessionsGoal, s.Sessions.RSSPeak <= 200<<20, float64(s.Sessions.RSSPeak),
			fmt.Sprintf("%s peak, %.0f B/session", fmtBytes(s.Sessions.RSSPeak), s.Sessions.BytesPerSession), "")
	}
	const heartbeatGoal = "Redis CPU per heartbeat ≤ 40 µs; heartbeat p99 at 10,000 sessions ≤ 20 ms"
	switch why := need("redis", false); {
	case why != "":
		add(heartbeatGoal, false, 0, "", why)
	case s == nil || s.Sessions == nil || s.Redis == nil || s.Latency == nil:
		add(heartbeatGoal, false, 0, "", "sessions scenario not run with --redis")
	case s.Sessions.Open < 10000:
		add(heartbeatGoal, false, 0, "", fmt.Sprintf("run had %d sessions", s.Sessions.Open))
	default:
		add(heartbeatGoal, s.Redis.CPUPerOpUs <= 40 && s.Latency.P99 <= 20000, s.Redis.CPUPerOpUs,
			fmt.Sprintf("%.1f µs; p99 %s", s.Redis.CPUPerOpUs, fmtUs(s.Latency.P99)), "")
	}

	const partsGoal = "one queue, partitions: 3 on the Cluster: each master's share of the queue's Redis CPU within ±20% of a third"
	p := rep.find("queue-partitions", tCoordd)
	switch why := need("redis", true); {
	case why != "":
		add(partsGoal, false, 0, "", why)
	case p == nil || p.Redis == nil || len(p.Redis.CPUShare) == 0:
		add(partsGoal, false, 0, "", "queue-partitions not run with --redis")
	default:
		worst, shares := 0.0, []string{}
		for _, a := range slices.Sorted(maps.Keys(p.Redis.CPUShare)) {
			sh := p.Redis.CPUShare[a]
			worst = math.Max(worst, math.Abs(sh*3-1))
			shares = append(shares, fmt.Sprintf("%s %.1f%%", a, sh*100))
		}
		add(partsGoal, len(shares) == 3 && worst <= 0.2, worst,
			fmt.Sprintf("%s (worst %.0f%% off a third)", strings.Join(shares, ", "), worst*100), "")
	}
}

// redlockGoalText is the Redlock target: coordd's Lock+Release over 5
// independent masters against redsync's on the same ones, in one run.
const redlockGoalText = "Lock+Release, Redlock mode on 5 masters ÷ redsync's Mutex on the same ≥ 1.0×"

// redlockGoal evaluates redlockGoalText: the ops ratio of
// redlock-lock-release's coordd row to its redsync row.
func (rep *Report) redlockGoal(add func(goal string, ok bool, v float64, measured, why string)) {
	c, r := rep.find(scRedlock, tCoordd), rep.find(scRedlock, tRedsync)
	var why string
	switch n := len(rep.Config.Redlock); {
	case n == 0:
		why = "needs --redlock (5 standalone masters) and --redlock-coordd-bin"
	case !rep.Config.has(scRedlock):
		why = "scenario " + scRedlock + " not run"
	case n != 5:
		why = fmt.Sprintf("run on %d masters (--redlock), not 5", n)
	case c == nil && rep.Config.RedlockBin == "":
		why = "coordd's row not run: needs --redlock-coordd-bin"
	case c == nil:
		why = "coordd's row not run"
	case c.Failed != "":
		why = "coordd failed: " + firstLine(c.Failed)
	case r == nil:
		why = "redsync's row not run (--peers)"
	case r.Failed != "":
		why = "redsync failed: " + firstLine(r.Failed)
	case c.OpsPerSec <= 0 || r.OpsPerSec <= 0:
		why = fmt.Sprintf("no ops: coordd %.0f/s, redsync %.0f/s", c.OpsPerSec, r.OpsPerSec)
	}
	if why != "" {
		add(redlockGoalText, false, 0, "", why)
		return
	}
	v := c.OpsPerSec / r.OpsPerSec
	add(redlockGoalText, v >= 1, v, fmt.Sprintf("%.2f× (%s vs %s/s; p99 %s vs %s)",
		v, fmtInt(c.OpsPerSec), fmtInt(r.OpsPerSec), fmtUs(p99(c)), fmtUs(p99(r))), "")
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
