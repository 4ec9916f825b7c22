package server_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

func (h *harness) enqueue(t testing.TB, req *coordv1.EnqueueRequest) *coordv1.EnqueueResponse {
	t.Helper()
	resp, err := h.queues.Enqueue(ctx(t), req)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return resp
}

func (h *harness) claim(t testing.TB, req *coordv1.ClaimRequest) []*coordv1.Message {
	t.Helper()
	resp, err := h.queues.Claim(ctx(t), req)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return resp.GetMessages()
}

func (h *harness) stats(t testing.TB, queue string) string {
	t.Helper()
	s, err := h.queues.Stats(ctx(t), &coordv1.StatsRequest{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("ready=%d delayed=%d in_flight=%d dead=%d", s.GetReady(), s.GetDelayed(), s.GetInFlight(), s.GetDead())
}

func TestQueueDelayedMessage(t *testing.T) {
	h := newHarness(t, withFakeClock)
	e := h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("later"), Delay: dur(time.Minute)})
	if !e.GetDeliverTime().AsTime().Equal(epoch.Add(time.Minute)) {
		t.Fatalf("deliver_time %v, want +1m", e.GetDeliverTime().AsTime())
	}
	h.clock.Advance(time.Minute - time.Microsecond)
	if got := h.claim(t, &coordv1.ClaimRequest{Queue: "q"}); len(got) != 0 {
		t.Fatalf("claimed %v before its deliver_time", got)
	}
	if s := h.stats(t, "q"); s != "ready=0 delayed=1 in_flight=0 dead=0" {
		t.Fatalf("stats %s", s)
	}
	h.clock.Advance(time.Microsecond)
	got := h.claim(t, &coordv1.ClaimRequest{Queue: "q"})
	if len(got) != 1 || got[0].GetMessageId() != e.GetMessageId() || string(got[0].GetPayload()) != "later" || got[0].GetAttempt() != 1 {
		t.Fatalf("claimed %v at its deliver_time, want the message, attempt 1", got)
	}
	if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "q", Receipt: got[0].GetReceipt()}); err != nil {
		t.Fatal(err)
	}
	// deliver_time works the same way.
	at := epoch.Add(2 * time.Hour)
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", DeliverTime: timestampAt(at)})
	h.clock.Set(at.Add(-time.Microsecond))
	if got := h.claim(t, &coordv1.ClaimRequest{Queue: "q"}); len(got) != 0 {
		t.Fatal("claimed before deliver_time")
	}
	h.clock.Set(at)
	if got := h.claim(t, &coordv1.ClaimRequest{Queue: "q"}); len(got) != 1 {
		t.Fatal("not claimable at deliver_time")
	}
}

func TestQueueRedeliveryDeadLettersAndRedrive(t *testing.T) {
	h := newHarness(t, withFakeClock)
	e := h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("flaky"), MaxAttempts: 3})
	var receipts []string
	for attempt := int32(1); attempt <= 3; attempt++ {
		got := h.claim(t, &coordv1.ClaimRequest{Queue: "q", VisibilityTimeout: dur(10 * time.Second)})
		if len(got) != 1 || got[0].GetMessageId() != e.GetMessageId() || got[0].GetAttempt() != attempt {
			t.Fatalf("claim %d = %v, want the message with attempt %d", attempt, got, attempt)
		}
		if again := h.claim(t, &coordv1.ClaimRequest{Queue: "q"}); len(again) != 0 {
			t.Fatal("a claimed message was claimable within its visibility timeout")
		}
		receipts = append(receipts, got[0].GetReceipt())
		h.clock.Advance(10 * time.Second) // not acked: the claim expires
	}
	if s := h.stats(t, "q"); s != "ready=0 delayed=0 in_flight=0 dead=1" {
		t.Fatalf("after 3 expired claims of a 3-attempt message: %s", s)
	}
	_, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "q", Receipt: receipts[2]})
	wantStatus(t, err, codes.FailedPrecondition, "RECEIPT_EXPIRED")
	rd, err := h.queues.Redrive(ctx(t), &coordv1.RedriveRequest{Queue: "q"})
	if err != nil || rd.GetMoved() != 1 {
		t.Fatalf("Redrive = %v, %v", rd, err)
	}
	got := h.claim(t, &coordv1.ClaimRequest{Queue: "q"})
	if len(got) != 1 || got[0].GetMessageId() != e.GetMessageId() || got[0].GetAttempt() != 1 {
		t.Fatalf("claim after Redrive = %v, want the message with attempt 1", got)
	}
	if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "q", Receipt: got[0].GetReceipt()}); err != nil {
		t.Fatal(err)
	}
	for _, r := range receipts { // every old receipt stays dead
		_, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "q", Receipt: r})
		wantStatus(t, err, codes.FailedPrecondition, "RECEIPT_EXPIRED")
	}
	if s := h.stats(t, "q"); s != "ready=0 delayed=0 in_flight=0 dead=0" {
		t.Fatalf("after the ack: %s", s)
	}
}

