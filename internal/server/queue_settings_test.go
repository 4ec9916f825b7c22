package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/store/storetest"
)

// TestQueuePauseResume: a paused queue takes messages, keeps its claims
// live and hands out nothing, even to a Claim waiting before the pause;
// ResumeQueue wakes that Claim. Stats and GetQueueSettings say paused.
func TestQueuePauseResume(t *testing.T) {
	h := newHarness(t)
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("a")})
	held := h.claim(t, &coordv1.ClaimRequest{Queue: "q"})
	p, err := h.queues.PauseQueue(ctx(t), &coordv1.PauseQueueRequest{Queue: "q"})
	if err != nil || !p.GetSettings().GetPaused() {
		t.Fatalf("PauseQueue: %v, %v", p, err)
	}
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("b")})
	if got := h.claim(t, &coordv1.ClaimRequest{Queue: "q"}); len(got) != 0 {
		t.Fatalf("claimed %d from a paused queue", len(got))
	}
	if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "q", Receipt: held[0].GetReceipt()}); err != nil {
		t.Fatalf("Ack of a claim made before the pause: %v", err)
	}
	st, err := h.queues.Stats(ctx(t), &coordv1.StatsRequest{Queue: "q"})
	if err != nil || !st.GetPaused() || st.GetReady() != 1 {
		t.Fatalf("Stats of the paused queue: %v, %v", st, err)
	}
	got := make(chan []*coordv1.Message, 1)
	go func() {
		resp, err := h.queues.Claim(ctx(t), &coordv1.ClaimRequest{Queue: "q", Wait: dur(10 * time.Second)})
		if err != nil {
			t.Errorf("waiting Claim: %v", err)
		}
		got <- resp.GetMessages()
	}()
	time.Sleep(100 * time.Millisecond) // the Claim waits (a later start would only make it find b at once)
	if _, err := h.queues.ResumeQueue(ctx(t), &coordv1.ResumeQueueRequest{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ms := <-got:
		if len(ms) != 1 || string(ms[0].GetPayload()) != "b" {
			t.Fatalf("the waiting Claim got %v, want b", ms)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ResumeQueue did not wake the waiting Claim")
	}
	s, err := h.queues.GetQueueSettings(ctx(t), &coordv1.GetQueueSettingsRequest{Queue: "q"})
	if err != nil || s.GetSettings().GetPaused() {
		t.Fatalf("GetQueueSettings after the resume: %v, %v", s, err)
	}
}

// TestQueueCapWakesWaiter: with max_in_flight 1, a Claim waiting behind
// the one claim in flight gets the next message when that claim is acked,
// without polling (its wait is far longer than the test's).
func TestQueueCapWakesWaiter(t *testing.T) {
	h := newHarness(t)
	c, err := h.queues.ConfigureQueue(ctx(t), &coordv1.ConfigureQueueRequest{Queue: "q", MaxInFlight: 1,
		ClaimRate: &coordv1.ClaimRate{Limit: 100, Period: dur(time.Second)}})
	if err != nil || c.GetSettings().GetMaxInFlight() != 1 || c.GetSettings().GetClaimRate().GetLimit() != 100 {
		t.Fatalf("ConfigureQueue: %v, %v", c, err)
	}
	for _, p := range []string{"a", "b"} {
		h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte(p)})
	}
	first := h.claim(t, &coordv1.ClaimRequest{Queue: "q", MaxMessages: 10})
	if len(first) != 1 {
		t.Fatalf("claimed %d under max_in_flight 1", len(first))
	}
	got := make(chan []*coordv1.Message, 1)
	start := time.Now()
	go func() {
		resp, err := h.queues.Claim(ctx(t), &coordv1.ClaimRequest{Queue: "q", MaxMessages: 10, Wait: dur(30 * time.Second)})
		if err != nil {
			t.Errorf("waiting Claim: %v", err)
		}
		got <- resp.GetMessages()
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "q", Receipt: first[0].GetReceipt()}); err != nil {
		t.Fatal(err)
	}
	select {
	case ms := <-got:
		if len(ms) != 1 || string(ms[0].GetPayload()) != "b" {
			t.Fatalf("the waiting Claim got %v, want b", ms)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the Ack did not wake the waiting Claim (%v)", time.Since(start))
	}
}

