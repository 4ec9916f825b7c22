package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// allScenarios is every scenario, in the order they run. The empty call
// always runs first: it is the floor the others are compared with.
var allScenarios = []string{
	"empty",
	"sessions",
	"allow-fixed_window", "allow-sliding_window", "allow-sliding_log", "allow-token_bucket", "allow-leaky_bucket",
	"allow-hot",
	"should-rate-limit",
	"lock-release", "lock-contention", "semaphore-contention",
	"idem",
	"enqueue",
	"queue-e2e",
	"queue-partitions",
	scRedlock,
}

// scRedlock is Lock + Release on a coordd in Redlock mode and on redsync
// (peer_redsync.go). It needs --redlock: the groups hold it only then, and
// naming it without --redlock is an error.
const scRedlock = "redlock-lock-release"

// scenarioGroups are shorthands accepted by --scenarios.
var scenarioGroups = map[string][]string{
	"all":        allScenarios,
	"allow":      {"allow-fixed_window", "allow-sliding_window", "allow-sliding_log", "allow-token_bucket", "allow-leaky_bucket"},
	"lock":       {"lock-release", "lock-contention"},
	"queue":      {"enqueue", "queue-e2e", "queue-partitions"},
	"contention": {"lock-contention", "semaphore-contention"},
}

// config is the parsed command line.
type config struct {
	Addr        string        `json:"addr"`
	APIKey      string        `json:"-"`
	Namespace   string        `json:"namespace"`
	Conns       int           `json:"conns"`
	Redis       []string      `json:"redis,omitempty"`
	RedisMode   string        `json:"redis_mode,omitempty"`
	RedisPool   int           `json:"redis_pool_size,omitempty"`
	KeyPrefix   string        `json:"key_prefix"`
	LuaDir      string        `json:"lua_dir,omitempty"`
	Concurrency int           `json:"concurrency"`
	Rate        float64       `json:"rate,omitempty"`
	Duration    time.Duration `json:"-"`
	Warmup      time.Duration `json:"-"`
	Keys        int           `json:"keys"`
	Queues      int           `json:"queues"`
	Scenarios   []string      `json:"scenarios"`
	Baseline    bool          `json:"baseline"`
	JSONFile    string        `json:"-"`
	CoorddPID   int           `json:"coordd_pid,omitempty"`
	CoorddMetr  string        `json:"coordd_metrics,omitempty"`
	Store       string        `json:"store"`
	Sessions    int           `json:"sessions"`
	LocksPerSes int           `json:"locks_per_session"`
	SessionTTL  time.Duration `json:"-"`
	QueueMsgs   int           `json:"queue_messages"`
	// QueueMaxInFlight, if > 0, adds queue-e2e's target coordd-capped:
	// coordd on a queue capped at that many in flight.
	QueueMaxInFlight int           `json:"queue_max_in_flight,omitempty"`
	ClaimMax         int           `json:"claim_max"`
	AckBatch         bool          `json:"ack_batch"`
	EmptyServer      string        `json:"empty_server"`
	Quiet            bool          `json:"-"`
	Label            string        `json:"label,omitempty"`
	Hold             time.Duration `json:"-"`
	SemLimit         int           `json:"semaphore_limit"`
	Bins             []binSpec     `json:"coordd_bins,omitempty"`
	Peers            []string      `json:"peers"`
	EnvoyBin         string        `json:"envoy_ratelimit_bin,omitempty"`
	// Redlock are the independent standalone masters of
	// redlock-lock-release; RedlockBin the coordd that coordbench starts
	// in Redlock mode on them.
	Redlock    []string `json:"redlock,omitempty"`
	RedlockBin string   `json:"redlock_coordd_bin,omitempty"`

	// For the JSON output, durations as strings.
	DurationS   string `json:"duration"`
	WarmupS     string `json:"warmup"`
	SessionTTLS string `json:"session_ttl"`
	HoldS       string `json:"hold"`
}

// binSpec is one coordd binary of --coordd-bin.
type binSpec struct {
	Label string `json:"label"`
	Path  string `json:"path"`
}

func (c *config) has(scenario string) bool { return slices.Contains(c.Scenarios, scenario) }

