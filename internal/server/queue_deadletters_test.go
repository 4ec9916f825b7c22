package server_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// killAll enqueues n messages with one attempt each into queue (payload
// "<i>-" and padding to size bytes) and makes them dead letters by Nack,
// one at a time, a millisecond apart, returning their IDs in order of
// death.
func (h *harness) killAll(t *testing.T, queue string, n, size int, group func(i int) string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		p := fmt.Appendf(nil, "%d-", i)
		p = append(p, bytes.Repeat([]byte("x"), max(0, size-len(p)))...)
		e := h.enqueue(t, &coordv1.EnqueueRequest{Queue: queue, Payload: p, MaxAttempts: 1, Priority: int32(i % 10), Group: group(i)})
		got := h.claim(t, &coordv1.ClaimRequest{Queue: queue, MaxMessages: 100})
		if len(got) != 1 || got[0].GetMessageId() != e.GetMessageId() {
			t.Fatalf("claim %d = %v, want %s", i, got, e.GetMessageId())
		}
		nk, err := h.queues.Nack(ctx(t), &coordv1.NackRequest{Queue: queue, Receipt: got[0].GetReceipt(), Delay: dur(0)})
		if err != nil || !nk.GetDeadLettered() {
			t.Fatalf("Nack %d = %v, %v; want dead-lettered", i, nk, err)
		}
		ids = append(ids, e.GetMessageId())
		if h.clock != nil {
			h.clock.Advance(time.Millisecond)
		} else {
			time.Sleep(time.Millisecond) // distinct death times on the store's clock
		}
	}
	return ids
}

// listAll lists queue's dead letters page by page.
func (h *harness) listAll(t *testing.T, queue string, size int32) []*coordv1.DeadLetter {
	t.Helper()
	var all []*coordv1.DeadLetter
	tok := ""
	for range 1000 {
		r, err := h.queues.ListDeadLetters(ctx(t), &coordv1.ListDeadLettersRequest{Queue: queue, PageSize: size, PageToken: tok})
		if err != nil {
			t.Fatalf("ListDeadLetters: %v", err)
		}
		if len(r.GetDeadLetters()) > int(size) {
			t.Fatalf("page of %d dead letters, page_size %d", len(r.GetDeadLetters()), size)
		}
		all = append(all, r.GetDeadLetters()...)
		if tok = r.GetNextPageToken(); tok == "" {
			return all
		}
		if len(r.GetDeadLetters()) == 0 {
			t.Fatal("an empty page with a next page token")
		}
	}
	t.Fatal("ListDeadLetters never ended")
	return nil
}

func deadIDsOf(ds []*coordv1.DeadLetter) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.GetMessageId())
	}
	return out
}