func TestQueueExpiredReceipt(t *testing.T) {
	h := newHarness(t, withFakeClock)
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q"})
	m := h.claim(t, &coordv1.ClaimRequest{Queue: "q", VisibilityTimeout: dur(time.Second)})[0]
	ext, err := h.queues.Extend(ctx(t), &coordv1.ExtendRequest{Queue: "q", Receipt: m.GetReceipt(), VisibilityTimeout: dur(5 * time.Second)})
	if err != nil || !ext.GetExpireTime().AsTime().Equal(epoch.Add(5*time.Second)) {
		t.Fatalf("Extend = %v, %v", ext, err)
	}
	h.clock.Advance(5 * time.Second)
	for name, call := range map[string]func() error{
		"Ack": func() error {
			_, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "q", Receipt: m.GetReceipt()})
			return err
		},
		"Nack": func() error {
			_, err := h.queues.Nack(ctx(t), &coordv1.NackRequest{Queue: "q", Receipt: m.GetReceipt()})
			return err
		},
		"Extend": func() error {
			_, err := h.queues.Extend(ctx(t), &coordv1.ExtendRequest{Queue: "q", Receipt: m.GetReceipt(), VisibilityTimeout: dur(time.Second)})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { wantStatus(t, call(), codes.FailedPrecondition, "RECEIPT_EXPIRED") })
	}
}

func TestQueueNack(t *testing.T) {
	h := newHarness(t, withFakeClock)
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", MaxAttempts: 2})
	m := h.claim(t, &coordv1.ClaimRequest{Queue: "q"})[0]
	n, err := h.queues.Nack(ctx(t), &coordv1.NackRequest{Queue: "q", Receipt: m.GetReceipt(), Delay: dur(time.Minute)})
	if err != nil || n.GetDeadLettered() || !n.GetDeliverTime().AsTime().Equal(epoch.Add(time.Minute)) {
		t.Fatalf("Nack with delay = %v, %v", n, err)
	}
	if s := h.stats(t, "q"); s != "ready=0 delayed=1 in_flight=0 dead=0" {
		t.Fatalf("after Nack: %s", s)
	}
	h.clock.Advance(time.Minute)
	m = h.claim(t, &coordv1.ClaimRequest{Queue: "q"})[0]
	if m.GetAttempt() != 2 {
		t.Fatalf("attempt %d, want 2", m.GetAttempt())
	}
	n, err = h.queues.Nack(ctx(t), &coordv1.NackRequest{Queue: "q", Receipt: m.GetReceipt()})
	if err != nil || !n.GetDeadLettered() {
		t.Fatalf("Nack at max_attempts = %v, %v; want dead-lettered", n, err)
	}
}