const usageText = `coordbench drives a running coordd through its generated Go client and,
with --baseline, runs the same work the library way against the same Redis in
the same run: the same Lua scripts sent straight to Redis with go-redis, and
redis_rate (Allow), redislock (locks) and asynq (queue). It prints ops/s and
p50/p99/p99.9 per scenario and target, ratios to the baselines and to the empty
gRPC call (the floor), and, with --json, all of it as JSON.

Usage: coordbench [flags]

Scenarios (--scenarios, comma separated; groups: all, allow, lock, queue,
contention):
  empty              grpc.health.v1.Health/Check on coordd, and an empty unary
                     method on a bare gRPC server (always run: the floor)
  sessions           --sessions KeepAlive streams with --locks-per-session
                     session-bound locks each, heartbeats every ttl/3 from
                     the moment each opens (a broken stream is resumed);
                     coordd's RSS (--coordd-pid) and Go runtime
                     (--coordd-metrics) per session
  allow-ALGORITHM    Allow with an inline limit that always allows, on --keys
                     random keys; ALGORITHM: fixed_window, sliding_window,
                     sliding_log, token_bucket, leaky_bucket
  allow-hot          Allow on one key over its limit (token bucket, 1 an
                     hour): every call is denied; coordd may answer from its
                     deny cache, the baselines ask Redis every time
  should-rate-limit  Envoy's ShouldRateLimit (envoy.service.ratelimit.v3) on
                     coordd, domain coordbench, descriptor key=KEY on --keys
                     random keys, a fixed window that always allows; coordd's
                     ratelimit.envoy_config must hold that domain (coordbench
                     coordd-config prints it; --coordd-bin gives it one)
  lock-release       Lock + Release on random names of --keys
  lock-contention    --concurrency callers on one name, each looping Lock
                     (wait) → --hold → Release; per grant: store scripts
                     (with --redis), grants/s, hand-off and wait latency
  semaphore-contention
                     the same with SemaphoreService Acquire (wait, limit
                     --semaphore-limit) → --hold → Release on one name;
                     skipped if the server answers Unimplemented
  idem               BeginIdempotent + Finish on unique keys
  enqueue            Enqueue of a tiny message onto --queues queues
  queue-e2e          enqueue --queue-messages tiny messages, then consume them
                     all (Claim up to --claim-max, then Ack each, or the
                     batch at once with --ack-batch)
  queue-partitions   queue-e2e's coordd run on queue cb-parts, which coordd
                     spreads over 3 partitions (its configuration must say
                     so: coordbench coordd-config prints it); with --redis,
                     each master's share of the Redis CPU
  redlock-lock-release
                     Lock (ttl 8s, no wait) + Release on random names of
                     --keys, on a coordd in Redlock mode over the --redlock
                     masters, started by coordbench from --redlock-coordd-bin
                     (without it the coordd row is skipped: the coordd at
                     --addr is not in Redlock mode), and on redsync (peer)
                     over the same masters; Redis per op from their INFO.
                     Only with --redlock (then all includes it); runs once,
                     after the other scenarios. At the end every key either
                     wrote is deleted from the --redlock masters

Peers (--peers, comma separated, or all, the default, or none): services
users would deploy instead of coordd, started by coordbench on loopback
ports, each measured in the scenario it compares with when that scenario
runs (see docs/benchmarks.md):
  etcd               lock-release: a single-node etcd (embedded, in a child
                     process; fsync off), concurrency.Mutex TryLock + Unlock
  etcd-fsync         the same with fsync on
  gubernator         allow-token_bucket: one gubernator node (child process),
                     GetRateLimits with the same token bucket
  envoy-rl           allow-fixed_window and should-rate-limit:
                     envoyproxy/ratelimit's server on the Redis of --redis,
                     ShouldRateLimit with a descriptor whose limit is the
                     scenario's; built with go install unless
                     --envoy-ratelimit-bin
  redsync            redlock-lock-release: github.com/go-redsync/redsync/v4's
                     Mutex over the --redlock masters (goredis v9 pools),
                     TryLock + Unlock, expiry 8s, one try
A peer that cannot start gets a row that says why; the run goes on.

With --coordd-bin before=PATH,after=PATH coordbench starts each binary in
turn (on free loopback ports, with its own environment plus COORDD_STORE and,
with --redis, COORDD_REDIS_ADDRS, _MODE and _KEY_PREFIX from these flags) and
runs the scenarios against each; rows are named coordd@LABEL, and the report
compares each later binary with the first in the same run.

With --redlock A,B,C,D,E (N independent standalone redis-servers, N odd, at
least 3) and --redlock-coordd-bin PATH, redlock-lock-release starts PATH on
free loopback ports with COORDD_STORE=redis, COORDD_REDIS_MODE=redlock,
COORDD_REDIS_ADDRS=A,...,E and COORDD_REDIS_KEY_PREFIX=KEYPREFIX:redlock:RUNID
(a prefix of the run's own under --key-prefix, so that clean-up deletes this
coordd's keys and nothing else), measures it, and stops it.

Flags (-flag and --flag are the same):
`

