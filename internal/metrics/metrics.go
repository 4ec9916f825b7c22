// Package metrics holds coordd's domain metrics, on a private Prometheus
// registry, under the namespace "coordd". Every label value is bounded: an
// enum (an outcome, an algorithm, a loss reason), an operator's configuration
// (a policy name, a queue named in metrics.queues, a Redis node), or the
// name of a store operation — never a lock name, a key, a token or anything
// else a client chooses.
//
// Label values are plain strings: the callers turn their own types into
// them (a store.LossReason in internal/server, an algorithm by
// limiter.AlgorithmName), so that this package depends on no store type.
//
// gRPC call latency is kept apart from waiting: grpc_server_handling_seconds
// holds only unary calls that do not ask to wait, and
// coordd_grpc_wait_seconds the calls that do (a Lock, Acquire, Campaign,
// Allow, BeginIdempotent or Claim with wait > 0), which last up to their
// wait by design. Streams (KeepAlive, Observe) are in neither: their
// lifetime is no latency. Mixed in one histogram, a few long polls would
// make its p99 the wait time, and a latency alert would page on a client's
// choice of wait. They are two metrics, not one with a label, so that a query
// that forgets a matcher still gets latency, each has the buckets its range
// needs, and grpc_server_handled_total keeps its labels.
//
// Every series whose label values are known at start (an enum, a
// configured policy, a registered method) exists from the start, at 0, so
// that rate() and the alerts see its first event.
//
// A nil *Metrics is valid and records nothing, so that tests and tools can
// run the server without it.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "coordd"

// Metrics are the domain metrics.
type Metrics struct {
	sessions      prometheus.Gauge
	decisions     *prometheus.CounterVec // by policy, algorithm, result
	policyChanges *prometheus.CounterVec // by op
	denyCacheHits prometheus.Counter
	envoy         *prometheus.CounterVec // by domain, descriptor, outcome
	idem          *prometheus.CounterVec // by outcome
	queueOps      *prometheus.CounterVec // by op
	queueHeld     *prometheus.CounterVec // by reason
	schedTicks    prometheus.Counter
	schedMissed   prometheus.Counter
	schedFailed   prometheus.Counter
	storeDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec // by op, kind
	panics        prometheus.Counter
	authFailures  *prometheus.CounterVec // by reason
	rejected      *prometheus.CounterVec // by reason (limits against abuse)

	holdsGranted   *prometheus.CounterVec   // by kind, mode
	holdsContended *prometheus.CounterVec   // by kind
	holdWait       *prometheus.HistogramVec // by kind
	holdDuration   *prometheus.HistogramVec // by kind
	holdsLost      *prometheus.CounterVec   // by kind, reason
	holdsExpired   *prometheus.CounterVec   // by kind
	holdersAtGrant *prometheus.HistogramVec // by kind
	observers      prometheus.Gauge

	rpcLatency *prometheus.HistogramVec // unary calls that do not wait, by grpc_type ("unary"), grpc_service, grpc_method
	rpcWait    *prometheus.HistogramVec // calls with wait > 0, by grpc_service, grpc_method
}

// LatencyBuckets are grpc_server_handling_seconds' buckets: from 50µs (most
// calls take well under a millisecond; Prometheus' default buckets start at
// 5ms) to 10s. A call that does not wait answers within the store timeout
// (twice redis.timeout, 1s by default); waiting calls are not in it.
var LatencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// WaitBuckets are coordd_grpc_wait_seconds' buckets: from 1ms (a waiting
// call that found what it asked for at once) to a minute (limits.max_wait).
var WaitBuckets = []float64{0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60}

// Hold kinds and modes, the label values of the hold metrics. Every series
// of them exists from the start, at 0.
var (
	holdModes = map[string][]string{
		"lock":      {"exclusive", "shared"},
		"semaphore": {"shared"}, // a permit coexists with the others
		"election":  {"exclusive"},
	}
	lossReasons   = []string{"max_hold", "session_expired", "gone"}
	idemOutcomes  = []string{"execute", "in_progress", "completed", "failed", "fingerprint_mismatch", "stored", "not_owner"}
	heldReasons   = []string{"paused", "max_in_flight", "claim_rate"} // store.HeldBackReasons
	queueOps      = []string{"enqueued", "duplicate", "replaced", "claimed", "acked", "nacked", "dead_lettered", "redriven", "purged", "receipt_expired"}
	authReasons   = []string{"UNAUTHENTICATED", "PERMISSION_DENIED", "REVOKED"}
	rejectReasons = []string{"too_many_waiters", "too_many_streams", "too_many_messages", "max_sessions", "store_latency"}
	// decisionResults are coordd_ratelimit_decisions_total's results.
	decisionResults = []string{"allowed", "denied", "shadow_denied", "degraded", "local_allowed", "local_denied"}
	policyChanges   = []string{"put", "deleted"}
)

