package e2e

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// settle is how long a blocking call is given, once its instance has
// started it, to subscribe and make its first attempt, so that what ends it
// is the wake-up from the other instance.
const settle = 100 * time.Millisecond

// TestWaiterWokenAcrossInstances hands a lock from A to a Lock waiting on B,
// 30 times: A's Release must wake B's waiter through Redis at once, long
// before A's 60s lease or B's 30s wait would end it.
func TestWaiterWokenAcrossInstances(t *testing.T) {
	const (
		rounds = 30
		name   = "handoff"
		lease  = 60 * time.Second
		wait   = 30 * time.Second
	)
	a, b := startPair(t)
	ctx := testContext(t, 50*time.Second)

	type result struct {
		resp *coordv1.LockResponse
		err  error
		at   time.Time
	}
	var latencies []time.Duration
	var fence uint64
	for i := range rounds {
		held, err := a.locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(lease), Owner: "A"})
		if err != nil || !held.GetAcquired() || held.GetFence() <= fence {
			t.Fatalf("round %d: Lock on A = %v, %v; want acquired with a fence above %d", i, held, err, fence)
		}
		done := make(chan result, 1)
		go func() {
			resp, err := b.locks.Lock(ctx, &coordv1.LockRequest{
				Name: name, Ttl: durationpb.New(lease), Wait: durationpb.New(wait), Owner: "B",
			})
			done <- result{resp, err, time.Now()}
		}()
		b.waitStarted(t, "coord.v1.LockService", "Lock", i+1, settle)
		select {
		case r := <-done:
			t.Fatalf("round %d: Lock on B returned while A held the lock: %v, %v", i, r.resp, r.err)
		default:
		}

		start := time.Now()
		rel, err := a.locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: held.GetToken()})
		if err != nil || !rel.GetReleased() {
			t.Fatalf("round %d: Release on A = %v, %v; want released", i, rel, err)
		}
		var r result
		select {
		case r = <-done:
		case <-time.After(wait + 5*time.Second):
			t.Fatalf("round %d: Lock on B still waiting %v after A's release", i, wait+5*time.Second)
		}
		latency := r.at.Sub(start)
		if r.err != nil || !r.resp.GetAcquired() || r.resp.GetFence() <= held.GetFence() {
			t.Fatalf("round %d: Lock on B returned %v after A's release: %v, %v; want acquired with a fence above A's %d",
				i, latency, r.resp, r.err, held.GetFence())
		}
		if latency >= wait/2 {
			// The wait's last attempt, not a wake-up, found the lock free.
			t.Fatalf("round %d: Lock on B acquired %v after A's release; no wake-up reached it", i, latency)
		}
		latencies = append(latencies, latency)
		fence = r.resp.GetFence()
		rel, err = b.locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: r.resp.GetToken()})
		if err != nil || !rel.GetReleased() {
			t.Fatalf("round %d: Release on B = %v, %v; want released", i, rel, err)
		}
	}
	p50, p90, maxD := quantiles(latencies)
	t.Logf("lock hand-off A's Release -> B's waiting Lock, %d rounds: p50 %v, p90 %v, max %v", rounds, p50, p90, maxD)
	if p50 >= time.Second {
		t.Errorf("median hand-off %v; want far below the %v lease: a wake-up, not an expiry, must grant the lock", p50, lease)
	}
}

// TestLongPollAcrossInstances has a Claim long-poll on B for an empty queue,
// and A enqueue, 20 times: the enqueue must wake B's Claim through Redis.
func TestLongPollAcrossInstances(t *testing.T) {
	const (
		rounds = 20
		queue  = "longpoll"
		wait   = 30 * time.Second
	)
	a, b := startPair(t)
	ctx := testContext(t, 50*time.Second)

	type result struct {
		resp *coordv1.ClaimResponse
		err  error
		at   time.Time
	}
	var latencies []time.Duration
	for i := range rounds {
		done := make(chan result, 1)
		go func() {
			resp, err := b.queues.Claim(ctx, &coordv1.ClaimRequest{
				Queue: queue, MaxMessages: 1, VisibilityTimeout: durationpb.New(30 * time.Second), Wait: durationpb.New(wait),
			})
			done <- result{resp, err, time.Now()}
		}()
		b.waitStarted(t, "coord.v1.QueueService", "Claim", i+1, settle)
		select {
		case r := <-done:
			t.Fatalf("round %d: Claim on B of an empty queue returned before the enqueue: %v, %v", i, r.resp, r.err)
		default:
		}

		payload := fmt.Sprintf("message %d", i)
		start := time.Now()
		enq, err := a.queues.Enqueue(ctx, &coordv1.EnqueueRequest{Queue: queue, Payload: []byte(payload)})
		if err != nil || enq.GetMessageId() == "" {
			t.Fatalf("round %d: Enqueue on A = %v, %v; want a message id", i, enq, err)
		}
		var r result
		select {
		case r = <-done:
		case <-time.After(wait + 5*time.Second):
			t.Fatalf("round %d: Claim on B still waiting %v after A's enqueue", i, wait+5*time.Second)
		}
		latency := r.at.Sub(start)
		if r.err != nil || len(r.resp.GetMessages()) != 1 {
			t.Fatalf("round %d: Claim on B returned %v after A's enqueue: %v, %v; want the message", i, latency, r.resp, r.err)
		}
		m := r.resp.GetMessages()[0]
		if m.GetMessageId() != enq.GetMessageId() || string(m.GetPayload()) != payload || m.GetAttempt() != 1 {
			t.Fatalf("round %d: Claim on B = %v; want message %s, %q, attempt 1", i, m, enq.GetMessageId(), payload)
		}
		if latency >= wait/2 {
			// The wait's last attempt, not a wake-up, found the message.
			t.Fatalf("round %d: Claim on B returned the message %v after A's enqueue; no wake-up reached it", i, latency)
		}
		latencies = append(latencies, latency)
		ack, err := a.queues.Ack(ctx, &coordv1.AckRequest{Queue: queue, Receipt: m.GetReceipt()})
		if err != nil || !ack.GetAcked() {
			t.Fatalf("round %d: Ack on A of B's receipt = %v, %v; want acked", i, ack, err)
		}
	}
	p50, _, maxD := quantiles(latencies)
	t.Logf("long-poll A's Enqueue -> B's waiting Claim, %d rounds: p50 %v, max %v", rounds, p50, maxD)
	if p50 >= time.Second {
		t.Errorf("median enqueue-to-claim %v; want far below the %v wait: a wake-up must end the long-poll", p50, wait)
	}
}
