package redis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// TestQueueMetaVersioned checks that a queue's meta records (in the meta
// hash, and at the head of a dead letter) carry their version, and that a
// script that meets one of another version, or of none (the format before
// it), fails with errCorrupt naming the script, having changed nothing,
// where it would otherwise misread it.
func TestQueueMetaVersioned(t *testing.T) {
	s, c, _ := rgStandalone(t, redistest.Standalone(t), nil, Config{})
	ctx := t.Context()
	const q = "ns:q"
	k := s.keys.queue(q)
	meta, deadmsg, ready := k[5], k[6], k[10]
	id := token.New()
	if _, err := s.Enqueue(ctx, q, store.NewMessage{ID: id, Payload: []byte("p"), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	rec, err := c.HGet(ctx, meta, id).Result()
	if err != nil || !strings.HasPrefix(rec, "v2|") {
		t.Fatalf("meta record %q, %v: want version v2", rec, err)
	}
	claim := func() (store.Claimed, error) {
		return s.Claim(ctx, q, store.Claim{Tokens: []string{token.New()}, Visibility: time.Minute})
	}
	wantCorrupt := func(op, script string, err error) {
		t.Helper()
		if !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), script) {
			t.Errorf("%s: %v, want errCorrupt naming %s", op, err, script)
		}
	}
	for _, bad := range []string{strings.TrimPrefix(rec, "v2|"), "v3|" + strings.TrimPrefix(rec, "v2|"), "v2|x", ""} {
		c.HSet(ctx, meta, id, bad)
		_, err := claim()
		wantCorrupt("Claim over meta "+bad, "queue_claim", err)
		if got := c.HGet(ctx, meta, id).Val(); got != bad {
			t.Errorf("Claim over meta %q left it %q", bad, got)
		}
		if n := c.ZCard(ctx, ready).Val(); n != 1 {
			t.Errorf("Claim over meta %q left %d messages ready, want 1", bad, n)
		}
	}
	// A record of version v1 (before priorities and groups) still reads,
	// as priority 0 and no group.
	v1 := "v1|" + strings.Replace(strings.TrimPrefix(rec, "v2|"), "|0|0|", "|", 1)
	if v1 == "v1|"+strings.TrimPrefix(rec, "v2|") {
		t.Fatalf("meta record %q: want priority 0 and no group", rec)
	}
	c.HSet(ctx, meta, id, v1)
	cl, err := claim()
	if err != nil || len(cl.Messages) != 1 || cl.Messages[0].Attempt != 1 {
		t.Fatalf("Claim over the v1 meta: %+v, %v, want the message on its first attempt", cl, err)
	}
	receipt := cl.Messages[0].Receipt
	claimedRec := c.HGet(ctx, meta, id).Val()
	if !strings.HasPrefix(claimedRec, "v2|") {
		t.Errorf("meta record after a claim over a v1 record: %q, want it rewritten as v2", claimedRec)
	}
	c.HSet(ctx, meta, id, strings.TrimPrefix(claimedRec, "v2|"))
	_, err = s.Ack(ctx, q, []string{receipt})
	wantCorrupt("Ack over an unversioned meta", "queue_ack", err)
	c.HSet(ctx, meta, id, claimedRec)

	// Dead (its one attempt nacked), its meta moves into its dead letter.
	if n, err := s.Nack(ctx, q, receipt, 0); err != nil || !n.Dead {
		t.Fatalf("Nack: %+v, %v, want dead", n, err)
	}
	dead, err := c.HGet(ctx, deadmsg, id).Result()
	if err != nil || !strings.HasPrefix(dead, "v2|") {
		t.Fatalf("dead letter %q, %v: want its meta of version v2 first", dead, err)
	}
	for _, bad := range []string{strings.TrimPrefix(dead, "v2|"), "v2|" + strings.ReplaceAll(dead, "\n", "")} {
		c.HSet(ctx, deadmsg, id, bad)
		_, err := s.Redrive(ctx, q, 10)
		wantCorrupt("Redrive over dead letter "+bad, "queue_redrive", err)
		if st, err := s.Stats(ctx, q); err != nil || st != (store.QueueStats{Dead: 1}) {
			t.Errorf("Redrive over dead letter %q: stats %+v, %v, want the dead letter still there", bad, st, err)
		}
	}
	c.HSet(ctx, deadmsg, id, dead)
	if n, err := s.Redrive(ctx, q, 10); err != nil || n != 1 {
		t.Fatalf("Redrive over the restored dead letter: %d, %v, want 1", n, err)
	}
	if cl, err := claim(); err != nil || len(cl.Messages) != 1 || string(cl.Messages[0].Payload) != "p" {
		t.Fatalf("Claim after the redrive: %+v, %v, want the message", cl, err)
	}
}