// TestQueueSettingsBadInput: each bad setting is INVALID_ARGUMENT naming
// its field, and changes nothing; a pause of a partitioned queue stops
// claims from every partition.
func TestQueueSettingsBadInput(t *testing.T) {
	h := newHarness(t, withPartitions(3))
	for _, tc := range []struct {
		req   *coordv1.ConfigureQueueRequest
		field string
	}{
		{&coordv1.ConfigureQueueRequest{Queue: "", MaxInFlight: 1}, "queue"},
		{&coordv1.ConfigureQueueRequest{Queue: "q", MaxInFlight: -1}, "max_in_flight"},
		{&coordv1.ConfigureQueueRequest{Queue: "q", MaxInFlight: 1_000_001}, "max_in_flight"},
		{&coordv1.ConfigureQueueRequest{Queue: "q", ClaimRate: &coordv1.ClaimRate{Limit: 5}}, "claim_rate.period"},
		{&coordv1.ConfigureQueueRequest{Queue: "q", ClaimRate: &coordv1.ClaimRate{Period: dur(time.Second)}}, "claim_rate.limit"},
		{&coordv1.ConfigureQueueRequest{Queue: "q", ClaimRate: &coordv1.ClaimRate{Limit: -1, Period: dur(time.Second)}}, "claim_rate.limit"},
		{&coordv1.ConfigureQueueRequest{Queue: "q", ClaimRate: &coordv1.ClaimRate{Limit: 1_000_001, Period: dur(time.Second)}}, "claim_rate.limit"},
		{&coordv1.ConfigureQueueRequest{Queue: "q", ClaimRate: &coordv1.ClaimRate{Limit: 5, Period: dur(time.Microsecond)}}, "claim_rate.period"},
		{&coordv1.ConfigureQueueRequest{Queue: "q", ClaimRate: &coordv1.ClaimRate{Limit: 5, Period: dur(25 * time.Hour)}}, "claim_rate.period"},
	} {
		_, err := h.queues.ConfigureQueue(ctx(t), tc.req)
		if st := wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT"); !strings.Contains(st.Message(), tc.field) {
			t.Errorf("%v: message %q does not name %s", tc.req, st.Message(), tc.field)
		}
	}
	s, err := h.queues.GetQueueSettings(ctx(t), &coordv1.GetQueueSettingsRequest{Queue: "q"})
	if err != nil || s.GetSettings().GetMaxInFlight() != 0 || s.GetSettings().GetClaimRate() != nil {
		t.Fatalf("settings after refused calls: %v, %v", s, err)
	}
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "parts", Payload: []byte("x")})
	if _, err := h.queues.PauseQueue(ctx(t), &coordv1.PauseQueueRequest{Queue: "parts"}); err != nil {
		t.Fatal(err)
	}
	if got := h.claim(t, &coordv1.ClaimRequest{Queue: "parts", MaxMessages: 10}); len(got) != 0 {
		t.Fatalf("claimed %d from a paused partitioned queue", len(got))
	}
	if _, err := h.queues.ResumeQueue(ctx(t), &coordv1.ResumeQueueRequest{Queue: "parts"}); err != nil {
		t.Fatal(err)
	}
	if got := h.claim(t, &coordv1.ClaimRequest{Queue: "parts", MaxMessages: 10}); len(got) != 1 {
		t.Fatalf("claimed %d after the resume, want 1", len(got))
	}
}