// TestQueueDeadLetters: through gRPC, dead letters are listed oldest death
// first in pages (the last with no next token), with a preview and their
// fields and never a receipt; redriven by ID (unknown and live IDs
// ignored); purged in bounded steps until none remain; a page token is
// refused on another queue; purges are counted.
func TestQueueDeadLetters(t *testing.T) {
	var reg *prometheus.Registry
	h := newHarness(t, withFakeClock, withMetrics(&reg))
	start := h.clock.Now()
	dead := h.killAll(t, "q", 12, 300, func(i int) string { return "" })
	live := h.enqueue(t, &coordv1.EnqueueRequest{Queue: "q", Payload: []byte("live")})

	first, err := h.queues.ListDeadLetters(ctx(t), &coordv1.ListDeadLettersRequest{Queue: "q", PageSize: 5, PreviewBytes: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := deadIDsOf(first.GetDeadLetters()); !slices.Equal(got, dead[:5]) || first.GetNextPageToken() == "" {
		t.Fatalf("first page %v, next %q; want %v and a token", got, first.GetNextPageToken(), dead[:5])
	}
	d := first.GetDeadLetters()[1]
	if string(d.GetPayloadPreview()) != "1-x" || d.GetPayloadSize() != 300 || d.GetAttempts() != 1 || d.GetPriority() != 1 || d.GetGroup() != "" {
		t.Errorf("dead letter 1 = %v, want preview 1-x, size 300, 1 attempt, priority 1", d)
	}
	if !d.GetEnqueueTime().AsTime().Equal(start.Add(time.Millisecond)) || !d.GetDeadTime().AsTime().Equal(start.Add(time.Millisecond)) {
		t.Errorf("dead letter 1: enqueued %v, died %v; want both at +1ms", d.GetEnqueueTime().AsTime(), d.GetDeadTime().AsTime())
	}
	full, err := h.queues.ListDeadLetters(ctx(t), &coordv1.ListDeadLettersRequest{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(full.GetDeadLetters()); n != 12 || full.GetNextPageToken() != "" || len(full.GetDeadLetters()[0].GetPayloadPreview()) != 256 {
		t.Fatalf("default page: %d dead letters, next %q, preview %d bytes; want 12, none, 256", n, full.GetNextPageToken(), len(full.GetDeadLetters()[0].GetPayloadPreview()))
	}
	for _, size := range []int32{1, 4, 12} {
		if got := deadIDsOf(h.listAll(t, "q", size)); !slices.Equal(got, dead) {
			t.Errorf("pages of %d: %v, want %v", size, got, dead)
		}
	}
	h.enqueue(t, &coordv1.EnqueueRequest{Queue: "other", Payload: []byte("x")})
	_, err = h.queues.ListDeadLetters(ctx(t), &coordv1.ListDeadLettersRequest{Queue: "other", PageToken: first.GetNextPageToken()})
	if st := wantStatus(t, err, codes.InvalidArgument, ""); !strings.Contains(st.Message(), "page_token") {
		t.Errorf("a token of another queue: %q, want page_token named", st.Message())
	}

	// Redrive by ID: the dead ones named move, the rest is ignored.
	rd, err := h.queues.Redrive(ctx(t), &coordv1.RedriveRequest{Queue: "q", MessageIds: []string{dead[3], live.GetMessageId(), "0123456789abcdef0123456789abcdef", dead[7], dead[3]}})
	if err != nil || rd.GetMoved() != 2 {
		t.Fatalf("Redrive by ID = %v, %v; want 2 moved", rd, err)
	}
	next, err := h.queues.ListDeadLetters(ctx(t), &coordv1.ListDeadLettersRequest{Queue: "q", PageSize: 5, PageToken: first.GetNextPageToken()})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{dead[5], dead[6], dead[8], dead[9], dead[10]}; !slices.Equal(deadIDsOf(next.GetDeadLetters()), want) {
		t.Errorf("second page after the redrive: %v, want %v", deadIDsOf(next.GetDeadLetters()), want)
	}
	got := h.claim(t, &coordv1.ClaimRequest{Queue: "q", MaxMessages: 10})
	var claimed []string
	for _, m := range got {
		claimed = append(claimed, m.GetMessageId())
	}
	// By priority: dead[7] (7), dead[3] (3), live (0).
	if want := []string{dead[7], dead[3], live.GetMessageId()}; !slices.Equal(claimed, want) {
		t.Errorf("claimed %v after the redrive, want %v", claimed, want)
	}
	if s := h.stats(t, "q"); s != "ready=0 delayed=0 in_flight=3 dead=10" {
		t.Fatalf("stats %s", s)
	}

	// Purge in bounded steps, oldest first.
	pr, err := h.queues.PurgeDeadLetters(ctx(t), &coordv1.PurgeDeadLettersRequest{Queue: "q", MaxMessages: 4})
	if err != nil || pr.GetPurged() != 4 || pr.GetRemaining() != 6 {
		t.Fatalf("Purge(4) = %v, %v; want 4 purged, 6 left", pr, err)
	}
	if got, want := deadIDsOf(h.listAll(t, "q", 50)), []string{dead[5], dead[6], dead[8], dead[9], dead[10], dead[11]}; !slices.Equal(got, want) {
		t.Errorf("after purging 4: %v, want %v", got, want)
	}
	pr, err = h.queues.PurgeDeadLetters(ctx(t), &coordv1.PurgeDeadLettersRequest{Queue: "q"})
	if err != nil || pr.GetPurged() != 6 || pr.GetRemaining() != 0 {
		t.Fatalf("Purge() = %v, %v; want 6 purged, none left", pr, err)
	}
	if s := h.stats(t, "q"); s != "ready=0 delayed=0 in_flight=3 dead=0" {
		t.Fatalf("stats after the purge: %s", s)
	}
	if got := counterValue(t, reg, "coordd_queue_operations_total", "op", "purged"); got != 10 {
		t.Errorf("purged counter %v, want 10", got)
	}
	if got := counterValue(t, reg, "coordd_queue_operations_total", "op", "redriven"); got != 2 {
		t.Errorf("redriven counter %v, want 2", got)
	}
}

// TestQueueDeadLettersPartitioned: on a queue of 3 partitions, listing
// pages through every partition (each dead letter once), redrive by ID
// finds a message in whichever partition holds it, and purging goes on
// until none remain anywhere.
func TestQueueDeadLettersPartitioned(t *testing.T) {
	h := newHarness(t, withPartitions(3))
	var dead []string
	for i := range 30 {
		e := h.enqueue(t, &coordv1.EnqueueRequest{Queue: "parts", Payload: fmt.Appendf(nil, "%d", i), MaxAttempts: 1, Group: fmt.Sprint("g", i)})
		dead = append(dead, e.GetMessageId())
	}
	for n := 0; n < 30; {
		got := h.claim(t, &coordv1.ClaimRequest{Queue: "parts", MaxMessages: 10})
		if len(got) == 0 {
			t.Fatalf("claimed %d of 30", n)
		}
		for _, m := range got {
			if _, err := h.queues.Nack(ctx(t), &coordv1.NackRequest{Queue: "parts", Receipt: m.GetReceipt(), Delay: dur(0)}); err != nil {
				t.Fatal(err)
			}
		}
		n += len(got)
	}
	for _, size := range []int32{1, 7, 10, 30} {
		got := deadIDsOf(h.listAll(t, "parts", size))
		if len(got) != 30 || !sameSet(got, dead) {
			t.Fatalf("pages of %d: %d dead letters, want the 30, each once", size, len(got))
		}
	}
	rd, err := h.queues.Redrive(ctx(t), &coordv1.RedriveRequest{Queue: "parts", MessageIds: dead[:10]})
	if err != nil || rd.GetMoved() != 10 {
		t.Fatalf("Redrive by ID = %v, %v; want 10 moved", rd, err)
	}
	if s := h.stats(t, "parts"); s != "ready=10 delayed=0 in_flight=0 dead=20" {
		t.Fatalf("stats %s", s)
	}
	var purged int64
	for range 10 {
		pr, err := h.queues.PurgeDeadLetters(ctx(t), &coordv1.PurgeDeadLettersRequest{Queue: "parts", MaxMessages: 3})
		if err != nil || pr.GetPurged() > 3 {
			t.Fatalf("Purge(3) = %v, %v", pr, err)
		}
		purged += pr.GetPurged()
		if pr.GetRemaining() != 20-purged {
			t.Fatalf("Purge: remaining %d after %d purged, want %d", pr.GetRemaining(), purged, 20-purged)
		}
		if pr.GetRemaining() == 0 {
			break
		}
	}
	if s := h.stats(t, "parts"); purged != 20 || s != "ready=10 delayed=0 in_flight=0 dead=0" {
		t.Fatalf("purged %d, stats %s; want 20 and no dead letters", purged, s)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
