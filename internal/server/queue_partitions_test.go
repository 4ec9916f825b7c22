package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
)

// withPartitions configures queue "parts" of the default namespace with k
// partitions.
func withPartitions(k int) func(*config) {
	return func(c *config) {
		c.services.Queue.Partitioned = []queue.Partitioned{{Namespace: server.DefaultNamespace, Name: "parts", Partitions: k}}
	}
}

// TestQueuePartitions: a queue of 3 partitions spreads its messages over
// them (a group's all in one), Claim takes from every partition, Stats sums
// them, and a receipt finds its partition for Ack, Nack and Extend; a
// receipt naming a partition that cannot be is malformed.
func TestQueuePartitions(t *testing.T) {
	h := newHarness(t, withPartitions(3))
	ids := map[string]bool{}
	for i := range 30 {
		r := &coordv1.EnqueueRequest{Queue: "parts", Payload: []byte(fmt.Sprint(i))}
		if i%3 == 0 {
			r.Group = "g" + fmt.Sprint(i%2)
		}
		ids[h.enqueue(t, r).GetMessageId()] = true
	}
	q := store.Scope(server.DefaultNamespace, "parts")
	groupPart := map[string]string{}
	for p := range 3 {
		st, err := h.st.Stats(ctx(t), h.st.PartitionName(q, p, 3))
		if err != nil {
			t.Fatal(err)
		}
		if st.Ready == 0 {
			t.Errorf("partition %d of 3 holds %+v, want some of the 30 messages", p, st)
		}
	}
	if s := h.stats(t, "parts"); s != "ready=22 delayed=8 in_flight=0 dead=0" {
		t.Errorf("stats %s, want the sum: 20 ready, 2 groups' heads ready and 8 behind them", s)
	}
	var msgs []*coordv1.Message
	for len(msgs) < 30 {
		got := h.claim(t, &coordv1.ClaimRequest{Queue: "parts", MaxMessages: 7, VisibilityTimeout: dur(time.Minute)})
		if len(got) == 0 {
			t.Fatalf("claimed %d of 30, then nothing (stats %s)", len(msgs), h.stats(t, "parts"))
		}
		for _, m := range got {
			if !ids[m.GetMessageId()] {
				t.Fatalf("claimed %s: unknown or twice", m.GetMessageId())
			}
			delete(ids, m.GetMessageId())
			if g := m.GetGroup(); g != "" {
				p := m.GetReceipt()[store.ReceiptLen+2:]
				if was, ok := groupPart[g]; ok && was != p {
					t.Errorf("group %s in partitions %s and %s", g, was, p)
				}
				groupPart[g] = p
				// Its next message comes once this one is acked.
				if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "parts", Receipt: m.GetReceipt()}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			msgs = append(msgs, m)
		}
		if len(ids) == 0 {
			break
		}
	}
	if len(ids) != 0 {
		t.Fatalf("%d messages never claimed", len(ids))
	}
	for _, m := range msgs {
		if r := m.GetReceipt(); len(r) != store.ReceiptLen+4 || !strings.HasPrefix(r[store.ReceiptLen:], "03") {
			t.Fatalf("receipt %q: want the store's, then 03 and the partition", r)
		}
	}
	if _, err := h.queues.Extend(ctx(t), &coordv1.ExtendRequest{Queue: "parts", Receipt: msgs[0].GetReceipt(), VisibilityTimeout: dur(time.Hour)}); err != nil {
		t.Errorf("Extend: %v", err)
	}
	if _, err := h.queues.Nack(ctx(t), &coordv1.NackRequest{Queue: "parts", Receipt: msgs[1].GetReceipt(), Delay: dur(0)}); err != nil {
		t.Errorf("Nack: %v", err)
	}
	var receipts []string
	for _, m := range msgs[2:] {
		receipts = append(receipts, m.GetReceipt())
	}
	resp, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "parts", Receipts: receipts})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetAcked() || int(resp.GetAckedCount()) != len(receipts) {
		t.Errorf("Ack of %d receipts over the partitions: %v", len(receipts), resp)
	}
	if s := h.stats(t, "parts"); s != "ready=1 delayed=0 in_flight=1 dead=0" {
		t.Errorf("stats %s, want the nacked message ready and the extended one in flight", s)
	}
}