// TestListDeadReadsPreviewsOnly: ListDead reads a dead letter's preview
// record, never its whole payload: with the payload's record gone, a page
// still lists it with its preview and size; a dead letter that died before
// previews were kept (none) is read from its whole record; a redrive
// deletes the preview with the letter.
func TestListDeadReadsPreviewsOnly(t *testing.T) {
	s, c, _ := rgStandalone(t, redistest.Standalone(t), nil, Config{})
	ctx := t.Context()
	const q = "ns:q"
	k := s.keys.queue(q)
	deadmsg, deadprev := k[6], k[14]
	big := strings.Repeat("x", 256<<10)
	var ids []string
	for range 2 {
		id := token.New()
		ids = append(ids, id)
		if _, err := s.Enqueue(ctx, q, store.NewMessage{ID: id, Payload: []byte(big), MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		cl, err := s.Claim(ctx, q, store.Claim{Tokens: []string{token.New()}, Visibility: time.Minute})
		if err != nil || len(cl.Messages) != 1 {
			t.Fatalf("Claim: %v, %v", cl, err)
		}
		if _, err := s.Nack(ctx, q, cl.Messages[0].Receipt, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.HLen(ctx, deadprev).Val(); n != 2 {
		t.Fatalf("%d preview records, want 2", n)
	}
	if l := c.HStrLen(ctx, deadprev, ids[0]).Val(); l > 4096+200 {
		t.Fatalf("a preview record of %d bytes", l)
	}
	saved := c.HGet(ctx, deadmsg, ids[0]).Val()
	c.HDel(ctx, deadmsg, ids[0])  // the whole payload: ListDead must not need it
	c.HDel(ctx, deadprev, ids[1]) // as if it died before previews were kept
	page, err := s.ListDead(ctx, q, store.DeadPos{}, 10, 16)
	if err != nil || len(page) != 2 {
		t.Fatalf("ListDead = %v, %v", page, err)
	}
	for i, d := range page {
		if string(d.Preview) != strings.Repeat("x", 16) || d.Size != len(big) || d.ID != ids[i] {
			t.Errorf("dead letter %d: %q size %d id %s", i, d.Preview, d.Size, d.ID)
		}
	}
	c.HSet(ctx, deadmsg, ids[0], saved)
	if n, err := s.RedriveIDs(ctx, q, ids[:1]); err != nil || n != 1 {
		t.Fatalf("RedriveIDs = %d, %v", n, err)
	}
	if c.HExists(ctx, deadprev, ids[0]).Val() {
		t.Errorf("a redriven letter's preview is kept")
	}
}

// TestReplaceOfAHeadAdvancedBefore: a group's head that became ready at
// its turn while its meta kept its earlier deliver time (as before a
// head's turn was recorded) cannot be found in ready to be replaced: a
// replacing Enqueue then adds a new message instead of failing.
func TestReplaceOfAHeadAdvancedBefore(t *testing.T) {
	clk := clock.NewFake(time.Now())
	s, c, _ := rgStandalone(t, redistest.Standalone(t), clk, Config{})
	ctx := t.Context()
	const q = "ns:q"
	meta := s.keys.queue(q)[5]
	head, next := token.New(), token.New()
	for _, id := range []string{head, next} {
		if _, err := s.Enqueue(ctx, q, store.NewMessage{ID: id, Payload: []byte("p"), MaxAttempts: 3, Group: "g",
			DedupID: "d-" + id, DedupWindow: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := s.Claim(ctx, q, store.Claim{Tokens: []string{token.New()}, Visibility: time.Minute})
	if err != nil || len(cl.Messages) != 1 {
		t.Fatalf("Claim = %v, %v", cl, err)
	}
	clk.Advance(1234567 * time.Microsecond) // a turn in another microsecond of its millisecond
	if _, err := s.Ack(ctx, q, []string{cl.Messages[0].Receipt}); err != nil {
		t.Fatal(err)
	}
	// next is ready since its turn; put its meta back as the code before
	// recorded it: its deliver time is its enqueue time.
	rec := c.HGet(ctx, meta, next).Val()
	f := strings.SplitN(rec, "|", 7)
	f[4] = f[5]
	c.HSet(ctx, meta, next, strings.Join(f, "|"))
	e, err := s.Enqueue(ctx, q, store.NewMessage{ID: token.New(), Payload: []byte("v2"), MaxAttempts: 3, Group: "g",
		DedupID: "d-" + next, DedupWindow: time.Hour, Replace: true})
	if err != nil || e.Replaced || e.Duplicate || e.ID == next {
		t.Fatalf("replacing Enqueue = %+v, %v; want a new message", e, err)
	}
	if st, err := s.Stats(ctx, q); err != nil || st.Ready != 1 || st.Delayed != 1 {
		t.Fatalf("Stats = %+v, %v; want the old head ready and the new message behind it", st, err)
	}
}
