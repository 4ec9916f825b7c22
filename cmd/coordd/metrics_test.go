package main

// The /metrics scrape after a scripted scenario: every domain counter moves
// by exactly what the scenario did, and no label value is anything a client
// chose.

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/version"
)

// scrape is one parsed GET /metrics.
type scrape map[string]*dto.MetricFamily

func getMetrics(t *testing.T, hc *http.Client, addr string) scrape {
	t.Helper()
	code, body := httpGet(t, hc, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return mfs
}

// series returns the series of name whose labels include want (name,
// value, ...), or nil.
func (s scrape) series(name string, want ...string) *dto.Metric {
	mf := s[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value, or a histogram's sample count; 0
// for a series that does not exist.
func (s scrape) value(name string, labels ...string) float64 {
	m := s.series(name, labels...)
	switch {
	case m == nil:
		return 0
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// TestMetricsScrape runs a scripted scenario through gRPC against a daemon
// with a queue named in metrics.queues and a policy "p", and checks every
// domain metric's delta in the scrape.
func TestMetricsScrape(t *testing.T) {
	const queue, otherQueue = "m-queue-watched", "m-queue-other"
	var logs lockedBuffer
	p := startInProcessLogging(t, &logs, func(c *Config) {
		c.Metrics.Queues = []metrics.QueueRef{{Namespace: "default", Name: queue}}
		c.RateLimit.Policies = []PolicyConfig{{Name: "p", Algorithm: "fixed_window", Limit: 2, Period: time.Hour}}
	})
	conn, hc, ctx := p.clients(t)

	s := &metricsScenario{
		t: t, ctx: ctx, conn: conn, hc: hc, httpAddr: p.httpAddr,
		locks: coordv1.NewLockServiceClient(conn), rl: coordv1.NewRateLimitServiceClient(conn),
		idem: coordv1.NewIdempotencyServiceClient(conn), queues: coordv1.NewQueueServiceClient(conn),
		used: map[string]bool{otherQueue: true},
	}
	before := getMetrics(t, hc, p.httpAddr)
	s.lockPhase()
	s.sessionPhase()
	s.rateLimitPhase()
	s.idempotencyPhase()
	acked := s.queuePhase(queue, otherQueue)
	after := getMetrics(t, hc, p.httpAddr)

	checkMetricDeltas(t, before, after, queue)
	checkNoClientLabels(t, after, s.used)
	checkLogRule(t, logs.String(), s.used, acked)
	// coordd_session_streams is back to 0 once the stream ended (checked
	// above as a delta from 0); a panic-free run leaves the gauge exact.
	if v := after.value("coordd_session_streams"); v != 0 {
		t.Errorf("coordd_session_streams = %v after the stream ended, want 0", v)
	}
}

// strangerToken is a well-formed token no lock or idempotency key has.
const strangerToken = "0123456789abcdef0123456789abcdef"

// The scenario's locks: lockS is the one bound to the session.
const lockA, lockB, lockC, lockS = "m-lock-alpha", "m-lock-beta", "m-lock-gamma", "m-lock-session"

// metricsScenario is TestMetricsScrape's scripted scenario: its clients,
// and used, every name, key, token, receipt and ID the scenario chose or
// was given: none may be a label value.
type metricsScenario struct {
	t        *testing.T
	ctx      context.Context
	conn     *grpc.ClientConn
	hc       *http.Client
	httpAddr string
	locks    coordv1.LockServiceClient
	rl       coordv1.RateLimitServiceClient
	idem     coordv1.IdempotencyServiceClient
	queues   coordv1.QueueServiceClient
	used     map[string]bool
}

func (s *metricsScenario) use(ss ...string) {
	for _, v := range ss {
		if v != "" {
			s.used[v] = true
		}
	}
}

func (s *metricsScenario) must(what string, err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

// lockPhase: a grant, a contended Lock, a waiting one granted on release,
// releases, a release and a renew with a stranger's token.
func (s *metricsScenario) lockPhase() {
	t, ctx, locks, hc, use := s.t, s.ctx, s.locks, s.hc, s.use
	t.Helper()
	use(lockA, lockB, lockC, lockS, "m-owner-1", "m-owner-2", "m-owner-3", "m-owner-4")
	l1, err := locks.Lock(ctx, &coordv1.LockRequest{Name: lockA, Ttl: durationpb.New(time.Minute), Owner: "m-owner-1"})
	if err != nil || !l1.GetAcquired() {
		t.Fatalf("Lock 1 = %v, %v", l1, err)
	}
	use(l1.GetToken())
	l2, err := locks.Lock(ctx, &coordv1.LockRequest{Name: lockA, Ttl: durationpb.New(time.Minute), Owner: "m-owner-2"})
	if err != nil || l2.GetAcquired() || l2.GetHolder() != "m-owner-1" {
		t.Fatalf("Lock 2 (contended, no wait) = %v, %v; want not acquired, held by m-owner-1", l2, err)
	}
	waited := make(chan *coordv1.LockResponse, 1)
	go func() {
		r, err := locks.Lock(ctx, &coordv1.LockRequest{Name: lockA, Ttl: durationpb.New(time.Minute), Owner: "m-owner-3", Wait: durationpb.New(20 * time.Second)})
		if err != nil {
			t.Errorf("Lock 3 (waiting): %v", err)
		}
		waited <- r
	}()
	// The third Lock has started, and has had time to find the lock held.
	started := func() float64 {
		return getMetrics(t, hc, s.httpAddr).value("grpc_server_started_total", "grpc_service", "coord.v1.LockService", "grpc_method", "Lock")
	}
	for end := time.Now().Add(5 * time.Second); started() < 3; {
		if time.Now().After(end) {
			t.Fatal("the waiting Lock did not start within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	rel, err := locks.Release(ctx, &coordv1.ReleaseRequest{Name: lockA, Token: l1.GetToken()})
	if err != nil || !rel.GetReleased() {
		t.Fatalf("Release 1 = %v, %v", rel, err)
	}
	var l3 *coordv1.LockResponse
	select {
	case l3 = <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Lock was not granted within 10s of the release")
	}
	if !l3.GetAcquired() {
		t.Fatalf("Lock 3 = %v, want acquired after the release", l3)
	}
	use(l3.GetToken())
	rel, err = locks.Release(ctx, &coordv1.ReleaseRequest{Name: lockA, Token: l3.GetToken()})
	if err != nil || !rel.GetReleased() {
		t.Fatalf("Release 2 = %v, %v", rel, err)
	}
	l4, err := locks.Lock(ctx, &coordv1.LockRequest{Name: lockB, Ttl: durationpb.New(time.Minute), Owner: "m-owner-4"})
	if err != nil || !l4.GetAcquired() {
		t.Fatalf("Lock 4 = %v, %v", l4, err)
	}
	use(l4.GetToken())
	use(strangerToken)
	if rel, err := locks.Release(ctx, &coordv1.ReleaseRequest{Name: lockB, Token: strangerToken}); err != nil || rel.GetReleased() {
		t.Fatalf("Release with another token = %v, %v; want released=false", rel, err)
	}
	_, err = locks.Renew(ctx, &coordv1.RenewRequest{Name: lockC, Token: strangerToken, Ttl: durationpb.New(time.Minute)})
	if reason, _ := errorReason(err); reason != "LOCK_NOT_HELD" {
		t.Fatalf("Renew with an unknown token = %v, want LOCK_NOT_HELD", err)
	}

}

// sessionPhase: a session with a max_hold lock, reported lost.
func (s *metricsScenario) sessionPhase() {
	t, ctx, conn, locks, hc, use, must := s.t, s.ctx, s.conn, s.locks, s.hc, s.use, s.must
	t.Helper()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	stream, err := coordv1.NewSessionServiceClient(conn).KeepAlive(sctx)
	must("KeepAlive", err)
	must("KeepAlive Send", stream.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(10 * time.Second)}))
	first, err := stream.Recv()
	must("KeepAlive Recv", err)
	sid := first.GetSessionId()
	use(sid)
	if v := getMetrics(t, hc, s.httpAddr).value("coordd_session_streams"); v != 1 {
		t.Errorf("coordd_session_streams with one stream open = %v, want 1", v)
	}
	ls, err := locks.Lock(ctx, &coordv1.LockRequest{Name: lockS, SessionId: sid, MaxHold: durationpb.New(200 * time.Millisecond)})
	if err != nil || !ls.GetAcquired() {
		t.Fatalf("Lock bound to the session = %v, %v", ls, err)
	}
	use(ls.GetToken())
	// The loss is pushed when the max_hold passes; the next heartbeat's
	// answer repeats it (reports are at least once), and it is counted once.
	pushed, err := stream.Recv()
	must("KeepAlive Recv", err)
	must("KeepAlive Send", stream.Send(&coordv1.KeepAliveRequest{}))
	beat, err := stream.Recv()
	must("KeepAlive Recv", err)
	for _, r := range []*coordv1.KeepAliveResponse{pushed, beat} {
		if lost := r.GetLostLocks(); len(lost) != 1 || lost[0].GetName() != lockS || lost[0].GetReason() != coordv1.LockLossReason_LOCK_LOSS_REASON_MAX_HOLD {
			t.Fatalf("response after max_hold = %v; want %s lost for max_hold", r, lockS)
		}
	}
	must("CloseSend", stream.CloseSend())
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("KeepAlive after half-close: %v, want EOF", err)
	}

}

// rateLimitPhase: a policy's decisions, allowed and denied, and an inline
// limit's.
func (s *metricsScenario) rateLimitPhase() {
	t, ctx, rl, use := s.t, s.ctx, s.rl, s.use
	t.Helper()
	use("m-rl-key", "m-rl-inline")
	for i, want := range []bool{true, true, false} {
		r, err := rl.Allow(ctx, &coordv1.AllowRequest{Key: "m-rl-key", Policy: "p"})
		if err != nil || r.GetAllowed() != want {
			t.Fatalf("Allow #%d (policy p) = %v, %v; want allowed=%v", i+1, r, err, want)
		}
	}
	if r, err := rl.Allow(ctx, &coordv1.AllowRequest{Key: "m-rl-inline", Limit: &coordv1.Limit{
		Algorithm: coordv1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 5, Period: durationpb.New(time.Second),
	}}); err != nil || !r.GetAllowed() {
		t.Fatalf("inline Allow = %v, %v", r, err)
	}

}

// idempotencyPhase: execute, store, replay, a fingerprint mismatch and a
// stranger's Finish.
func (s *metricsScenario) idempotencyPhase() {
	t, ctx, idem, use := s.t, s.ctx, s.idem, s.use
	t.Helper()
	use("m-idem-key", "m-idem-key-2", "m-fp-1", "m-fp-2")
	b1, err := idem.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: "m-idem-key", Fingerprint: "m-fp-1"})
	if err != nil || b1.GetOutcome() != coordv1.Outcome_OUTCOME_EXECUTE {
		t.Fatalf("Begin = %v, %v", b1, err)
	}
	use(b1.GetOwnerToken())
	if r, err := idem.Finish(ctx, &coordv1.FinishRequest{Key: "m-idem-key", OwnerToken: b1.GetOwnerToken(), Result: []byte("m-result")}); err != nil || !r.GetStored() {
		t.Fatalf("Finish = %v, %v", r, err)
	}
	if r, err := idem.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: "m-idem-key", Fingerprint: "m-fp-1"}); err != nil || r.GetOutcome() != coordv1.Outcome_OUTCOME_COMPLETED {
		t.Fatalf("Begin (replay) = %v, %v", r, err)
	}
	_, err = idem.BeginIdempotent(ctx, &coordv1.BeginIdempotentRequest{Key: "m-idem-key", Fingerprint: "m-fp-2"})
	if reason, _ := errorReason(err); reason != "FINGERPRINT_MISMATCH" {
		t.Fatalf("Begin with another fingerprint = %v, want FINGERPRINT_MISMATCH", err)
	}
	_, err = idem.Finish(ctx, &coordv1.FinishRequest{Key: "m-idem-key-2", OwnerToken: strangerToken, Result: []byte("x")})
	if reason, _ := errorReason(err); reason != "NOT_OWNER" {
		t.Fatalf("Finish by a stranger = %v, want NOT_OWNER", err)
	}

}

// queuePhase: enqueues (a duplicate, a delayed one, one on the unwatched
// queue), claims, an ack, a dead letter, and the ack of an acked receipt,
// which it returns.
func (s *metricsScenario) queuePhase(queue, otherQueue string) (acked string) {
	t, ctx, queues, use, must := s.t, s.ctx, s.queues, s.use, s.must
	t.Helper()
	use("m-payload", "m-dedup-id")
	enqueue := func(req *coordv1.EnqueueRequest) *coordv1.EnqueueResponse {
		t.Helper()
		r, err := queues.Enqueue(ctx, req)
		must("Enqueue", err)
		use(r.GetMessageId())
		return r
	}
	enqueue(&coordv1.EnqueueRequest{Queue: queue, Payload: []byte("m-payload"), MaxAttempts: 1})
	enqueue(&coordv1.EnqueueRequest{Queue: queue, Payload: []byte("m-payload")})
	claimed, err := queues.Claim(ctx, &coordv1.ClaimRequest{Queue: queue, MaxMessages: 2})
	if err != nil || len(claimed.GetMessages()) != 2 {
		t.Fatalf("Claim = %v, %v; want 2", claimed, err)
	}
	for _, m := range claimed.GetMessages() {
		use(m.GetReceipt(), m.GetMessageId())
		if m.GetMaxAttempts() == 1 {
			r, err := queues.Nack(ctx, &coordv1.NackRequest{Queue: queue, Receipt: m.GetReceipt()})
			if err != nil || !r.GetDeadLettered() {
				t.Fatalf("Nack at max_attempts = %v, %v; want dead-lettered", r, err)
			}
		} else {
			acked = m.GetReceipt()
			if r, err := queues.Ack(ctx, &coordv1.AckRequest{Queue: queue, Receipt: acked}); err != nil || !r.GetAcked() {
				t.Fatalf("Ack = %v, %v", r, err)
			}
		}
	}
	enqueue(&coordv1.EnqueueRequest{Queue: queue, Payload: []byte("m-payload"), DedupId: "m-dedup-id"})
	if r := enqueue(&coordv1.EnqueueRequest{Queue: queue, Payload: []byte("m-payload"), DedupId: "m-dedup-id"}); !r.GetDuplicate() {
		t.Fatalf("second Enqueue with the same dedup_id = %v, want a duplicate", r)
	}
	enqueue(&coordv1.EnqueueRequest{Queue: queue, Payload: []byte("m-payload"), Delay: durationpb.New(time.Hour)})
	enqueue(&coordv1.EnqueueRequest{Queue: queue, Payload: []byte("m-payload")})
	enqueue(&coordv1.EnqueueRequest{Queue: otherQueue, Payload: []byte("m-payload")})
	one, err := queues.Claim(ctx, &coordv1.ClaimRequest{Queue: queue, MaxMessages: 1})
	if err != nil || len(one.GetMessages()) != 1 {
		t.Fatalf("Claim 1 = %v, %v", one, err)
	}
	use(one.GetMessages()[0].GetReceipt())
	_, err = queues.Ack(ctx, &coordv1.AckRequest{Queue: queue, Receipt: acked})
	if reason, _ := errorReason(err); reason != "RECEIPT_EXPIRED" {
		t.Fatalf("Ack of an acked receipt = %v, want RECEIPT_EXPIRED", err)
	}

	return acked
}

// checkMetricDeltas checks every domain metric's delta between the scrapes
// before and after the scenario, and that only queue's depth is exported.
func checkMetricDeltas(t *testing.T, before, after scrape, queue string) {
	t.Helper()
	type want struct {
		name   string
		labels []string
		delta  float64
	}
	wants := []want{
		{"coordd_holds_granted_total", []string{"kind", "lock", "mode", "exclusive"}, 4}, // Lock 1, 3 (after waiting), 4, the session's
		{"coordd_holds_contended_total", []string{"kind", "lock"}, 2},                    // Lock 2 (not acquired), Lock 3 (waited)
		{"coordd_hold_wait_seconds", []string{"kind", "lock"}, 1},                        // Lock 3, the one that could wait
		{"coordd_hold_duration_seconds", []string{"kind", "lock"}, 2},                    // Release 1, 2 (not the stranger's, not the lost lock)
		{"coordd_holds_lost_total", []string{"kind", "lock", "reason", "max_hold"}, 1},
		{"coordd_holds_expired_total", []string{"kind", "lock"}, 1}, // Renew with an unknown token
		{"coordd_session_streams", nil, 0},                          // the stream has ended
		{"coordd_ratelimit_decisions_total", []string{"policy", "p", "algorithm", "fixed_window", "result", "allowed"}, 2},
		{"coordd_ratelimit_decisions_total", []string{"policy", "p", "algorithm", "fixed_window", "result", "denied"}, 1},
		{"coordd_ratelimit_decisions_total", []string{"policy", "inline", "algorithm", "token_bucket", "result", "allowed"}, 1},
		{"coordd_idempotency_outcomes_total", []string{"outcome", "execute"}, 1},
		{"coordd_idempotency_outcomes_total", []string{"outcome", "stored"}, 1},
		{"coordd_idempotency_outcomes_total", []string{"outcome", "completed"}, 1},
		{"coordd_idempotency_outcomes_total", []string{"outcome", "fingerprint_mismatch"}, 1},
		{"coordd_idempotency_outcomes_total", []string{"outcome", "not_owner"}, 1},
		{"coordd_idempotency_outcomes_total", []string{"outcome", "in_progress"}, 0},
		{"coordd_queue_operations_total", []string{"op", "enqueued"}, 6},
		{"coordd_queue_operations_total", []string{"op", "duplicate"}, 1},
		{"coordd_queue_operations_total", []string{"op", "claimed"}, 3},
		{"coordd_queue_operations_total", []string{"op", "acked"}, 1},
		{"coordd_queue_operations_total", []string{"op", "dead_lettered"}, 1},
		{"coordd_queue_operations_total", []string{"op", "nacked"}, 0},
		{"coordd_queue_operations_total", []string{"op", "receipt_expired"}, 1},
		{"coordd_queue_messages", []string{"namespace", "default", "queue", queue, "state", "ready"}, 1},
		{"coordd_queue_messages", []string{"namespace", "default", "queue", queue, "state", "delayed"}, 1},
		{"coordd_queue_messages", []string{"namespace", "default", "queue", queue, "state", "in_flight"}, 1},
		{"coordd_queue_messages", []string{"namespace", "default", "queue", queue, "state", "dead"}, 1},
		{"grpc_server_handled_total", []string{"grpc_service", "coord.v1.LockService", "grpc_method", "Lock", "grpc_code", "OK"}, 5},
		{"grpc_server_handled_total", []string{"grpc_service", "coord.v1.LockService", "grpc_method", "Release", "grpc_code", "OK"}, 3},
		{"grpc_server_handled_total", []string{"grpc_service", "coord.v1.LockService", "grpc_method", "Renew", "grpc_code", "FailedPrecondition"}, 1},
		{"grpc_server_handled_total", []string{"grpc_service", "coord.v1.SessionService", "grpc_method", "KeepAlive", "grpc_code", "OK"}, 1},
		{"grpc_server_handled_total", []string{"grpc_service", "coord.v1.QueueService", "grpc_method", "Enqueue", "grpc_code", "OK"}, 7},
		{"grpc_server_handled_total", []string{"grpc_service", "coord.v1.IdempotencyService", "grpc_method", "BeginIdempotent", "grpc_code", "FailedPrecondition"}, 1},
		{"coordd_panics_total", nil, 0},
		{"coordd_auth_failures_total", nil, 0},
		{"coordd_rejected_total", nil, 0},
	}
	for _, w := range wants {
		if w.name == "coordd_queue_messages" {
			if after.series(w.name, w.labels...) == nil {
				t.Errorf("%s%v: no such series in the scrape", w.name, w.labels)
				continue
			}
		}
		if got := after.value(w.name, w.labels...) - before.value(w.name, w.labels...); got != w.delta {
			t.Errorf("%s%v moved by %v, want %v", w.name, w.labels, got, w.delta)
		}
	}
	// Only the configured queue's depth is exported.
	for _, m := range after["coordd_queue_messages"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "queue" && l.GetValue() != queue {
				t.Errorf("coordd_queue_messages has queue=%q, which is not in metrics.queues", l.GetValue())
			}
		}
	}
	if h := after.series("coordd_hold_duration_seconds", "kind", "lock").GetHistogram(); h.GetSampleSum() <= 0.3 {
		t.Errorf("coordd_hold_duration_seconds{lock} sum = %v; Release 1 came after a hold of more than 300ms", h.GetSampleSum())
	}

}

// checkNoClientLabels is the cardinality rule: no label value is anything
// the client chose or was handed.
func checkNoClientLabels(t *testing.T, after scrape, used map[string]bool) {
	t.Helper()
	var bad []string
	for name, mf := range after {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				for u := range used {
					if v == u || len(u) >= 8 && strings.Contains(v, u) {
						bad = append(bad, name+"{"+l.GetName()+"="+v+"}")
					}
				}
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("label values that a client chose: %v", bad)
	}

}

// checkLogRule is the log rule (README, Operating): one line per call, never
// a payload, token or receipt.
func checkLogRule(t *testing.T, out string, used map[string]bool, acked string) {
	t.Helper()
	if n := strings.Count(out, `msg="finished call"`); n < 30 {
		t.Errorf("%d call log lines; want one per call", n)
	}
	var leaked []string
	for u := range used {
		if len(u) == 32 || strings.HasPrefix(u, "m-payload") || strings.HasPrefix(u, "m-result") { // tokens, IDs, payloads
			if strings.Contains(out, u) {
				leaked = append(leaked, u)
			}
		}
	}
	for _, m := range []string{"m-payload", "m-result", acked} {
		if strings.Contains(out, m) {
			leaked = append(leaked, m)
		}
	}
	if len(leaked) > 0 {
		sort.Strings(leaked)
		t.Errorf("the log carries tokens, receipts or payloads: %v", leaked)
	}

}

// TestMetricsStoreOnRedis: on the Redis store, every store operation is
// timed in coordd_store_duration_seconds{op}, and one that cannot reach
// Redis is counted in coordd_store_errors_total{op,kind="unavailable"}
// (the store's observer is wired; it once was not, and both stayed empty).
func TestMetricsStoreOnRedis(t *testing.T) {
	srv := redistest.StartStandalone(t)
	p := startInProcess(t, func(c *Config) {
		c.Store = "redis"
		c.Redis.Mode = "standalone"
		c.Redis.Addrs = []string{srv.Addr()}
	})
	conn, hc, ctx := p.clients(t)
	locks := coordv1.NewLockServiceClient(conn)

	before := getMetrics(t, hc, p.httpAddr)
	g, err := locks.Lock(ctx, &coordv1.LockRequest{Name: "m-redis-lock", Ttl: durationpb.New(time.Minute)})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock = %v, %v", g, err)
	}
	if _, err := locks.GetLock(ctx, &coordv1.GetLockRequest{Name: "m-redis-lock"}); err != nil {
		t.Fatalf("GetLock: %v", err)
	}
	mid := getMetrics(t, hc, p.httpAddr)
	for _, op := range []string{"AcquireHold", "GetHolds"} {
		if got := mid.value("coordd_store_duration_seconds", "op", op) - before.value("coordd_store_duration_seconds", "op", op); got != 1 {
			t.Errorf("coordd_store_duration_seconds{op=%q} gained %v samples, want 1", op, got)
		}
		if h := mid.series("coordd_store_duration_seconds", "op", op).GetHistogram(); h.GetSampleSum() <= 0 {
			t.Errorf("coordd_store_duration_seconds{op=%q} sum = %v, want the round trip's time", op, h.GetSampleSum())
		}
	}
	if got := mid.value("coordd_store_errors_total"); got != 0 {
		t.Errorf("coordd_store_errors_total = %v with Redis up, want 0", got)
	}
	// A noeviction Redis (the default) without redis.allow_eviction.
	for _, name := range []string{"coordd_redis_eviction_allowed", "coordd_redis_evicting_nodes"} {
		if mid[name] == nil || mid.value(name) != 0 {
			t.Errorf("%s = %v (exported: %v), want 0", name, mid.value(name), mid[name] != nil)
		}
	}

	srv.Kill()
	_, err = locks.GetLock(ctx, &coordv1.GetLockRequest{Name: "m-redis-lock"})
	wantCode(t, "GetLock with Redis down", err, codes.Unavailable, "STORE_UNAVAILABLE")
	after := getMetrics(t, hc, p.httpAddr)
	if got := after.value("coordd_store_errors_total", "op", "GetHolds", "kind", "unavailable"); got != 1 {
		t.Errorf("coordd_store_errors_total{op=GetHolds,kind=unavailable} = %v, want 1", got)
	}
}