// parseArgs parses the command line; usage goes to out on -h or an error.
func parseArgs(args []string, out io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("coordbench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		_, _ = io.WriteString(out, usageText)
		fs.PrintDefaults()
	}
	var redis, scenarios, redlock string
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:7070", "coordd's gRPC address")
	fs.StringVar(&c.APIKey, "api-key", "", "API key, sent as the header \"authorization: Bearer KEY\" (auth.enabled)")
	fs.StringVar(&c.Namespace, "namespace", "default", "coordd's namespace of the calls (the API key's; for cleaning its keys out of Redis)")
	fs.IntVar(&c.Conns, "conns", 1, "gRPC connections to coordd, shared round-robin by the workers")
	fs.StringVar(&redis, "redis", "", "Redis for --baseline (comma list: a Cluster's seed addresses, or one address); the one coordd uses")
	fs.StringVar(&c.RedisMode, "redis-mode", "auto", "cluster, standalone, or auto (cluster with more than one address)")
	fs.IntVar(&c.RedisPool, "redis-pool-size", 0, "go-redis pool size per node for the baselines (0: go-redis's default, as coordd's redis.pool_size 0)")
	fs.StringVar(&c.KeyPrefix, "key-prefix", "coord", "coordd's redis.key_prefix: the direct scripts use its key layout, in a namespace of their own")
	fs.StringVar(&c.LuaDir, "lua-dir", "", "coordd's Lua scripts (default: internal/store/redis/lua of the repository holding the working directory or the executable)")
	fs.IntVar(&c.Concurrency, "concurrency", 64, "concurrent callers (and queue producers and consumers, and asynq's Concurrency)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured time per scenario and target")
	fs.DurationVar(&c.Warmup, "warmup", time.Second, "unmeasured time before each measurement")
	fs.Float64Var(&c.Rate, "rate", 0, "operations per second the --concurrency callers start together, for every target of the closed-loop scenarios (0: as fast as they can), so that targets compare at the same rate: e.g. an Allow paced as the sessions scenario's heartbeats are")
	fs.IntVar(&c.Keys, "keys", 10000, "key space: rate-limit keys, lock names")
	fs.IntVar(&c.Queues, "queues", 16, "queues the enqueue scenario spreads over")
	fs.StringVar(&scenarios, "scenarios", "all", "scenarios to run, comma separated (see above)")
	fs.BoolVar(&c.Baseline, "baseline", false, "also run the library-way baselines (needs --redis)")
	fs.StringVar(&c.JSONFile, "json", "", "write the results as JSON to this file")
	fs.IntVar(&c.CoorddPID, "coordd-pid", 0, "coordd's PID: its CPU time and RSS are read from /proc around each run")
	fs.StringVar(&c.CoorddMetr, "coordd-metrics", "", "coordd's /metrics URL (http://HTTP_ADDR/metrics): the sessions scenario reads its goroutines, heap and stacks")
	fs.StringVar(&c.Store, "store", "", "coordd's store, for the report and the goals: memory or redis (default: redis with --redis, else memory)")
	fs.IntVar(&c.Sessions, "sessions", 10000, "sessions scenario: KeepAlive streams")
	fs.IntVar(&c.LocksPerSes, "locks-per-session", 1, "sessions scenario: session-bound locks per session")
	fs.DurationVar(&c.SessionTTL, "session-ttl", 10*time.Second, "sessions scenario: session TTL (a heartbeat every ttl/3)")
	fs.IntVar(&c.QueueMsgs, "queue-messages", 50000, "queue-e2e: messages enqueued then processed")
	fs.IntVar(&c.QueueMaxInFlight, "queue-max-in-flight", 0, "queue-e2e: also run coordd on a queue capped at this many messages in flight (ConfigureQueue; coordd after commit 51b2ed8), as target coordd-capped; 0: not")
	fs.IntVar(&c.ClaimMax, "claim-max", 32, "queue-e2e: max_messages of each Claim")
	fs.BoolVar(&c.AckBatch, "ack-batch", false, "queue-e2e: ack each claimed batch in one Ack (AckRequest.receipts; coordd after commit 1438250) instead of one Ack per message")
	fs.StringVar(&c.EmptyServer, "empty-server", "child", "where the bare gRPC server of the empty floor runs: child (a process of its own, like coordd) or inprocess")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress lines on stderr")
	fs.StringVar(&c.Label, "label", "", "free text for the report, e.g. the coordd commit measured")
	fs.DurationVar(&c.Hold, "hold", 0, "lock-contention, semaphore-contention: how long a holder keeps the lock or permit before Release (0: releases at once)")
	fs.IntVar(&c.SemLimit, "semaphore-limit", 4, "semaphore-contention: the semaphore's limit (permits)")
	var bins, peers string
	fs.StringVar(&peers, "peers", "all", "peers to measure beside coordd, comma separated: etcd, etcd-fsync, gubernator, envoy-rl, redsync, all or none (see above)")
	fs.StringVar(&c.EnvoyBin, "envoy-ratelimit-bin", "", "envoy-rl: a built envoyproxy/ratelimit server (default: go install of "+envoyRatelimitVersion+" into a temporary directory)")
	fs.StringVar(&bins, "coordd-bin", "", "LABEL=PATH,...: start each coordd binary in turn and run the scenarios against each (instead of --addr); see above")
	fs.StringVar(&redlock, "redlock", "", "redlock-lock-release: N independent standalone redis-servers (comma list, N odd, at least 3) for coordd's Redlock mode and redsync; see above")
	fs.StringVar(&c.RedlockBin, "redlock-coordd-bin", "", "redlock-lock-release: the coordd binary coordbench starts in Redlock mode on the --redlock servers (without it coordd's row is skipped)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	for _, a := range strings.Split(redis, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.Redis = append(c.Redis, a)
		}
	}
	if c.Redlock, err = parseRedlock(redlock); err != nil {
		return nil, err
	}
	if c.Scenarios, err = parseScenarios(scenarios, len(c.Redlock) > 0); err != nil {
		return nil, err
	}
	if c.Bins, err = parseBins(bins); err != nil {
		return nil, err
	}
	if c.Peers, err = parsePeers(peers); err != nil {
		return nil, err
	}
	switch c.RedisMode {
	case "auto":
		c.RedisMode = "standalone"
		if len(c.Redis) > 1 {
			c.RedisMode = "cluster"
		}
	case "cluster", "standalone":
	default:
		return nil, fmt.Errorf("--redis-mode: %q is not cluster, standalone or auto", c.RedisMode)
	}
	if len(c.Redis) == 0 {
		c.RedisMode = ""
	}
	switch c.Store {
	case "":
		c.Store = "memory"
		if len(c.Redis) > 0 {
			c.Store = "redis"
		}
	case "memory", "redis":
	default:
		return nil, fmt.Errorf("--store: %q is not memory or redis", c.Store)
	}
	switch c.EmptyServer {
	case "child", "inprocess":
	default:
		return nil, fmt.Errorf("--empty-server: %q is not child or inprocess", c.EmptyServer)
	}
	switch {
	case c.Baseline && len(c.Redis) == 0:
		return nil, errors.New("--baseline needs --redis: the Redis coordd uses")
	case c.Concurrency < 1:
		return nil, errors.New("--concurrency must be at least 1")
	case c.Conns < 1:
		return nil, errors.New("--conns must be at least 1")
	case c.Duration <= 0:
		return nil, errors.New("--duration must be positive")
	case c.Warmup < 0:
		return nil, errors.New("--warmup must not be negative")
	case c.Rate < 0:
		return nil, errors.New("--rate must not be negative")
	case c.Keys < 1:
		return nil, errors.New("--keys must be at least 1")
	case c.Queues < 1:
		return nil, errors.New("--queues must be at least 1")
	case c.Sessions < 1 || c.LocksPerSes < 0:
		return nil, errors.New("--sessions must be at least 1 and --locks-per-session at least 0")
	case c.SessionTTL < 3*time.Millisecond:
		return nil, errors.New("--session-ttl is too short")
	case c.QueueMsgs < 1:
		return nil, errors.New("--queue-messages must be at least 1")
	case c.ClaimMax < 1 || c.ClaimMax > 1000:
		return nil, errors.New("--claim-max must be between 1 and 1000")
	case strings.ContainsAny(c.KeyPrefix, "{}") || c.KeyPrefix == "":
		return nil, errors.New("--key-prefix must be non-empty and without braces")
	case c.CoorddPID < 0:
		return nil, errors.New("--coordd-pid must be positive")
	case c.Hold < 0:
		return nil, errors.New("--hold must not be negative")
	case c.SemLimit < 1:
		return nil, errors.New("--semaphore-limit must be at least 1")
	case len(c.Bins) > 0 && c.Baseline:
		return nil, errors.New("--coordd-bin and --baseline do not go together: the baselines do not depend on the binary")
	case len(c.Bins) > 0 && (c.CoorddPID != 0 || c.CoorddMetr != ""):
		return nil, errors.New("--coordd-bin starts the binaries itself: --coordd-pid and --coordd-metrics are its own")
	case c.RedlockBin != "" && len(c.Redlock) == 0:
		return nil, errors.New("--redlock-coordd-bin needs --redlock: the masters it runs on")
	}
	c.DurationS, c.WarmupS, c.SessionTTLS, c.HoldS = c.Duration.String(), c.Warmup.String(), c.SessionTTL.String(), c.Hold.String()
	return c, nil
}