// TestQueueNackBackoff: without a delay, Nack backs off by attempt: base 1s
// doubling, with equal jitter (half the step fixed, half random).
func TestQueueNackBackoff(t *testing.T) {
	h := newHarness(t, withFakeClock)
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", MaxAttempts: 5})
	for attempt := 1; attempt <= 4; attempt++ {
		m := h.claim(t, &coordv1.ClaimRequest{Queue: "q"})
		if len(m) != 1 {
			t.Fatalf("attempt %d: nothing to claim", attempt)
		}
		n, err := h.queues.Nack(ctx(t), &coordv1.NackRequest{Queue: "q", Receipt: m[0].GetReceipt()})
		if err != nil {
			t.Fatal(err)
		}
		step := time.Second << (attempt - 1)
		delay := n.GetDeliverTime().AsTime().Sub(h.clock.Now())
		if delay < step/2 || delay >= step {
			t.Fatalf("attempt %d: backoff %v, want in [%v, %v)", attempt, delay, step/2, step)
		}
		h.clock.Advance(delay)
	}
}

func TestQueueDedup(t *testing.T) {
	h := newHarness(t, withFakeClock)
	first := h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("a"), DedupId: "order-7"})
	h.clock.Advance(4 * time.Minute)
	dup := h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("b"), DedupId: "order-7"})
	if !dup.GetDuplicate() || dup.GetMessageId() != first.GetMessageId() || !dup.GetDeliverTime().AsTime().Equal(first.GetDeliverTime().AsTime()) {
		t.Fatalf("repeat within the window = %v, want the first message %v", dup, first)
	}
	if s := h.stats(t, "q"); s != "ready=1 delayed=0 in_flight=0 dead=0" {
		t.Fatalf("after a duplicate: %s", s)
	}
	h.clock.Advance(time.Minute) // the 5m window has passed
	if again := h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", DedupId: "order-7"}); again.GetDuplicate() || again.GetMessageId() == first.GetMessageId() {
		t.Fatalf("repeat after the window = %v, want a new message", again)
	}
}

// TestQueueConcurrentConsumers: 10 consumers drain 10,000 messages; each is
// acked exactly once and none is lost.
func TestQueueConcurrentConsumers(t *testing.T) {
	h := newHarness(t)
	const total = 10000
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < total; i += 4 {
				if _, err := h.queues.Enqueue(ctx(t), &coordv1.EnqueueRequest{Queue: "work", Payload: []byte(strconv.Itoa(i))}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var mu sync.Mutex
	acked := make(map[string]int, total)
	for c := 0; c < 10; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				msgs := h.claim(t, &coordv1.ClaimRequest{Queue: "work", MaxMessages: 10, VisibilityTimeout: dur(time.Minute)})
				if len(msgs) == 0 {
					return
				}
				for _, m := range msgs {
					if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "work", Receipt: m.GetReceipt()}); err != nil {
						t.Errorf("Ack: %v", err)
						return
					}
					mu.Lock()
					acked[string(m.GetPayload())]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(acked) != total {
		t.Fatalf("%d distinct messages acked, want %d", len(acked), total)
	}
	for p, n := range acked {
		if n != 1 {
			t.Fatalf("message %s acked %d times", p, n)
		}
	}
	if s := h.stats(t, "work"); s != "ready=0 delayed=0 in_flight=0 dead=0" {
		t.Fatalf("after draining: %s", s)
	}
}

// TestQueueLongPoll: a waiting Claim returns as soon as a message is
// enqueued, and empty when its wait passes.
func TestQueueLongPoll(t *testing.T) {
	h := newHarness(t)
	got := make(chan []*coordv1.Message, 1)
	go func() { got <- h.claim(t, &coordv1.ClaimRequest{Queue: "lp", Wait: dur(30 * time.Second)}) }()
	time.Sleep(50 * time.Millisecond) // let it wait
	start := time.Now()
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "lp", Payload: []byte("ping")})
	msgs := <-got
	t.Logf("long-polling Claim returned %v after the Enqueue call", time.Since(start))
	if len(msgs) != 1 || string(msgs[0].GetPayload()) != "ping" {
		t.Fatalf("long poll got %v", msgs)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("the long poll was not woken by the enqueue")
	}
	// A delayed message wakes a waiter when it becomes due.
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "lp", Delay: dur(100 * time.Millisecond)})
	if msgs := h.claim(t, &coordv1.ClaimRequest{Queue: "lp", Wait: dur(10 * time.Second)}); len(msgs) != 1 {
		t.Fatalf("long poll for a delayed message got %v", msgs)
	}
	start = time.Now()
	if msgs := h.claim(t, &coordv1.ClaimRequest{Queue: "lp", Wait: dur(100 * time.Millisecond)}); len(msgs) != 0 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("empty long poll returned %v after %v", msgs, time.Since(start))
	}
}

