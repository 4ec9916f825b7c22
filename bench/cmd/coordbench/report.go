package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Result is one scenario measured on one target.
type Result struct {
	Scenario  string   `json:"scenario"`
	Target    string   `json:"target"`
	Unit      string   `json:"unit,omitempty"` // what an op is, if not one operation: msgs, heartbeats, sessions
	Ops       int64    `json:"ops"`
	Errors    int64    `json:"errors"`
	Misses    int64    `json:"misses,omitempty"` // denied, or not acquired: answers, not failures
	Seconds   float64  `json:"seconds"`
	OpsPerSec float64  `json:"ops_per_sec"`
	Latency   *Latency `json:"latency,omitempty"`

	// The server process's (coordd's, or the bare gRPC server's) CPU time
	// and RSS around the measurement, if its PID is known.
	ServerCPUSeconds float64 `json:"server_cpu_s,omitempty"`
	ServerCPUPerOpUs float64 `json:"server_cpu_per_op_us,omitempty"`
	ServerRSSBefore  int64   `json:"server_rss_before_bytes,omitempty"`
	ServerRSSAfter   int64   `json:"server_rss_after_bytes,omitempty"`
	// coordbench's own CPU per op (the load generator, on the same box).
	ClientCPUPerOpUs float64 `json:"client_cpu_per_op_us,omitempty"`
	LoadBefore       float64 `json:"loadavg1_before"`
	LoadAfter        float64 `json:"loadavg1_after"`
	// With --redis: what an op cost Redis (all masters).
	Redis *RedisCost `json:"redis,omitempty"`

	FirstError string `json:"first_error,omitempty"`
	// A peer that could not be started or readied: why (no ops then).
	Failed string `json:"failed,omitempty"`

	// queue-e2e: messages enqueued and claims made; its phases.
	Enqueued int64 `json:"enqueued,omitempty"`
	Claims   int64 `json:"claims,omitempty"`
	// sessions.
	Sessions *SessionStats `json:"sessions,omitempty"`
	// lock-contention, semaphore-contention.
	Contention *ContentionStats `json:"contention,omitempty"`
	Phases     []*Result        `json:"phases,omitempty"`
}

// SessionStats is what the sessions scenario reports beside heartbeats.
type SessionStats struct {
	Open            int64   `json:"open"`
	Live            int64   `json:"live_at_end"`
	LocksEach       int     `json:"locks_each"`
	TTL             string  `json:"ttl"`
	Connections     int     `json:"connections"`
	RSSBefore       int64   `json:"coordd_rss_before_bytes,omitempty"`
	RSSOpen         int64   `json:"coordd_rss_open_bytes,omitempty"`
	RSSPeak         int64   `json:"coordd_rss_peak_bytes,omitempty"`
	BytesPerSession float64 `json:"bytes_per_session,omitempty"`
	// With --coordd-metrics: coordd's Go runtime before the sessions open,
	// while they are open, and after they are closed.
	RuntimeBefore *goRuntime `json:"coordd_runtime_before,omitempty"`
	RuntimeOpen   *goRuntime `json:"coordd_runtime_open,omitempty"`
	RuntimeClosed *goRuntime `json:"coordd_runtime_closed,omitempty"`
}

// perSession describes the growth of coordd's runtime per open session.
func (s *SessionStats) perSession() string {
	b, o := s.RuntimeBefore, s.RuntimeOpen
	if b == nil || o == nil || s.Open == 0 {
		return ""
	}
	n := float64(s.Open)
	out := fmt.Sprintf("per session: %.2f goroutines, %.0f B of stacks, %.0f B of heap in use (Go runtime sys %s → %s)",
		float64(o.Goroutines-b.Goroutines)/n, float64(o.StackInuse-b.StackInuse)/n, float64(o.HeapInuse-b.HeapInuse)/n,
		fmtBytes(b.Sys), fmtBytes(o.Sys))
	if c := s.RuntimeClosed; c != nil {
		out += fmt.Sprintf("; after closing: %d goroutines (%d before), %d sessions active, RSS %s",
			c.Goroutines, b.Goroutines, c.Sessions, fmtBytes(c.RSS))
	}
	return out
}