// New registers the metrics on reg.
func New(reg prometheus.Registerer) *Metrics {
	f := factory{reg}
	m := &Metrics{
		sessions: f.gauge("session_streams", "KeepAlive streams open on this instance (streams, not sessions: a session whose stream broke lives on until its TTL, counted nowhere)."),
		decisions: f.counterVec("ratelimit_decisions_total",
			"Allow decisions by policy (\"inline\" for inline limits, \"runtime\" for every namespace's runtime policies together), algorithm and result "+
				"(allowed, denied, shadow_denied, degraded; local_allowed and local_denied: decided by this instance alone, the store unreachable, under a policy that fails local).",
			"policy", "algorithm", "result"),
		envoy: f.counterVec("envoy_ratelimit_decisions_total",
			"ShouldRateLimit decisions per descriptor, by domain, descriptor (the configuration's domain and keys, never a value; \"\" without a limit) and outcome "+
				"(ok, over_limit, shadow_over_limit, quota_over_limit, unlimited, replaced, no_limit). A domain not configured is \"unknown\".",
			"domain", "descriptor", "outcome"),
		policyChanges: f.counterVec("ratelimit_policy_changes_total", "Runtime rate-limit policies put and deleted through this instance, by op (put, deleted).", "op"),
		denyCacheHits: f.counter("ratelimit_deny_cache_hits_total", "Allow denials answered from the deny cache, without a round trip to the store."),
		idem: f.counterVec("idempotency_outcomes_total",
			"BeginIdempotent outcomes (execute, in_progress, completed, failed, fingerprint_mismatch) and Finish results (stored, not_owner).",
			"outcome"),
		queueOps: f.counterVec("queue_operations_total",
			"Queue operations by kind (enqueued, duplicate, replaced, claimed, acked, nacked, dead_lettered, redriven, purged, receipt_expired).",
			"op"),
		queueHeld: f.counterVec("queue_claims_held_back_total",
			"Claim steps in which a queue's settings kept ready messages back, by the setting (paused, max_in_flight, claim_rate).",
			"reason"),
		schedTicks:  f.counter("queue_schedule_ticks_total", "Schedule ticks whose message this instance enqueued (a tick another instance enqueued first is not counted here)."),
		schedMissed: f.counter("queue_schedule_missed_total", "Schedule ticks skipped after an outage of every instance (only the latest missed tick is enqueued)."),
		schedFailed: f.counter("queue_schedule_failures_total", "Schedule passes of one schedule that failed to enqueue its tick (retried the next second)."),
		storeDuration: f.histogramVec("store_duration_seconds", "Round trips to the store by operation.",
			prometheus.ExponentialBuckets(0.0001, 3, 10), "op"),
		storeErrors: f.counterVec("store_errors_total",
			"Store operations that failed, by operation and kind (unavailable: the store could not be reached; other).",
			"op", "kind"),
		panics: f.counter("panics_total", "Handler panics turned into INTERNAL."),
		authFailures: f.counterVec("auth_failures_total", "Calls refused by authentication, by reason (UNAUTHENTICATED, PERMISSION_DENIED; REVOKED: an open stream ended by a reload that revoked its credential).",
			"reason"),
		rejected: f.counterVec("rejected_total", "Calls refused by a limit against abuse or overload, by reason (max_sessions: a new session refused OVERLOADED at limits.max_sessions; store_latency: new work — a new session, a waiting call, an Observe stream — refused OVERLOADED while the store's latency is above limits.shed_store_latency).",
			"reason"),

		holdsGranted: f.counterVec("holds_granted_total",
			"New grants by kind (lock, semaphore, election) and mode (exclusive; shared: a shared lock, a semaphore permit). An already_held answer is no new grant.",
			"kind", "mode"),
		holdsContended: f.counterVec("holds_contended_total",
			"Acquisitions (Lock, Acquire, Campaign) that found the name taken, by kind, whether they then waited or not, and were granted or not.",
			"kind"),
		holdWait: f.histogramVec("hold_wait_seconds",
			"Time acquisitions with wait > 0 that found the name taken waited, until granted or given up, by kind.",
			prometheus.ExponentialBuckets(0.0005, 4, 10), "kind"),
		holdDuration: f.histogramVec("hold_duration_seconds",
			"Time from grant to release of the holds their holder gave back (Release, Resign, a session's half-close), by kind; its count is the releases.",
			prometheus.ExponentialBuckets(0.001, 4, 12), "kind"),
		holdsLost: f.counterVec("holds_lost_total",
			"Session-bound holds reported lost to their session, by kind and reason (max_hold, session_expired, gone).",
			"kind", "reason"),
		holdsExpired: f.counterVec("holds_expired_total",
			"Renewals refused because the lease had already run out, by kind.",
			"kind"),
		holdersAtGrant: f.histogramVec("hold_holders_at_grant",
			"Live holders of the name just after a grant, the new one included, by kind (1 for an exclusive lock and an election).",
			prometheus.ExponentialBuckets(1, 2, 14), "kind"),
		observers: f.gauge("election_observers", "Observe streams open on this instance."),

		rpcLatency: f.histogramVecNamed("grpc_server_handling_seconds",
			"Time unary gRPC calls that do not wait took, as the server handled them. Calls with wait > 0 are in coordd_grpc_wait_seconds; streams are in neither.",
			LatencyBuckets, "grpc_type", "grpc_service", "grpc_method"),
		rpcWait: f.histogramVec("grpc_wait_seconds",
			"Time gRPC calls with wait > 0 (Lock, Acquire, Campaign, Allow, BeginIdempotent, Claim) took, waiting included: up to their wait, by the client's choice.",
			WaitBuckets, "grpc_service", "grpc_method"),
	}
	for kind, modes := range holdModes {
		for _, mode := range modes {
			m.holdsGranted.WithLabelValues(kind, mode)
		}
		m.holdsContended.WithLabelValues(kind)
		m.holdWait.WithLabelValues(kind)
		m.holdDuration.WithLabelValues(kind)
		m.holdsExpired.WithLabelValues(kind)
		m.holdersAtGrant.WithLabelValues(kind)
		for _, r := range lossReasons {
			m.holdsLost.WithLabelValues(kind, r)
		}
	}
	for _, o := range idemOutcomes {
		m.idem.WithLabelValues(o)
	}
	for _, r := range heldReasons {
		m.queueHeld.WithLabelValues(r)
	}
	for _, op := range queueOps {
		m.queueOps.WithLabelValues(op)
	}
	for _, r := range authReasons {
		m.authFailures.WithLabelValues(r)
	}
	for _, r := range rejectReasons {
		m.rejected.WithLabelValues(r)
	}
	for _, op := range policyChanges {
		m.policyChanges.WithLabelValues(op)
	}
	return m
}