// TestQueueAckMany: one Ack takes several receipts; the live ones are acked,
// the others come back in expired_receipts, and the call succeeds.
func TestQueueAckMany(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 3; i++ {
		h.enqueue(t, &coordv1.EnqueueRequest{Queue: "batch"})
	}
	msgs := h.claim(t, &coordv1.ClaimRequest{Queue: "batch", MaxMessages: 3})
	if len(msgs) != 3 {
		t.Fatalf("claimed %d, want 3", len(msgs))
	}
	if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "batch", Receipt: msgs[2].GetReceipt()}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "batch", Receipts: []string{msgs[0].GetReceipt(), msgs[1].GetReceipt(), msgs[2].GetReceipt()}})
	if err != nil || resp.GetAcked() || resp.GetAckedCount() != 2 || len(resp.GetExpiredReceipts()) != 1 || resp.GetExpiredReceipts()[0] != msgs[2].GetReceipt() {
		t.Fatalf("Ack of three = %v, %v; want 2 acked and the third expired", resp, err)
	}
	if s := h.stats(t, "batch"); s != "ready=0 delayed=0 in_flight=0 dead=0" {
		t.Fatalf("after the acks: %s", s)
	}
	_, err = h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "batch", Receipt: msgs[0].GetReceipt(), Receipts: []string{msgs[1].GetReceipt()}})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	many := make([]string, 101)
	for i := range many {
		many[i] = msgs[0].GetReceipt()
	}
	_, err = h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "batch", Receipts: many})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
}

// TestQueuePriorityAndGroups: through the API, a higher priority is claimed
// first, and a group's messages come one at a time, in enqueue order.
func TestQueuePriorityAndGroups(t *testing.T) {
	h := newHarness(t)
	for _, r := range []*coordv1.EnqueueRequest{
		{Queue: "pg", Payload: []byte("low")},
		{Queue: "pg", Payload: []byte("high"), Priority: 9},
		{Queue: "pg", Payload: []byte("g1"), Group: "order-7", Priority: 5},
		{Queue: "pg", Payload: []byte("g2"), Group: "order-7", Priority: 9},
	} {
		h.enqueue(t, r)
	}
	var got []string
	msgs := h.claim(t, &coordv1.ClaimRequest{Queue: "pg", MaxMessages: 10})
	for _, m := range msgs {
		got = append(got, fmt.Sprintf("%s/%d/%s", m.GetPayload(), m.GetPriority(), m.GetGroup()))
	}
	if want := "[high/9/ g1/5/order-7 low/0/]"; fmt.Sprint(got) != want {
		t.Fatalf("claimed %v, want %s (g2 behind g1)", got, want)
	}
	if s := h.stats(t, "pg"); s != "ready=0 delayed=1 in_flight=3 dead=0" {
		t.Errorf("stats %s: want g2 counted delayed while g1 is out", s)
	}
	if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "pg", Receipt: msgs[1].GetReceipt()}); err != nil {
		t.Fatal(err)
	}
	msgs = h.claim(t, &coordv1.ClaimRequest{Queue: "pg", MaxMessages: 10})
	if len(msgs) != 1 || string(msgs[0].GetPayload()) != "g2" {
		t.Fatalf("after g1's ack: %v, want g2", msgs)
	}
}