func (r *Result) unit() string {
	if r.Unit == "" {
		return "ops"
	}
	return r.Unit
}

func (r *Result) setProc(before, after snapshot) {
	if before.serverOK && after.serverOK {
		cpu := after.server.cpu - before.server.cpu
		r.ServerCPUSeconds = cpu.Seconds()
		if r.Ops > 0 {
			r.ServerCPUPerOpUs = us(cpu) / float64(r.Ops)
		}
		r.ServerRSSBefore, r.ServerRSSAfter = before.server.rss, after.server.rss
	}
	if r.Ops > 0 {
		r.ClientCPUPerOpUs = us(after.self-before.self) / float64(r.Ops)
	}
	r.LoadBefore, r.LoadAfter = before.load, after.load
	if before.redis != nil && after.redis != nil {
		r.Redis = after.redis.cost(*before.redis, r.Ops)
	}
}

// Report is the whole run, as written with --json.
type Report struct {
	Tool    string    `json:"tool"`
	RunID   string    `json:"run_id"`
	Start   string    `json:"start"`
	End     string    `json:"end"`
	Config  *config   `json:"config"`
	Machine Machine   `json:"machine"`
	Results []*Result `json:"results"`
	Ratios  []Ratio   `json:"ratios"`
	Goals   []Goal    `json:"goals"`
	// With --coordd-bin: the binaries, in the order they ran.
	Binaries []BinaryRun `json:"binaries,omitempty"`
	// Scenarios not run on a target, and why (a server without the API).
	Skipped []string `json:"skipped,omitempty"`
}

// Machine describes where the run ran.
type Machine struct {
	Hostname     string  `json:"hostname,omitempty"`
	NumCPU       int     `json:"num_cpu"`
	CPUModel     string  `json:"cpu_model,omitempty"`
	GoVersion    string  `json:"go_version"`
	GOOS         string  `json:"goos"`
	GOARCH       string  `json:"goarch"`
	RedisVersion string  `json:"redis_version,omitempty"`
	LoadStart    float64 `json:"loadavg1_start"`
	LoadEnd      float64 `json:"loadavg1_end"`
}

// Ratio compares coordd with another target of the same scenario, or with
// the floor.
type Ratio struct {
	Scenario string `json:"scenario"`
	Vs       string `json:"vs"`
	// coordd's ops/s over the other's (for the floor: over the floor's
	// rate divided by the gRPC calls one op makes).
	Ops float64 `json:"ops_ratio"`
	// coordd's p99 over the other's; 0 when either has none.
	P99 float64 `json:"p99_ratio,omitempty"`
	// coordd's CPU per op over the other's (the floor's times the calls
	// per op); 0 unless both were measured.
	CPU  float64 `json:"cpu_per_op_ratio,omitempty"`
	Note string  `json:"note,omitempty"`
}

// Goal is one target of a set (setSpeed, setContention, setServices), and
// whether this run meets it.
type Goal struct {
	Set      string  `json:"set"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value,omitempty"`
	Status   string  `json:"status"` // met, NOT met, not measured
}

// callsPerOp is how many gRPC calls one op of a scenario makes, for the
// comparison with the floor (one call).
var callsPerOp = map[string]int{
	"allow-fixed_window": 1, "allow-sliding_window": 1, "allow-sliding_log": 1, "allow-token_bucket": 1, "allow-leaky_bucket": 1,
	"allow-hot": 1,
	"enqueue":   1, "lock-release": 2, "lock-contention": 2, "idem": 2,
	scRedlock: 2,
}