type factory struct{ reg prometheus.Registerer }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// histogramVecNamed is histogramVec outside the namespace, for a series
// whose name is a convention of the gRPC ecosystem.
func (f factory) histogramVecNamed(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// InitMethod creates the series of a unary method at 0: in
// grpc_server_handling_seconds, and, if its requests can ask to wait
// (canWait), in coordd_grpc_wait_seconds.
func (m *Metrics) InitMethod(service, method string, canWait bool) {
	if m == nil {
		return
	}
	m.rpcLatency.WithLabelValues("unary", service, method)
	if canWait {
		m.rpcWait.WithLabelValues(service, method)
	}
}

// Call records a unary call that took d: in coordd_grpc_wait_seconds if it
// asked to wait (waited), else in grpc_server_handling_seconds.
func (m *Metrics) Call(service, method string, d time.Duration, waited bool) {
	if m == nil {
		return
	}
	if waited {
		m.rpcWait.WithLabelValues(service, method).Observe(d.Seconds())
		return
	}
	m.rpcLatency.WithLabelValues("unary", service, method).Observe(d.Seconds())
}

// InitPolicy creates at 0 the decision series of a configured rate-limit
// policy, one per algorithm of its limits and result.
func (m *Metrics) InitPolicy(policy string, algorithms ...string) {
	if m == nil {
		return
	}
	for _, a := range algorithms {
		for _, r := range decisionResults {
			m.decisions.WithLabelValues(policy, a, r)
		}
	}
}

// HoldGranted counts a new grant of kind (lock, semaphore, election) in
// mode (exclusive, shared) after which the name had holders live holders.
func (m *Metrics) HoldGranted(kind, mode string, holders int) {
	if m == nil {
		return
	}
	m.holdsGranted.WithLabelValues(kind, mode).Inc()
	if holders > 0 {
		m.holdersAtGrant.WithLabelValues(kind).Observe(float64(holders))
	}
}

// HoldContended counts an acquisition of kind that found its name taken.
func (m *Metrics) HoldContended(kind string) {
	if m != nil {
		m.holdsContended.WithLabelValues(kind).Inc()
	}
}

// HoldWaited records how long an acquisition of kind that found its name
// taken waited (until granted or given up).
func (m *Metrics) HoldWaited(kind string, wait time.Duration) {
	if m != nil {
		m.holdWait.WithLabelValues(kind).Observe(wait.Seconds())
	}
}

// HoldReleased records a hold of kind its holder gave back after held.
func (m *Metrics) HoldReleased(kind string, held time.Duration) {
	if m != nil {
		m.holdDuration.WithLabelValues(kind).Observe(held.Seconds())
	}
}

// HoldLost counts a session's lost hold of kind; reason is max_hold,
// session_expired or gone.
func (m *Metrics) HoldLost(kind, reason string) {
	if m != nil {
		m.holdsLost.WithLabelValues(kind, reason).Inc()
	}
}

// HoldExpired counts a renewal of kind refused because the lease ran out.
func (m *Metrics) HoldExpired(kind string) {
	if m != nil {
		m.holdsExpired.WithLabelValues(kind).Inc()
	}
}

// Observers adds delta to the open Observe streams.
func (m *Metrics) Observers(delta int) {
	if m != nil {
		m.observers.Add(float64(delta))
	}
}

// SessionStreams adds delta to the open KeepAlive streams.
func (m *Metrics) SessionStreams(delta int) {
	if m != nil {
		m.sessions.Add(float64(delta))
	}
}

// RuntimePolicy is the policy label of every runtime policy's decisions:
// their names are the clients', so never label values.
const RuntimePolicy = "runtime"

// Decision counts an Allow decision. policy is a configured policy's name,
// RuntimePolicy, or "" for an inline limit; algorithm is the algorithm's
// configuration name (token_bucket); result is allowed, denied,
// shadow_denied, degraded, local_allowed or local_denied.

func (m *Metrics) Decision(policy, algorithm, result string) {
	if m == nil {
		return
	}
	if policy == "" {
		policy = "inline"
	}
	m.decisions.WithLabelValues(policy, algorithm, result).Inc()
}

// EnvoyDecision counts a ShouldRateLimit decision of one descriptor
// (internal/envoyrl's Result).
func (m *Metrics) EnvoyDecision(domain, descriptor, outcome string) {
	if m != nil {
		m.envoy.WithLabelValues(domain, descriptor, outcome).Inc()
	}
}

// DenyCacheHit counts a denial answered from the deny cache.
func (m *Metrics) DenyCacheHit() {
	if m != nil {
		m.denyCacheHits.Inc()
	}
}

// PolicyChanged counts a runtime policy's change through this instance:
// op is put or deleted.
func (m *Metrics) PolicyChanged(op string) {
	if m != nil {
		m.policyChanges.WithLabelValues(op).Inc()
	}
}

// Idempotency counts an idempotency outcome (see the metric's help).
func (m *Metrics) Idempotency(outcome string) {
	if m != nil {
		m.idem.WithLabelValues(outcome).Inc()
	}
}

// Queue counts n queue operations of one kind.
func (m *Metrics) Queue(op string, n int) {
	if m != nil && n > 0 {
		m.queueOps.WithLabelValues(op).Add(float64(n))
	}
}

// ScheduleTicked, ScheduleMissed and ScheduleFailed count what the
// schedules did (queue.ScheduleHooks).
func (m *Metrics) ScheduleTicked() {
	if m != nil {
		m.schedTicks.Inc()
	}
}

// ScheduleMissed: see ScheduleTicked.
func (m *Metrics) ScheduleMissed(n int) {
	if m != nil {
		m.schedMissed.Add(float64(n))
	}
}

// ScheduleFailed: see ScheduleTicked.
func (m *Metrics) ScheduleFailed() {
	if m != nil {
		m.schedFailed.Inc()
	}
}

// ClaimHeldBack records a Claim step in which a queue's setting (reason:
// store.HeldBackReasons) kept ready messages back.
func (m *Metrics) ClaimHeldBack(reason string) {
	if m != nil {
		m.queueHeld.WithLabelValues(reason).Inc()
	}
}

// StoreCall records one store operation that took d, for the Redis store's
// observer. failure is "" if it succeeded, else the kind of its error:
// unavailable (the store could not be reached) or other.
func (m *Metrics) StoreCall(op string, d time.Duration, failure string) {
	if m == nil {
		return
	}
	m.storeDuration.WithLabelValues(op).Observe(d.Seconds())
	if failure != "" {
		m.storeErrors.WithLabelValues(op, failure).Inc()
	}
}

// Panic counts a handler panic.
func (m *Metrics) Panic() {
	if m != nil {
		m.panics.Inc()
	}
}

// AuthFailure counts a call refused by authentication.
func (m *Metrics) AuthFailure(reason string) {
	if m != nil {
		m.authFailures.WithLabelValues(reason).Inc()
	}
}

// Rejected counts a call refused by a limit against abuse.
func (m *Metrics) Rejected(reason string) {
	if m != nil {
		m.rejected.WithLabelValues(reason).Inc()
	}
}

// QueueRef names a queue whose depth is exported.
type QueueRef struct {
	Namespace string `mapstructure:"namespace"`
	Name      string `mapstructure:"name"`
}

// QueueDepth is a queue's messages by state.
type QueueDepth struct{ Ready, Delayed, InFlight, Dead int64 }

// WatchQueues exports coordd_queue_messages{namespace,queue,state} for the
// queues named by the operator, read with depth at every scrape, each within
// timeout.
func WatchQueues(reg prometheus.Registerer, queues []QueueRef, depth func(ctx context.Context, q QueueRef) (QueueDepth, error), timeout time.Duration) {
	reg.MustRegister(&queueCollector{queues: queues, depth: depth, timeout: timeout})
}

// WatchBreakers exports coordd_store_breaker_open: how many of the store's
// circuit breakers (one per Redis node) are open.
func WatchBreakers(reg prometheus.Registerer, open func() int) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "store_breaker_open",
		Help: "Circuit breakers (one per Redis node) that are open: calls to that node fail at once.",
	}, func() float64 { return float64(open()) }))
}