// TestBuildInfoAndLatencyBuckets: coordd_build_info names the build,
// grpc_server_handling_seconds resolves sub-millisecond calls (its first
// bucket is 50µs, not the default 5ms) up to the store timeout, and
// coordd_grpc_wait_seconds waits up to limits.max_wait.
func TestBuildInfoAndLatencyBuckets(t *testing.T) {
	var logs lockedBuffer
	p := startInProcessLogging(t, &logs, nil)
	conn, hc, ctx := p.clients(t)
	if _, err := coordv1.NewLockServiceClient(conn).GetLock(ctx, &coordv1.GetLockRequest{Name: "m-buckets"}); err != nil {
		t.Fatal(err)
	}
	s := getMetrics(t, hc, p.httpAddr)
	bi := version.Get()
	if m := s.series("coordd_build_info", "version", bi.Version, "revision", bi.Revision, "goversion", bi.GoVersion); m == nil || m.GetGauge().GetValue() != 1 {
		t.Fatalf("coordd_build_info = %v, want 1 with version %s, revision %s, goversion %s", m, bi.Version, bi.Revision, bi.GoVersion)
	}
	for _, c := range []struct {
		name, method string
		first, last  float64
	}{
		{"grpc_server_handling_seconds", "GetLock", 0.00005, 10},
		{"coordd_grpc_wait_seconds", "Lock", 0.001, 60},
	} {
		m := s.series(c.name, "grpc_method", c.method)
		if m == nil {
			t.Fatalf("no %s for %s", c.name, c.method)
		}
		var b []float64 // the finite upper bounds
		for _, x := range m.GetHistogram().GetBucket() {
			if !math.IsInf(x.GetUpperBound(), 1) {
				b = append(b, x.GetUpperBound())
			}
		}
		if len(b) == 0 || b[0] != c.first || b[len(b)-1] != c.last {
			t.Errorf("%s: buckets %v, want %v to %v", c.name, b, c.first, c.last)
		}
	}
}