func (rep *Report) find(scenario, target string) *Result {
	for _, r := range rep.Results {
		if r.Scenario == scenario && r.Target == target {
			return r
		}
	}
	return nil
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

func p99(r *Result) float64 {
	if r == nil || r.Latency == nil {
		return 0
	}
	return r.Latency.P99
}

// analyze computes the ratios and the goals.
func (rep *Report) analyze() {
	rep.Ratios = nil
	floor := rep.find("empty", tCoordd)
	bare := rep.find("empty", tBare)
	if floor != nil && bare != nil {
		rep.Ratios = append(rep.Ratios, Ratio{Scenario: "empty", Vs: tBare,
			Ops: ratio(floor.OpsPerSec, bare.OpsPerSec), P99: ratio(p99(floor), p99(bare)),
			CPU:  ratio(floor.ServerCPUPerOpUs, bare.ServerCPUPerOpUs),
			Note: "coordd's Health/Check over a bare server's empty method"})
	}
	var scenarios []string
	for _, r := range rep.Results {
		// A coordd that could not start (redlock-lock-release's) has no
		// ratios.
		if r.Target == tCoordd && r.Scenario != "empty" && r.Failed == "" {
			scenarios = append(scenarios, r.Scenario)
		}
	}
	for _, s := range scenarios {
		c := rep.find(s, tCoordd)
		for _, o := range rep.Results {
			if o.Scenario != s || o.Target == tCoordd || o.Failed != "" {
				continue
			}
			// CPU: a peer's server process's (0 for the libraries: no
			// server).
			rep.Ratios = append(rep.Ratios, Ratio{Scenario: s, Vs: o.Target,
				Ops: ratio(c.OpsPerSec, o.OpsPerSec), P99: ratio(p99(c), p99(o)), CPU: ratio(c.ServerCPUPerOpUs, o.ServerCPUPerOpUs)})
		}
		calls, ok := callsPerOp[s]
		if !ok {
			continue
		}
		for _, f := range []*Result{floor, bare} {
			if f == nil {
				continue
			}
			vs := "floor"
			if f.Target == tBare {
				vs = "bare-floor"
			}
			note := "coordd Health/Check"
			if f.Target == tBare {
				note = "bare gRPC empty method"
			}
			if calls > 1 {
				vs += "/" + strconv.Itoa(calls)
				note += fmt.Sprintf(", rate divided by %d: an op is %d calls", calls, calls)
			}
			rep.Ratios = append(rep.Ratios, Ratio{Scenario: s, Vs: vs,
				Ops:  ratio(c.OpsPerSec, f.OpsPerSec/float64(calls)),
				P99:  ratio(p99(c), p99(f)),
				CPU:  ratio(c.ServerCPUPerOpUs, f.ServerCPUPerOpUs*float64(calls)),
				Note: note})
		}
	}
	rep.binRatios()
	rep.speedGoals()
	rep.contentionGoals()
	rep.serviceGoals()
}

// binRatios compares, per scenario, each later --coordd-bin binary with the
// first one (coordd@after ÷ coordd@before).
func (rep *Report) binRatios() {
	var scenarios []string
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Target, tCoordd+"@") && !slices.Contains(scenarios, r.Scenario) {
			scenarios = append(scenarios, r.Scenario)
		}
	}
	for _, s := range scenarios {
		var first *Result
		for _, r := range rep.Results {
			if r.Scenario != s || !strings.HasPrefix(r.Target, tCoordd+"@") {
				continue
			}
			if first == nil {
				first = r
				continue
			}
			rep.Ratios = append(rep.Ratios, Ratio{Scenario: s, Vs: first.Target,
				Ops: ratio(r.OpsPerSec, first.OpsPerSec), P99: ratio(p99(r), p99(first)),
				CPU:  ratio(r.ServerCPUPerOpUs, first.ServerCPUPerOpUs),
				Note: r.Target + " ÷ " + first.Target + " (binaries of --coordd-bin, same run)"})
		}
	}
}

func (rep *Report) ratioOf(scenario, vs string) *Ratio {
	for i := range rep.Ratios {
		if rep.Ratios[i].Scenario == scenario && rep.Ratios[i].Vs == vs {
			return &rep.Ratios[i]
		}
	}
	return nil
}

// The sets of targets, in the order the report prints them.
const (
	setSpeed      = "speed"      // the per-call cost of coordd's calls (speedGoals)
	setContention = "contention" // waiting without a herd (contentionGoals)
	setServices   = "services"   // coordd against the services deployed instead (serviceGoals)
)

var goalSets = []string{setSpeed, setContention, setServices}

// addGoal adds a goal of set: "not measured" with why if why is set,
// else "met" or "NOT met" by ok, with the value measured.
func (rep *Report) addGoal(set, goal string, v float64, measured string, ok bool, why string) {
	g := Goal{Set: set, Goal: goal, Value: v, Measured: measured, Status: "NOT met"}
	switch {
	case why != "":
		g.Status, g.Measured, g.Value = "not measured", why, 0
	case ok:
		g.Status = "met"
	}
	rep.Goals = append(rep.Goals, g)
}