// parseScenarios expands a comma list of scenarios and groups into
// scenarios in run order, with the empty floor always first. Without
// redlock (--redlock) the groups leave out redlock-lock-release, and naming
// it is an error.
func parseScenarios(s string, redlock bool) ([]string, error) {
	want := map[string]bool{"empty": true}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if g, ok := scenarioGroups[name]; ok {
			for _, n := range g {
				want[n] = n != scRedlock || redlock
			}
			continue
		}
		if !slices.Contains(allScenarios, name) {
			return nil, fmt.Errorf("--scenarios: unknown scenario %q (known: %s, and the groups all, allow, lock, queue, contention)",
				name, strings.Join(allScenarios, ", "))
		}
		if name == scRedlock && !redlock {
			return nil, fmt.Errorf("--scenarios: %s needs --redlock: the standalone masters it runs on", scRedlock)
		}
		want[name] = true
	}
	var out []string
	for _, n := range allScenarios {
		if want[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

// parseBins parses --coordd-bin: LABEL=PATH pairs, comma separated, with
// distinct labels of letters, digits, '.', '_' and '-'.
func parseBins(s string) ([]binSpec, error) {
	var out []binSpec
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		label, path, ok := strings.Cut(part, "=")
		if !ok || label == "" || path == "" {
			return nil, fmt.Errorf("--coordd-bin: %q is not LABEL=PATH", part)
		}
		if strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			return nil, fmt.Errorf("--coordd-bin: label %q: only letters, digits, '.', '_' and '-'", label)
		}
		if slices.ContainsFunc(out, func(b binSpec) bool { return b.Label == label }) {
			return nil, fmt.Errorf("--coordd-bin: label %q given twice", label)
		}
		out = append(out, binSpec{Label: label, Path: path})
	}
	return out, nil
}

// parseRedlock parses --redlock: distinct addresses, comma separated, an
// odd number of them and at least 3 (a majority must outlive a failure),
// or none.
func parseRedlock(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if slices.Contains(out, a) {
			return nil, fmt.Errorf("--redlock: %s given twice", a)
		}
		out = append(out, a)
	}
	if len(out) > 0 && (len(out) < 3 || len(out)%2 == 0) {
		return nil, fmt.Errorf("--redlock: %d servers; Redlock needs an odd number, at least 3", len(out))
	}
	return out, nil
}