// TestWaitingCallsApart: a call that asks to wait is timed in
// coordd_grpc_wait_seconds and not in grpc_server_handling_seconds, whose
// p99 it would otherwise make the wait time; a stream is timed in neither.
// grpc_server_handled_total counts them all.
func TestWaitingCallsApart(t *testing.T) {
	p := startInProcess(t, nil)
	conn, hc, ctx := p.clients(t)
	locks := coordv1.NewLockServiceClient(conn)
	const name = "m-wait-apart"
	lock := func(owner string, wait time.Duration) *coordv1.LockResponse {
		t.Helper()
		req := &coordv1.LockRequest{Name: name, Ttl: durationpb.New(time.Minute), Owner: owner}
		if wait > 0 {
			req.Wait = durationpb.New(wait)
		}
		r, err := locks.Lock(ctx, req)
		if err != nil {
			t.Fatalf("Lock by %s: %v", owner, err)
		}
		return r
	}
	const latency, waits, handled = "grpc_server_handling_seconds", "coordd_grpc_wait_seconds", "grpc_server_handled_total"
	lockLabels := []string{"grpc_service", "coord.v1.LockService", "grpc_method", "Lock"}

	before := getMetrics(t, hc, p.httpAddr)
	if r := lock("holder", 0); !r.GetAcquired() {
		t.Fatalf("the first Lock did not acquire: %v", r)
	}
	mid := getMetrics(t, hc, p.httpAddr)
	if got := mid.value(latency, lockLabels...) - before.value(latency, lockLabels...); got != 1 {
		t.Errorf("a Lock without wait added %v samples to %s, want 1", got, latency)
	}
	if got := mid.value(waits, lockLabels...) - before.value(waits, lockLabels...); got != 0 {
		t.Errorf("a Lock without wait added %v samples to %s, want 0", got, waits)
	}

	const wait = 300 * time.Millisecond
	if r := lock("waiter", wait); r.GetAcquired() {
		t.Fatalf("Lock with wait acquired a held lock: %v", r)
	}
	// Allow with a wait it does not need: the request asks to wait, so it is
	// a waiting call however soon it is answered.
	rl := coordv1.NewRateLimitServiceClient(conn)
	if r, err := rl.Allow(ctx, &coordv1.AllowRequest{Key: name, Wait: durationpb.New(time.Second),
		Limit: &coordv1.Limit{Algorithm: coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 10, Period: durationpb.New(time.Minute)}}); err != nil || !r.GetAllowed() {
		t.Fatalf("Allow = %v, %v", r, err)
	}
	// A stream, opened and half-closed.
	stream, err := coordv1.NewSessionServiceClient(conn).KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&coordv1.KeepAliveRequest{Ttl: durationpb.New(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("KeepAlive after half-close: %v, want EOF", err)
	}
	after := getMetrics(t, hc, p.httpAddr)

	if got := after.value(latency, lockLabels...) - mid.value(latency, lockLabels...); got != 0 {
		t.Errorf("a Lock that waited %v added %v samples to %s, want 0", wait, got, latency)
	}
	if h := after.series(latency, lockLabels...).GetHistogram(); h.GetSampleSum() >= wait.Seconds() {
		t.Errorf("%s{Lock} sum = %vs, which holds the wait", latency, h.GetSampleSum())
	}
	if got := after.value(waits, lockLabels...) - mid.value(waits, lockLabels...); got != 1 {
		t.Errorf("a Lock that waited added %v samples to %s, want 1", got, waits)
	}
	if h := after.series(waits, lockLabels...).GetHistogram(); h.GetSampleSum() < wait.Seconds() {
		t.Errorf("%s{Lock} sum = %vs, want the wait, %v", waits, h.GetSampleSum(), wait)
	}
	allowLabels := []string{"grpc_service", "coord.v1.RateLimitService", "grpc_method", "Allow"}
	if got := after.value(waits, allowLabels...) - mid.value(waits, allowLabels...); got != 1 {
		t.Errorf("an Allow with wait added %v samples to %s, want 1", got, waits)
	}
	if got := after.value(latency, allowLabels...) - mid.value(latency, allowLabels...); got != 0 {
		t.Errorf("an Allow with wait added %v samples to %s, want 0", got, latency)
	}
	if got := after.value(handled, append(lockLabels, "grpc_code", "OK")...) - before.value(handled, append(lockLabels, "grpc_code", "OK")...); got != 2 {
		t.Errorf("%s{Lock,OK} moved by %v, want 2: waiting or not, a call is counted", handled, got)
	}
	for _, m := range after[latency].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "grpc_type" && l.GetValue() != "unary" || l.GetName() == "grpc_method" && (l.GetValue() == "KeepAlive" || l.GetValue() == "Observe") {
				t.Errorf("%s has a stream's series: %v", latency, m.GetLabel())
			}
		}
	}
}