// TestQueueRepartition: the queue goes from 3 partitions to 2, 5 and 1
// (instances configured one way, then another, on one store), with
// messages enqueued, claimed and left in flight at every step; in the end
// every message is claimed and acked exactly once, through whichever
// instance. Nothing is lost or delivered twice (every claim is acked
// within its visibility timeout).
func TestQueueRepartition(t *testing.T) {
	first := newHarness(t, withPartitions(3))
	type sent struct{ acked int }
	var mu sync.Mutex
	all := map[string]*sent{}
	var inFlight []string // receipts, claimed through earlier instances
	h := first
	for step, k := range []int{3, 2, 5, 1} {
		if step > 0 {
			h = newHarness(t, withPartitions(k), func(c *config) { c.shared = first })
		}
		for i := range 40 {
			r := &coordv1.EnqueueRequest{Queue: "parts", Payload: []byte(fmt.Sprint(k, i))}
			switch i % 4 {
			case 1:
				r.Group = fmt.Sprint("g", i%3)
			case 2:
				r.DedupId = fmt.Sprint("d", k, i)
			}
			mu.Lock()
			all[h.enqueue(t, r).GetMessageId()] = &sent{}
			mu.Unlock()
		}
		for _, m := range h.claim(t, &coordv1.ClaimRequest{Queue: "parts", MaxMessages: 10, VisibilityTimeout: dur(10 * time.Minute)}) {
			inFlight = append(inFlight, m.GetReceipt())
			all[m.GetMessageId()].acked-- // claimed: acked below
		}
	}
	// The last instance (1 partition) acks what the others claimed, then
	// drains the queue.
	resp, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "parts", Receipts: inFlight})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetAcked() || int(resp.GetAckedCount()) != len(inFlight) {
		t.Errorf("Ack of the %d receipts earlier instances claimed: %v", len(inFlight), resp)
	}
	for id, s := range all {
		if s.acked == -1 {
			s.acked = 1
		} else if s.acked != 0 {
			t.Errorf("message %s claimed %d times before the drain", id, -s.acked)
		}
	}
	for {
		msgs := h.claim(t, &coordv1.ClaimRequest{Queue: "parts", MaxMessages: 25, VisibilityTimeout: dur(10 * time.Minute)})
		if len(msgs) == 0 {
			break
		}
		var rs []string
		for _, m := range msgs {
			s := all[m.GetMessageId()]
			if s == nil {
				t.Fatalf("claimed an unknown message %s", m.GetMessageId())
			}
			s.acked++
			rs = append(rs, m.GetReceipt())
		}
		if _, err := h.queues.Ack(ctx(t), &coordv1.AckRequest{Queue: "parts", Receipts: rs}); err != nil {
			t.Fatal(err)
		}
	}
	lost, twice := 0, 0
	for _, s := range all {
		switch {
		case s.acked == 0:
			lost++
		case s.acked > 1:
			twice++
		}
	}
	if lost != 0 || twice != 0 || len(all) != 160 {
		t.Errorf("of %d messages over partitions 3, 2, 5, 1: %d never delivered, %d delivered twice", len(all), lost, twice)
	}
	if s := h.stats(t, "parts"); s != "ready=0 delayed=0 in_flight=0 dead=0" {
		t.Errorf("stats after the drain: %s", s)
	}
}

// TestQueuePartitionsLongPoll: a waiting Claim on a partitioned queue is
// woken by a message enqueued in any partition (without the wake-up it
// would wait out its minute, past the test's deadline).
func TestQueuePartitionsLongPoll(t *testing.T) {
	h := newHarness(t, withPartitions(3))
	for i := range 3 { // one partition after another, in turn
		got := make(chan []*coordv1.Message, 1)
		go func() {
			resp, err := h.queues.Claim(ctx(t), &coordv1.ClaimRequest{Queue: "parts", Wait: dur(time.Minute)})
			if err != nil {
				t.Error(err)
			}
			got <- resp.GetMessages()
		}()
		time.Sleep(50 * time.Millisecond) // let the claim subscribe and wait
		h.enqueue(t, &coordv1.EnqueueRequest{Queue: "parts", Payload: []byte(fmt.Sprint(i))})
		select {
		case msgs := <-got:
			if len(msgs) != 1 || string(msgs[0].GetPayload()) != fmt.Sprint(i) {
				t.Fatalf("claim %d: %v", i, msgs)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("claim %d was not woken by the enqueue", i)
		}
	}
}