// TestQueueCapPartitioned: a queue of 3 partitions capped at 5 in flight,
// 32 claimers on two instances acking, nacking and letting claims
// expire: at every claim the claims held (claimed, not yet given back, not
// expired) stay within the cap, and every message is handled. A raised cap
// lets more through.
func TestQueueCapPartitioned(t *testing.T) {
	const capN, total = 5, 120
	a, b := newPair(t, withPartitions(3))
	if _, err := a.queues.ConfigureQueue(ctx(t), &coordv1.ConfigureQueueRequest{Queue: "parts", MaxInFlight: capN}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(queue.SettingsRefresh) // each instance sees the cap within it
	for i := range total {
		a.enqueue(t, &coordv1.EnqueueRequest{Queue: "parts", Payload: []byte(fmt.Sprint(i)), MaxAttempts: 100})
	}
	var mu sync.Mutex
	held := map[string]time.Time{}
	acked := map[string]bool{}
	over := 0
	var wg sync.WaitGroup
	for w := range 32 {
		h := a
		if w%2 == 1 {
			h = b
		}
		wg.Go(func() {
			for n := 0; ; n++ {
				mu.Lock()
				done := len(acked) == total
				mu.Unlock()
				if done || n > 2000 {
					return
				}
				resp, err := h.queues.Claim(ctx(t), &coordv1.ClaimRequest{Queue: "parts", MaxMessages: 2,
					VisibilityTimeout: dur(time.Duration(200+w*10) * time.Millisecond), Wait: dur(100 * time.Millisecond)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, m := range resp.GetMessages() {
					held[m.GetReceipt()] = m.GetExpireTime().AsTime()
				}
				now := time.Now()
				for r, d := range held {
					if !now.Before(d) {
						delete(held, r)
					}
				}
				if len(held) > capN {
					over++
				}
				mu.Unlock()
				for i, m := range resp.GetMessages() {
					mu.Lock()
					delete(held, m.GetReceipt())
					mu.Unlock()
					switch (n + i + w) % 8 {
					case 0, 1, 2, 3, 4:
						if r, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "parts", Receipt: m.GetReceipt()}); err == nil && r.GetAcked() {
							mu.Lock()
							acked[m.GetMessageId()] = true
							mu.Unlock()
						}
					case 5, 6:
						_, _ = h.queues.Nack(ctx(t), &coordv1.NackRequest{Queue: "parts", Receipt: m.GetReceipt(), Delay: dur(0)})
					default:
						mu.Lock()
						held[m.GetReceipt()] = m.GetExpireTime().AsTime() // left to expire
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if over > 0 {
		t.Errorf("claims seen over the cap of %d: %d times", capN, over)
	}
	if len(acked) != total {
		t.Errorf("%d of %d messages acked (stats %s)", len(acked), total, a.stats(t, "parts"))
	}
}

// TestQueueCapPartitionedUncertainClaim: a partition's Claim whose answer
// is lost (it ran) leaves its reservation in place: the claim it may have
// made stays counted, and the next Claim under a cap of 1 gets nothing
// until that claim's reservation ends.
func TestQueueCapPartitionedUncertainClaim(t *testing.T) {
	var f *storetest.Faulty
	h := newHarness(t, withPartitions(3), withFaulty(&f))
	if _, err := h.queues.ConfigureQueue(ctx(t), &coordv1.ConfigureQueueRequest{Queue: "parts", MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(queue.SettingsRefresh)
	for range 6 {
		h.enqueue(t, &coordv1.EnqueueRequest{Queue: "parts", Payload: []byte("x")})
	}
	f.FailAfter("Claim")
	if _, err := h.queues.Claim(ctx(t), &coordv1.ClaimRequest{Queue: "parts", VisibilityTimeout: dur(time.Minute)}); err == nil {
		t.Fatal("Claim with its answer lost succeeded")
	}
	f.Clear("Claim")
	if st := h.stats(t, "parts"); st != "ready=5 delayed=0 in_flight=1 dead=0" {
		t.Fatalf("after the lost answer: %s, want one claimed", st)
	}
	if got := h.claim(t, &coordv1.ClaimRequest{Queue: "parts", MaxMessages: 5}); len(got) != 0 {
		t.Fatalf("claimed %d beside the claim whose answer was lost, under a cap of 1", len(got))
	}
}

// TestScheduleBound: past queue.max_schedules_per_namespace a new schedule
// is RESOURCE_EXHAUSTED TOO_MANY_SCHEDULES and nothing is stored; one put
// again is not new; other namespaces count apart.
func TestScheduleBound(t *testing.T) {
	h := newHarness(t, func(c *config) { c.services.Queue.MaxSchedulesPerNamespace = 2 })
	put := func(name string) error {
		_, err := h.queues.PutSchedule(ctx(t), &coordv1.PutScheduleRequest{Queue: "q", Name: name, Spec: "@hourly"})
		return err
	}
	for _, n := range []string{"a", "b", "b"} {
		if err := put(n); err != nil {
			t.Fatalf("PutSchedule %s: %v", n, err)
		}
	}
	wantStatus(t, put("c"), codes.ResourceExhausted, "TOO_MANY_SCHEDULES")
	l, err := h.queues.ListSchedules(ctx(t), &coordv1.ListSchedulesRequest{})
	if err != nil || len(l.GetSchedules()) != 2 {
		t.Fatalf("ListSchedules after the refusal = %v, %v; want a and b", l, err)
	}
}