// atZero fails the test if the series of name with labels (name, value,
// ...) is missing from s or not 0.
func (s scrape) atZero(t *testing.T, name string, labels ...string) {
	t.Helper()
	switch m := s.series(name, labels...); {
	case m == nil:
		t.Errorf("%s%v: not exported before its first event", name, labels)
	case s.value(name, labels...) != 0:
		t.Errorf("%s%v = %v before any call, want 0", name, labels, s.value(name, labels...))
	}
}

// TestMetricsAtZeroBeforeFirstCall: the binary exports, before any call to
// coordd's services, every series whose labels are known at start, at 0:
// the gRPC counts of every method and code, the latency of every unary
// method and the wait of each that can wait, coordd's counters of bounded
// labels and the decisions of each configured policy. A series born with
// its first event has no rate() for that event, and an alert on it sees
// nothing.
func TestMetricsAtZeroBeforeFirstCall(t *testing.T) {
	cfg := writeConfig(t, `
ratelimit:
  policies:
    - name: api
      algorithm: token_bucket
      limit: 100
      period: 1s
`)
	d := startBinary(t, false, "--config", cfg)
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	s := getMetrics(t, hc, d.HTTPAddr)

	for _, c := range []struct{ typ, service, method string }{
		{"unary", "coord.v1.LockService", "Lock"},
		{"unary", "coord.v1.RateLimitService", "Allow"},
		{"unary", "coord.v1.QueueService", "Claim"},
		{"bidi_stream", "coord.v1.SessionService", "KeepAlive"},
		{"server_stream", "coord.v1.ElectionService", "Observe"},
	} {
		for _, code := range []string{"OK", "Unavailable", "Internal"} {
			s.atZero(t, "grpc_server_handled_total", "grpc_type", c.typ, "grpc_service", c.service, "grpc_method", c.method, "grpc_code", code)
		}
	}
	for _, m := range []string{"Lock", "Renew", "Release", "GetLock"} {
		s.atZero(t, "grpc_server_handling_seconds", "grpc_type", "unary", "grpc_service", "coord.v1.LockService", "grpc_method", m)
	}
	waiting := map[string]string{
		"Lock": "coord.v1.LockService", "Acquire": "coord.v1.SemaphoreService", "Campaign": "coord.v1.ElectionService",
		"Allow": "coord.v1.RateLimitService", "BeginIdempotent": "coord.v1.IdempotencyService", "Claim": "coord.v1.QueueService",
	}
	for m, svc := range waiting {
		s.atZero(t, "coordd_grpc_wait_seconds", "grpc_service", svc, "grpc_method", m)
	}
	for _, m := range s["coordd_grpc_wait_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "grpc_method" && waiting[l.GetValue()] == "" {
				t.Errorf("coordd_grpc_wait_seconds has %s, whose requests cannot ask to wait", l.GetValue())
			}
		}
	}
	for _, c := range [][]string{
		{"coordd_holds_granted_total", "kind", "lock", "mode", "exclusive"},
		{"coordd_holds_contended_total", "kind", "lock"},
		{"coordd_holds_expired_total", "kind", "semaphore"},
		{"coordd_holds_lost_total", "kind", "lock", "reason", "max_hold"},
		{"coordd_holds_lost_total", "kind", "semaphore", "reason", "session_expired"},
		{"coordd_idempotency_outcomes_total", "outcome", "execute"},
		{"coordd_idempotency_outcomes_total", "outcome", "not_owner"},
		{"coordd_queue_operations_total", "op", "dead_lettered"},
		{"coordd_queue_operations_total", "op", "receipt_expired"},
		{"coordd_auth_failures_total", "reason", "UNAUTHENTICATED"},
		{"coordd_auth_failures_total", "reason", "REVOKED"},
		{"coordd_rejected_total", "reason", "too_many_waiters"},
		{"coordd_holds_lost_total", "kind", "election", "reason", "gone"},
		{"coordd_panics_total"},
		{"coordd_ratelimit_decisions_total", "policy", "api", "algorithm", "token_bucket", "result", "allowed"},
		{"coordd_ratelimit_decisions_total", "policy", "api", "algorithm", "token_bucket", "result", "denied"},
	} {
		s.atZero(t, c[0], c[1:]...)
	}
}