// WatchRedlock exports coordd_redlock_masters_recovering: the Redlock
// masters (redis.mode redlock) that restarted or lost their data less
// than lock.max_ttl ago and so count for no grant.
func WatchRedlock(reg prometheus.Registerer, recovering func() int) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "redlock_masters_recovering",
		Help: "Redlock masters that restarted or lost their data less than lock.max_ttl ago: they count for no grant, renewal or read (/healthz names them).",
	}, func() float64 { return float64(recovering()) }))
}

// WatchPolicies exports coordd_ratelimit_runtime_policies: how many
// runtime rate-limit policies this instance has in force, over every
// namespace.
func WatchPolicies(reg prometheus.Registerer, count func() int) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "ratelimit_runtime_policies",
		Help: "Runtime rate-limit policies (PutPolicy) this instance has in force, over every namespace.",
	}, func() float64 { return float64(count()) }))
}

// WatchEviction exports coordd_redis_eviction_allowed (1 if
// redis.allow_eviction is set) and coordd_redis_evicting_nodes: how many
// Redis nodes were last read with a maxmemory-policy other than
// noeviction, which coordd refuses to use unless eviction is allowed.
func WatchEviction(reg prometheus.Registerer, allowed bool, evicting func() int) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "redis_eviction_allowed",
		Help: "1 if redis.allow_eviction is set: coordd uses Redis nodes that may evict its keys (a live lock granted twice).",
	})
	if allowed {
		g.Set(1)
	}
	reg.MustRegister(g, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "redis_evicting_nodes",
		Help: "Redis nodes last read with a maxmemory-policy other than noeviction (refused unless redis.allow_eviction).",
	}, func() float64 { return float64(evicting()) }))
}

var queueDesc = prometheus.NewDesc(namespace+"_queue_messages",
	"Messages of the queues named in metrics.queues, by state (ready, delayed, in_flight, dead).",
	[]string{"namespace", "queue", "state"}, nil)

type queueCollector struct {
	queues  []QueueRef
	depth   func(ctx context.Context, q QueueRef) (QueueDepth, error)
	timeout time.Duration
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDesc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.queues {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		st, err := c.depth(ctx, q)
		cancel()
		if err != nil {
			continue // a scrape must not fail for one queue; the store's errors are counted
		}
		for state, n := range map[string]int64{"ready": st.Ready, "delayed": st.Delayed, "in_flight": st.InFlight, "dead": st.Dead} {
			ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(n), q.Namespace, q.Name, state)
		}
	}
}