// speedGoals evaluates the speed targets (the per-call cost of coordd's
// calls against the floor of a gRPC call) that this run measured.
func (rep *Report) speedGoals() {
	rep.Goals = nil
	store := rep.Config.Store
	add := func(goal string, v float64, measured string, ok bool, why string) {
		rep.addGoal(setSpeed, goal, v, measured, ok, why)
	}
	// The floor of the goals is the bare gRPC server's empty call (gRPC
	// itself); the same ratio to coordd's own
	// Health/Check (gRPC plus coordd's interceptors) is shown beside it.
	also := func(scenario, vs string, pick func(*Ratio) float64) string {
		if !strings.HasPrefix(vs, "bare-floor") {
			return ""
		}
		if r := rep.ratioOf(scenario, strings.TrimPrefix(vs, "bare-")); r != nil && pick(r) != 0 {
			return fmt.Sprintf(" (vs coordd's Health/Check: %.2f×)", pick(r))
		}
		return ""
	}
	check := func(goal, scenario, vs string, pick func(*Ratio) float64, needStore string, ok func(float64) bool) {
		switch r := rep.ratioOf(scenario, vs); {
		case needStore != "" && store != needStore:
			add(goal, 0, "", false, "needs coordd on the "+needStore+" store")
		case r == nil || pick(r) == 0:
			add(goal, 0, "", false, "scenario, baseline or measurement not run")
		default:
			add(goal, pick(r), fmt.Sprintf("%.2f×", pick(r))+also(scenario, vs, pick), ok(pick(r)), "")
		}
	}
	atLeast := func(goal, scenario, vs string, min float64, pick func(*Ratio) float64, needStore string) {
		check(goal, scenario, vs, pick, needStore, func(v float64) bool { return v >= min })
	}
	atMost := func(goal, scenario, vs string, max float64, pick func(*Ratio) float64, needStore string) {
		check(goal, scenario, vs, pick, needStore, func(v float64) bool { return v <= max })
	}
	ops := func(r *Ratio) float64 { return r.Ops }
	p99r := func(r *Ratio) float64 { return r.P99 }
	cpu := func(r *Ratio) float64 { return r.CPU }

	atLeast("Allow token bucket on Redis, ops/s ≥ 0.8× the empty gRPC call", "allow-token_bucket", "bare-floor", 0.8, ops, "redis")
	atLeast("Allow token bucket on Redis, ops/s ≥ 1.0× redis_rate", "allow-token_bucket", tRedisRate, 1.0, ops, "redis")
	atMost("Allow token bucket on Redis, p99 ≤ 2× redis_rate's", "allow-token_bucket", tRedisRate, 2.0, p99r, "redis")
	atLeast("Lock+Release on Redis, cycles/s ≥ 0.8× half the empty-call rate", "lock-release", "bare-floor/2", 0.8, ops, "redis")
	if r := rep.ratioOf("lock-release", tRedislock); r != nil {
		add("Lock+Release, ratio to redislock (reported, no threshold)", r.Ops, fmt.Sprintf("%.2f× (p99 %.2f×)", r.Ops, r.P99), true, "")
		rep.Goals[len(rep.Goals)-1].Status = "reported"
	} else {
		add("Lock+Release, ratio to redislock (reported, no threshold)", 0, "", false, "baseline not run")
	}
	atLeast("queue-e2e, msgs/s end to end ≥ 2× asynq (concurrency 64)", "queue-e2e", tAsynq, 2.0, ops, "redis")
	for _, a := range algorithmNames {
		atLeast("Allow "+a+" on the memory store, ops/s ≥ 0.9× the empty gRPC call", "allow-"+a, "bare-floor", 0.9, ops, "memory")
	}
	atMost("coordd CPU per Allow (token bucket, Redis) ≤ 1.5× CPU per empty gRPC call", "allow-token_bucket", "bare-floor", 1.5, cpu, "redis")

	const rssGoal = 200 << 20
	s := rep.find("sessions", tCoordd)
	switch {
	case s == nil || s.Sessions == nil:
		add("10,000 sessions with one lock each: coordd RSS ≤ 200 MB (bytes per session reported)", 0, "", false, "sessions scenario not run")
	case s.Sessions.RSSPeak == 0:
		add("10,000 sessions with one lock each: coordd RSS ≤ 200 MB (bytes per session reported)", 0, "", false, "needs --coordd-pid")
	case s.Sessions.Open < 10000 || s.Sessions.LocksEach != 1:
		add("10,000 sessions with one lock each: coordd RSS ≤ 200 MB (bytes per session reported)", 0, "", false,
			fmt.Sprintf("run had %d sessions × %d locks", s.Sessions.Open, s.Sessions.LocksEach))
	default:
		add("10,000 sessions with one lock each: coordd RSS ≤ 200 MB (bytes per session reported)", float64(s.Sessions.RSSPeak),
			fmt.Sprintf("%s peak (%s before), %.0f B/session", fmtBytes(s.Sessions.RSSPeak), fmtBytes(s.Sessions.RSSBefore), s.Sessions.BytesPerSession),
			s.Sessions.RSSPeak <= rssGoal, "")
	}
}

// fmtUs formats microseconds for a table.
func fmtUs(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.1fµs", v)
	case v < 1000:
		return fmt.Sprintf("%.0fµs", v)
	case v < 1e6:
		return fmt.Sprintf("%.2fms", v/1000)
	default:
		return fmt.Sprintf("%.2fs", v/1e6)
	}
}

func fmtBytes(n int64) string {
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// fmtInt formats with thousands separators.
func fmtInt(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v)
}

// writeText prints the results table, the ratios and the goals.
func (rep *Report) writeText(out io.Writer) {
	c, m := rep.Config, rep.Machine
	fmt.Fprintf(out, "coordbench run %s, %s to %s\n", rep.RunID, rep.Start, rep.End)
	if c.Label != "" {
		fmt.Fprintf(out, "%s\n", c.Label)
	}
	if len(rep.Binaries) > 0 {
		fmt.Fprintf(out, "coordd binaries, started in turn by coordbench (--coordd-bin; one at a time, each on ports of its own):\n")
		for _, b := range rep.Binaries {
			fmt.Fprintf(out, "  coordd@%s: %s (pid %d, %s)\n", b.Label, b.Path, b.PID, b.Addr)
		}
		fmt.Fprintf(out, "%s store, %d callers, %d conn(s), %v per target after %v warm-up, %d keys\n",
			c.Store, c.Concurrency, c.Conns, c.Duration, c.Warmup, c.Keys)
	} else {
		fmt.Fprintf(out, "coordd %s (%s store), %d callers, %d conn(s), %v per target after %v warm-up, %d keys\n",
			c.Addr, c.Store, c.Concurrency, c.Conns, c.Duration, c.Warmup, c.Keys)
	}
	if c.Rate > 0 {
		fmt.Fprintf(out, "paced: at most %g operations a second started by the callers of every closed-loop target (--rate)\n", c.Rate)
	}
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s, %s/%s", m.NumCPU, m.CPUModel, m.GoVersion, m.GOOS, m.GOARCH)
	if m.RedisVersion != "" {
		fmt.Fprintf(out, ", Redis %s (%s: %s)", m.RedisVersion, c.RedisMode, strings.Join(c.Redis, ","))
	}
	if len(c.Redlock) > 0 {
		fmt.Fprintf(out, ", Redlock masters %s", strings.Join(c.Redlock, ","))
	}
	fmt.Fprintf(out, "; load average %.2f at start, %.2f at end\n\n", m.LoadStart, m.LoadEnd)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\ttarget\tops/s\tp50\tp99\tp99.9\terrors\tmisses\tserver CPU/op\tload\t")
	row := func(r *Result, name string) {
		var p50, p99, p999 float64
		if r.Latency != nil {
			p50, p99, p999 = r.Latency.P50, r.Latency.P99, r.Latency.P999
		}
		rate := fmtInt(r.OpsPerSec)
		if r.Failed != "" {
			rate = "failed"
		}
		if r.Unit != "" {
			rate += " " + r.Unit
		}
		load := "-"
		if r.LoadBefore != 0 || r.LoadAfter != 0 {
			load = fmt.Sprintf("%.1f", r.LoadAfter)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t\n", name, r.Target, rate,
			fmtUs(p50), fmtUs(p99), fmtUs(p999), r.Errors, r.Misses, fmtUs(r.ServerCPUPerOpUs), load)
	}
	for _, r := range rep.Results {
		row(r, r.Scenario)
		for _, p := range r.Phases {
			row(p, "  "+p.Scenario)
		}
	}
	_ = tw.Flush()

	for _, r := range rep.Results {
		if r.Sessions != nil && r.Sessions.RSSPeak > 0 {
			s := r.Sessions
			fmt.Fprintf(out, "\nsessions: %d opened (%d live at the end) × %d lock(s), ttl %s, on %d connections: coordd RSS %s before, %s open, %s peak: %.0f bytes per session\n",
				s.Open, s.Live, s.LocksEach, s.TTL, s.Connections, fmtBytes(s.RSSBefore), fmtBytes(s.RSSOpen), fmtBytes(s.RSSPeak), s.BytesPerSession)
			if p := s.perSession(); p != "" {
				fmt.Fprintf(out, "  coordd's Go runtime %s\n", p)
			}
		}
	}
	rep.writeContention(out)
	var failed []string
	for _, r := range rep.Results {
		if r.Failed != "" {
			failed = append(failed, fmt.Sprintf("  %s/%s: %s", r.Scenario, r.Target, strings.ReplaceAll(r.Failed, "\n", "\n    ")))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "\nfailed (not measured):\n%s\n", strings.Join(failed, "\n"))
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(out, "\nskipped:\n  %s\n", strings.Join(rep.Skipped, "\n  "))
	}
	var costs []*Result
	for _, r := range rep.Results {
		if r.Redis != nil {
			costs = append(costs, r)
		}
	}
	if len(costs) > 0 {
		masters := fmt.Sprintf("the %d master(s)", costs[0].Redis.Masters)
		for _, r := range costs {
			if r.Redis.Masters != costs[0].Redis.Masters {
				masters = "each row's masters (--redis's; --redlock's for " + scRedlock + ")"
			}
		}
		fmt.Fprintf(out, "\nRedis per op (INFO of %s around each measurement; other clients of the same Redis count too):\n", masters)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\ttarget\tcommands\tscripts\tbytes in\tbytes out\tRedis CPU\tcommands run")
		for _, r := range costs {
			c := r.Redis
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.0f\t%.0f\t%s\t%s\n", r.Scenario, r.Target, c.CommandsPerOp, c.ScriptsPerOp,
				c.BytesInPerOp, c.BytesOutPerOp, fmtUs(c.CPUPerOpUs), c.topCalls(6))
		}
		_ = tw.Flush()
	}
	var errs []string
	for _, r := range rep.Results {
		if r.FirstError != "" {
			errs = append(errs, fmt.Sprintf("  %s/%s: %s", r.Scenario, r.Target, r.FirstError))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(out, "\nfirst errors:\n%s\n", strings.Join(errs, "\n"))
	}

	if len(rep.Ratios) > 0 {
		fmt.Fprintf(out, "\nratios (coordd ÷ other: ops/s higher is better for coordd; p99 and CPU/op lower is better):\n")
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\tcoordd vs\tops/s\tp99\tCPU/op\tnote")
		for _, r := range rep.Ratios {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Vs, fmtRatio(r.Ops), fmtRatio(r.P99), fmtRatio(r.CPU), r.Note)
		}
		_ = tw.Flush()
	}
	for _, set := range goalSets {
		var goals []Goal
		for _, g := range rep.Goals {
			if g.Set == set {
				goals = append(goals, g)
			}
		}
		if len(goals) == 0 {
			continue
		}
		if !slices.ContainsFunc(goals, func(g Goal) bool { return g.Status != "not measured" }) {
			fmt.Fprintf(out, "\ngoals (%s): none measured by this run (its scenarios, store or baselines)\n", set)
			continue
		}
		fmt.Fprintf(out, "\ngoals (%s):\n", set)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, g := range goals {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Goal, g.Status, g.Measured)
		}
		_ = tw.Flush()
	}
}

func (rep *Report) writeJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
