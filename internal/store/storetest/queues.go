package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

func queueTests() []test {
	return append([]test{
		{"EnqueueClaimAck", queueEnqueueClaimAck},
		{"Delayed", queueDelayed},
		{"DeliverTime", queueDeliverTime},
		{"ClaimOrder", queueClaimOrder},
		{"ClaimMax", queueClaimMax},
		{"VisibilityExpiry", queueVisibilityExpiry},
		{"ExpiredReceipt", queueExpiredReceipt},
		{"MaxAttemptsDead", queueMaxAttemptsDead},
		{"Redrive", queueRedrive},
		{"AckRejects", queueAckRejects},
		{"AckMany", queueAckMany},
		{"Nack", queueNack},
		{"ExtendClaim", queueExtendClaim},
		{"Dedup", queueDedup},
		{"DedupWindowInstant", queueDedupWindowInstant},
		{"DedupConcurrent", queueDedupConcurrent},
		{"Stats", queueStats},
		{"NextDue", queueNextDue},
		{"Payloads", queuePayloads},
		{"ConcurrentClaimers", queueConcurrentClaimers},
		{"EnqueueWakes", queueEnqueueWakes},
		{"UpkeepBatches", queueUpkeepBatches},
		{"ClaimOrderAcrossSources", queueClaimOrderAcrossSources},
		{"ClaimOrderManyDue", queueClaimOrderManyDue},
		{"StatsManyDue", queueStatsManyDue},
		{"DeadLetterTTL", queueDeadLetterTTL},
		{"SeqRestart", queueSeqRestart},
		{"RedriveAfterManyForgotten", queueRedriveAfterManyForgotten},
	}, slices.Concat(queueGroupTests(), deadLetterTests(), queueSettingsTests())...)
}

// msg is a new message with a fresh ID, 3 attempts and no delay.
func msg(payload string) store.NewMessage {
	return store.NewMessage{ID: token.New(), Payload: []byte(payload), MaxAttempts: 3}
}

func (e *env) enqueue(q string, m store.NewMessage) store.Enqueued {
	e.Helper()
	r, err := e.s.Enqueue(e.ctx, q, m)
	noErr(e, "Enqueue", err)
	return r
}

// claim claims up to n messages and checks what every claim must be: each
// message's receipt is MakeReceipt(ID, Attempt, the token of its position),
// parses back, and its claim ends at now + vis.
func (e *env) claim(q string, n int, vis time.Duration) store.Claimed {
	e.Helper()
	req := store.Claim{Tokens: make([]string, n), Visibility: vis}
	for i := range req.Tokens {
		req.Tokens[i] = token.New()
	}
	c, err := e.s.Claim(e.ctx, q, req)
	noErr(e, "Claim", err)
	if len(c.Messages) > n {
		e.Fatalf("Claim with %d tokens returned %d messages", n, len(c.Messages))
	}
	for i, m := range c.Messages {
		if want := store.MakeReceipt(m.ID, m.Attempt, req.Tokens[i]); m.Receipt != want {
			e.Errorf("message %d: receipt %q, want MakeReceipt(ID, %d, token %d) = %q", i, m.Receipt, m.Attempt, i, want)
		}
		if id, attempt, ok := store.ParseReceipt(m.Receipt); !ok || id != m.ID || attempt != m.Attempt {
			e.Errorf("message %d: ParseReceipt(%q) = %q, %d, %v; want %q, %d, true", i, m.Receipt, id, attempt, ok, m.ID, m.Attempt)
		}
		eqTime(e, fmt.Sprint("message ", i, " ExpireTime"), m.ExpireTime, e.now().Add(vis))
	}
	return c
}

// claimOne claims exactly one message.
func (e *env) claimOne(q string, vis time.Duration) store.Message {
	e.Helper()
	c := e.claim(q, 1, vis)
	if len(c.Messages) != 1 {
		e.Fatalf("Claim: %d messages, want 1", len(c.Messages))
	}
	return c.Messages[0]
}

// claimNone checks that nothing is claimable and that NextDue is nextDue.
func (e *env) claimNone(q string, nextDue time.Duration) {
	e.Helper()
	c := e.claim(q, 10, time.Minute)
	if len(c.Messages) != 0 {
		e.Errorf("Claim: %d messages (first %s attempt %d), want none", len(c.Messages), c.Messages[0].ID, c.Messages[0].Attempt)
	}
	eq(e, "NextDue", c.NextDue, nextDue)
}

func (e *env) ack(q, receipt string) {
	e.Helper()
	noErr(e, "Ack", e.ackErr(q, receipt))
}

func (e *env) wantStats(q string, want store.QueueStats) {
	e.Helper()
	got, err := e.s.Stats(e.ctx, q)
	noErr(e, "Stats", err)
	if got != want {
		e.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// wantMessage checks a claimed message (the receipt is checked by claim).
func (e *env) wantMessage(what string, got store.Message, m store.NewMessage, attempt int, enqueued, deliver time.Time) {
	e.Helper()
	if got.ID != m.ID || string(got.Payload) != string(m.Payload) || got.Attempt != attempt || got.MaxAttempts != m.MaxAttempts ||
		!got.EnqueueTime.Equal(enqueued) || !got.DeliverTime.Equal(deliver) {
		e.Errorf("%s: message {ID:%s Payload:%q Attempt:%d MaxAttempts:%d EnqueueTime:%v DeliverTime:%v},\nwant {ID:%s Payload:%q Attempt:%d MaxAttempts:%d EnqueueTime:%v DeliverTime:%v}",
			what, got.ID, got.Payload, got.Attempt, got.MaxAttempts, got.EnqueueTime, got.DeliverTime,
			m.ID, m.Payload, attempt, m.MaxAttempts, enqueued, deliver)
	}
}

func (e *env) wantIDs(what string, got []store.Message, want ...store.NewMessage) {
	e.Helper()
	var g, w []string
	for _, m := range got {
		g = append(g, m.ID)
	}
	for _, m := range want {
		w = append(w, m.ID)
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		e.Errorf("%s: claimed %v, want %v in this order", what, g, w)
	}
}

func (e *env) wantReceiptExpired(q, receipt, what string) {
	e.Helper()
	isErr(e, what+": Ack", e.ackErr(q, receipt), store.ErrReceiptExpired)
	_, err := e.s.Nack(e.ctx, q, receipt, 0)
	isErr(e, what+": Nack", err, store.ErrReceiptExpired)
	_, err = e.s.ExtendClaim(e.ctx, q, receipt, time.Minute)
	isErr(e, what+": ExtendClaim", err, store.ErrReceiptExpired)
}

func queueEnqueueClaimAck(e *env) {
	q := e.name("q")
	t0 := e.now()
	m := msg("hello")
	r := e.enqueue(q, m)
	if r.ID != m.ID || !r.DeliverTime.Equal(t0) || r.Duplicate {
		e.Errorf("Enqueue = %+v, want {ID:%s DeliverTime:%v Duplicate:false}", r, m.ID, t0)
	}
	e.wantStats(q, store.QueueStats{Ready: 1})
	e.advance(time.Second)
	c := e.claim(q, 1, 30*time.Second)
	if len(c.Messages) != 1 {
		e.Fatalf("Claim: %d messages, want 1", len(c.Messages))
	}
	e.wantMessage("claimed", c.Messages[0], m, 1, t0, t0)
	eq(e, "NextDue", c.NextDue, 30*time.Second) // the claim's expiry
	e.wantStats(q, store.QueueStats{InFlight: 1})
	e.ack(q, c.Messages[0].Receipt)
	e.wantStats(q, store.QueueStats{})
	e.claimNone(q, 0)
}

func queueDelayed(e *env) {
	q := e.name("q")
	t0 := e.now()
	m := msg("later")
	m.Delay = 10 * time.Second
	r := e.enqueue(q, m)
	eqTime(e, "Enqueue DeliverTime", r.DeliverTime, t0.Add(10*time.Second))
	e.wantStats(q, store.QueueStats{Delayed: 1})
	e.advance(10*time.Second - us)
	e.claimNone(q, us)
	e.wantStats(q, store.QueueStats{Delayed: 1})
	e.advance(us) // claimable at its deliver time
	e.wantStats(q, store.QueueStats{Ready: 1})
	e.wantMessage("claimed", e.claimOne(q, time.Minute), m, 1, t0, t0.Add(10*time.Second))
}

func queueDeliverTime(e *env) {
	q := e.name("q")
	t0 := e.now()
	future := msg("future")
	future.DeliverTime, future.Delay = t0.Add(5*time.Second), time.Hour // DeliverTime wins
	eqTime(e, "future DeliverTime", e.enqueue(q, future).DeliverTime, t0.Add(5*time.Second))
	past := msg("past")
	past.DeliverTime = t0.Add(-time.Hour) // means now
	eqTime(e, "past DeliverTime", e.enqueue(q, past).DeliverTime, t0)
	e.wantStats(q, store.QueueStats{Ready: 1, Delayed: 1})
	e.wantMessage("past", e.claimOne(q, time.Minute), past, 1, t0, t0)
	e.claimNone(q, 5*time.Second)
	e.advance(5 * time.Second)
	e.wantMessage("future", e.claimOne(q, time.Minute), future, 1, t0, t0.Add(5*time.Second))
}

func queueClaimOrder(e *env) {
	q := e.name("q")
	var ready []store.NewMessage
	for i := range 5 {
		m := msg(fmt.Sprint("r", i))
		e.enqueue(q, m)
		ready = append(ready, m)
	}
	c := e.claim(q, 10, time.Minute)
	e.wantIDs("ready at one instant", c.Messages, ready...)
	for _, m := range c.Messages {
		e.ack(q, m.Receipt)
	}

	// Delayed messages become ready in deliver-time order.
	d1, d2, d3 := msg("d1"), msg("d2"), msg("d3")
	d1.Delay, d2.Delay, d3.Delay = 3*time.Second, time.Second, 2*time.Second
	e.enqueue(q, d1)
	e.enqueue(q, d2)
	e.enqueue(q, d3)
	e.advance(5 * time.Second)
	c = e.claim(q, 10, time.Minute)
	e.wantIDs("delayed", c.Messages, d2, d3, d1)
	for _, m := range c.Messages {
		e.ack(q, m.Receipt)
	}

	// A message due earlier is ready before one enqueued after its due time.
	x, y := msg("x"), msg("y")
	x.Delay = time.Second
	e.enqueue(q, x)
	e.advance(2 * time.Second)
	e.enqueue(q, y)
	c = e.claim(q, 10, time.Minute)
	e.wantIDs("due, then enqueued", c.Messages, x, y)
	for _, m := range c.Messages {
		e.ack(q, m.Receipt)
	}

	// A message whose claim expired is ready again from its claim's deadline.
	a, b := msg("a"), msg("b")
	e.enqueue(q, a)
	e.claimOne(q, 10*time.Second)
	e.advance(5 * time.Second)
	e.enqueue(q, b)
	e.advance(10 * time.Second)
	c = e.claim(q, 10, time.Minute)
	e.wantIDs("enqueued, then claim expired", c.Messages, b, a)
}

func queueClaimMax(e *env) {
	q := e.name("q")
	var ms []store.NewMessage
	for i := range 5 {
		m := msg(fmt.Sprint(i))
		e.enqueue(q, m)
		ms = append(ms, m)
	}
	e.wantIDs("first claim of 3", e.claim(q, 3, time.Minute).Messages, ms[:3]...)
	e.wantIDs("second claim of 3", e.claim(q, 3, time.Minute).Messages, ms[3:]...)
	e.claimNone(q, time.Minute)
	e.wantStats(q, store.QueueStats{InFlight: 5})
}

func queueVisibilityExpiry(e *env) {
	q := e.name("q")
	t0 := e.now()
	m := msg("m")
	e.enqueue(q, m)
	c1 := e.claimOne(q, 10*time.Second)
	e.advance(10*time.Second - us)
	e.claimNone(q, us)
	e.wantStats(q, store.QueueStats{InFlight: 1})
	e.advance(us) // the claim ends at its deadline
	c2 := e.claimOne(q, 10*time.Second)
	e.wantMessage("redelivered", c2, m, 2, t0, t0)
	if c2.Receipt == c1.Receipt {
		e.Error("redelivery has the same receipt")
	}
	e.wantReceiptExpired(q, c1.Receipt, "receipt of the first claim")
	e.wantStats(q, store.QueueStats{InFlight: 1})
	e.ack(q, c2.Receipt)
	e.wantStats(q, store.QueueStats{})
}

func queueExpiredReceipt(e *env) {
	q := e.name("q")
	e.enqueue(q, msg("m"))
	c := e.claimOne(q, 10*time.Second)
	e.advance(10 * time.Second)
	e.wantReceiptExpired(q, c.Receipt, "expired, not yet claimed again")
	e.wantStats(q, store.QueueStats{Ready: 1})
	if m := e.claimOne(q, time.Minute); m.Attempt != 2 {
		e.Errorf("attempt after expiry = %d, want 2", m.Attempt)
	}
}

func queueMaxAttemptsDead(e *env) {
	q := e.name("q")
	m := msg("m")
	m.MaxAttempts = 2
	e.enqueue(q, m)
	for attempt := 1; attempt <= 2; attempt++ {
		if got := e.claimOne(q, 10*time.Second); got.Attempt != attempt || got.MaxAttempts != 2 {
			e.Errorf("claim %d: attempt %d of %d, want %d of 2", attempt, got.Attempt, got.MaxAttempts, attempt)
		}
		e.advance(10 * time.Second)
	}
	e.wantStats(q, store.QueueStats{Dead: 1})
	e.claimNone(q, 0)
}

func queueRedrive(e *env) {
	q := e.name("q")
	var ms []store.NewMessage
	var first []store.Message
	for i := range 3 {
		m := msg(fmt.Sprint("m", i))
		m.MaxAttempts = 1
		e.enqueue(q, m)
		ms = append(ms, m)
	}
	// They die in enqueue order, one second apart.
	for range 3 {
		first = append(first, e.claimOne(q, 10*time.Second))
		e.advance(time.Second)
	}
	e.advance(7 * time.Second) // the first claim ends
	for i := range 3 {
		if i > 0 {
			e.advance(time.Second)
		}
		e.wantStats(q, store.QueueStats{InFlight: int64(2 - i), Dead: int64(i + 1)})
	}
	e.wantReceiptExpired(q, first[0].Receipt, "receipt of a dead message")
	sub := e.subscribe(store.QueueTopic(q))
	drain(sub)
	n, err := e.s.Redrive(e.ctx, q, 2)
	noErr(e, "Redrive", err)
	eq(e, "Redrive(2)", n, 2)
	e.wantWake(sub, "QueueTopic after Redrive")
	e.wantStats(q, store.QueueStats{Ready: 2, Dead: 1})
	c := e.claim(q, 10, time.Minute)
	e.wantIDs("redriven, oldest first", c.Messages, ms[0], ms[1])
	for _, m := range c.Messages {
		eq(e, "attempt after Redrive", m.Attempt, 1)
	}
	// The first claim's receipt had attempt 1 as well, but another token.
	e.wantReceiptExpired(q, first[0].Receipt, "receipt of the claim before death")
	e.ack(q, c.Messages[0].Receipt)
	n, err = e.s.Redrive(e.ctx, q, 10)
	noErr(e, "Redrive", err)
	eq(e, "Redrive(10)", n, 1)
	e.wantIDs("second redrive", e.claim(q, 10, time.Minute).Messages, ms[2])
	n, err = e.s.Redrive(e.ctx, q, 10)
	noErr(e, "Redrive", err)
	eq(e, "Redrive with no dead messages", n, 0)
}

func queueAckRejects(e *env) {
	q := e.name("q")
	m := msg("m")
	e.enqueue(q, m)
	c := e.claimOne(q, time.Minute)
	forged := store.MakeReceipt(c.ID, c.Attempt, token.New())
	e.wantReceiptExpired(q, forged, "receipt with the right ID and attempt and another token")
	e.wantReceiptExpired(q, store.MakeReceipt(token.New(), 1, token.New()), "receipt of an unknown message")
	e.wantReceiptExpired(q, "not a receipt", "malformed receipt")
	e.wantReceiptExpired(q, "", "empty receipt")
	e.wantReceiptExpired(e.name("other"), c.Receipt, "receipt on another queue")
	e.wantStats(q, store.QueueStats{InFlight: 1})
	e.ack(q, c.Receipt)
	isErr(e, "second Ack", e.ackErr(q, c.Receipt), store.ErrReceiptExpired)
	e.wantReceiptExpired(q, c.Receipt, "acked")
	e.wantStats(q, store.QueueStats{})
}

func queueNack(e *env) {
	q := e.name("q")
	m := msg("m")
	e.enqueue(q, m)
	r1 := e.claimOne(q, time.Minute).Receipt
	t1 := e.now()
	nk, err := e.s.Nack(e.ctx, q, r1, 5*time.Second)
	noErr(e, "Nack", err)
	if nk.Dead || !nk.DeliverTime.Equal(t1.Add(5*time.Second)) {
		e.Errorf("Nack with 5s = %+v, want DeliverTime %v", nk, t1.Add(5*time.Second))
	}
	e.wantStats(q, store.QueueStats{Delayed: 1})
	e.wantReceiptExpired(q, r1, "nacked")
	e.advance(5*time.Second - us)
	e.claimNone(q, us)
	e.advance(us)
	r2 := e.claimOne(q, time.Minute)
	eq(e, "attempt after Nack", r2.Attempt, 2)

	sub := e.subscribe(store.QueueTopic(q))
	drain(sub)
	nk, err = e.s.Nack(e.ctx, q, r2.Receipt, 0)
	noErr(e, "Nack", err)
	if nk.Dead || !nk.DeliverTime.Equal(e.now()) {
		e.Errorf("Nack with 0 = %+v, want DeliverTime %v", nk, e.now())
	}
	e.wantWake(sub, "QueueTopic after Nack with 0")
	e.wantStats(q, store.QueueStats{Ready: 1})
	r3 := e.claimOne(q, time.Minute)
	eq(e, "attempt after second Nack", r3.Attempt, 3)
	nk, err = e.s.Nack(e.ctx, q, r3.Receipt, 5*time.Second)
	noErr(e, "Nack", err)
	if !nk.Dead || !nk.DeliverTime.IsZero() {
		e.Errorf("Nack at max attempts = %+v, want Dead and no DeliverTime", nk)
	}
	e.wantStats(q, store.QueueStats{Dead: 1})
	e.claimNone(q, 0)
}

func queueExtendClaim(e *env) {
	q := e.name("q")
	t0 := e.now()
	e.enqueue(q, msg("m"))
	c := e.claimOne(q, 10*time.Second)
	e.advance(8 * time.Second)
	exp, err := e.s.ExtendClaim(e.ctx, q, c.Receipt, 10*time.Second)
	noErr(e, "ExtendClaim", err)
	eqTime(e, "ExtendClaim", exp, t0.Add(18*time.Second))
	e.advance(2 * time.Second) // the first deadline
	e.claimNone(q, 8*time.Second)
	e.wantStats(q, store.QueueStats{InFlight: 1})
	e.advance(8*time.Second - us)
	e.claimNone(q, us)
	e.advance(us)
	eq(e, "attempt after the extended claim expired", e.claimOne(q, time.Minute).Attempt, 2)
	e.wantReceiptExpired(q, c.Receipt, "extended, then expired")
}

func queueDedup(e *env) {
	q := e.name("q")
	t0 := e.now()
	first := msg("one")
	first.DedupID, first.DedupWindow, first.Delay = "order-1", time.Minute, 5*time.Second
	r := e.enqueue(q, first)
	if r.ID != first.ID || r.Duplicate || !r.DeliverTime.Equal(t0.Add(5*time.Second)) {
		e.Errorf("first Enqueue = %+v", r)
	}
	want := store.Enqueued{ID: first.ID, DeliverTime: t0.Add(5 * time.Second), Duplicate: true}
	dup := func(what string, payload string) {
		e.Helper()
		m := msg(payload)
		m.DedupID, m.DedupWindow = "order-1", time.Minute
		r := e.enqueue(q, m)
		if r.ID != want.ID || !r.Duplicate || !r.DeliverTime.Equal(want.DeliverTime) {
			e.Errorf("%s: Enqueue = %+v, want %+v", what, r, want)
		}
	}
	e.advance(10 * time.Second)
	dup("repeat within the window", "two")
	e.wantStats(q, store.QueueStats{Ready: 1})
	c := e.claimOne(q, time.Minute)
	eq(e, "payload", string(c.Payload), "one")
	e.ack(q, c.Receipt)
	e.advance(50*time.Second - us)
	dup("repeat after the ack, 1µs before the window ends", "three")
	e.wantStats(q, store.QueueStats{})

	other := msg("elsewhere")
	other.DedupID, other.DedupWindow = "order-1", time.Minute
	if r := e.enqueue(e.name("q2"), other); r.ID != other.ID || r.Duplicate {
		e.Errorf("same DedupID on another queue: %+v, want a new message", r)
	}

	e.advance(2 * us) // the window is from the first Enqueue; repeats do not extend it
	late := msg("late")
	late.DedupID, late.DedupWindow = "order-1", time.Minute
	if r := e.enqueue(q, late); r.ID != late.ID || r.Duplicate || !r.DeliverTime.Equal(e.now()) {
		e.Errorf("after the window: Enqueue = %+v, want a new message", r)
	}
	e.wantStats(q, store.QueueStats{Ready: 1})
}

// queueDedupWindowInstant checks that the window ends at enqueue time +
// DedupWindow, the first instant outside it (as a lock's deadline is).
func queueDedupWindowInstant(e *env) {
	q := e.name("q")
	first := msg("one")
	first.DedupID, first.DedupWindow = "d", time.Minute
	e.enqueue(q, first)
	e.advance(time.Minute)
	again := msg("two")
	again.DedupID, again.DedupWindow = "d", time.Minute
	if r := e.enqueue(q, again); r.ID != again.ID || r.Duplicate {
		e.Errorf("Enqueue at the end of the window = %+v, want a new message", r)
	}
	e.wantStats(q, store.QueueStats{Ready: 2})
}

func queueDedupConcurrent(e *env) {
	q := e.name("q")
	const workers = 20
	res := make([]store.Enqueued, workers)
	errs := make([]error, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		m := msg(fmt.Sprint(i))
		m.DedupID, m.DedupWindow = "same", time.Minute
		wg.Go(func() {
			<-start
			res[i], errs[i] = e.s.Enqueue(e.ctx, q, m)
		})
	}
	close(start)
	wg.Wait()
	firsts := 0
	for i, r := range res {
		noErr(e, "Enqueue", errs[i])
		if !r.Duplicate {
			firsts++
		}
		if r.ID != res[0].ID {
			e.Errorf("enqueue %d: ID %s, enqueue 0: %s", i, r.ID, res[0].ID)
		}
	}
	eq(e, "non-duplicates", firsts, 1)
	e.wantStats(q, store.QueueStats{Ready: 1})
}

func queueStats(e *env) {
	q := e.name("q")
	dead := msg("dead")
	dead.MaxAttempts = 1
	e.enqueue(q, dead)
	e.claimOne(q, 5*time.Second)
	e.advance(5 * time.Second)
	e.wantStats(q, store.QueueStats{Dead: 1})
	e.enqueue(q, msg("in flight"))
	e.claimOne(q, time.Minute)
	e.enqueue(q, msg("ready 1"))
	e.enqueue(q, msg("ready 2"))
	for i := range 3 {
		m := msg(fmt.Sprint("delayed ", i))
		m.Delay = time.Duration(i+1) * time.Hour
		e.enqueue(q, m)
	}
	e.wantStats(q, store.QueueStats{Ready: 2, Delayed: 3, InFlight: 1, Dead: 1})
	e.wantStats(e.name("empty"), store.QueueStats{})
}

func queueNextDue(e *env) {
	q := e.name("q")
	e.claimNone(q, 0)
	a, b := msg("a"), msg("b")
	b.Delay = 10 * time.Second
	e.enqueue(q, a)
	e.enqueue(q, b)
	ca := e.claim(q, 1, 30*time.Second)
	eq(e, "NextDue: b due before a's claim expires", ca.NextDue, 10*time.Second)
	e.advance(10 * time.Second)
	cb := e.claim(q, 1, 30*time.Second)
	eq(e, "NextDue: a's claim expires before b's", cb.NextDue, 20*time.Second)
	e.ack(q, ca.Messages[0].Receipt)
	e.claimNone(q, 30*time.Second)
	e.ack(q, cb.Messages[0].Receipt)
	e.claimNone(q, 0)
}

func queuePayloads(e *env) {
	q := e.name("q")
	big := make([]byte, 64<<10)
	rng := newRand(9)
	for i := range big {
		big[i] = byte(rng.IntN(256))
	}
	payloads := map[string][]byte{
		"nil":      nil,
		"empty":    {},
		"text":     []byte("hello, world"),
		"binary":   binaryResult,
		"nul":      {0, 0, 0},
		"not utf8": {0xff, 0xfe, 0xc3, 0x28, '\n', '"', '\\'},
		"64KiB":    big,
	}
	ids := map[string]string{}
	for name, p := range payloads {
		m := store.NewMessage{ID: token.New(), Payload: p, MaxAttempts: 1}
		e.enqueue(q, m)
		ids[m.ID] = name
	}
	c := e.claim(q, len(payloads)+1, time.Minute)
	eq(e, "claimed", len(c.Messages), len(payloads))
	for _, m := range c.Messages {
		name := ids[m.ID]
		eqBytes(e, "payload "+name, m.Payload, payloads[name])
	}
}

func queueConcurrentClaimers(e *env) {
	q := e.name("q")
	const total, workers = 2000, 10
	want := map[string]bool{}
	for i := range total {
		m := msg(fmt.Sprint(i))
		e.enqueue(q, m)
		want[m.ID] = true
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				req := store.Claim{Tokens: make([]string, 1+rand.IntN(9)), Visibility: time.Hour}
				for i := range req.Tokens {
					req.Tokens[i] = token.New()
				}
				c, err := e.s.Claim(e.ctx, q, req)
				if err != nil {
					e.Errorf("Claim: %v", err)
					return
				}
				if len(c.Messages) == 0 {
					return // the clock stands still: nothing can come back
				}
				for _, m := range c.Messages {
					mu.Lock()
					seen[m.ID]++
					mu.Unlock()
					if m.Attempt != 1 {
						e.Errorf("message %s: attempt %d", m.ID, m.Attempt)
					}
					if err := e.ackErr(q, m.Receipt); err != nil {
						e.Errorf("Ack: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	eq(e, "distinct messages claimed", len(seen), total)
	for id, n := range seen {
		if !want[id] {
			e.Errorf("claimed unknown message %s", id)
		}
		if n != 1 {
			e.Errorf("message %s claimed %d times", id, n)
		}
	}
	e.wantStats(q, store.QueueStats{})
}

func queueEnqueueWakes(e *env) {
	q := e.name("q")
	sub := e.subscribe(store.QueueTopic(q))
	drain(sub)
	e.enqueue(q, msg("m"))
	e.wantWake(sub, "QueueTopic after Enqueue")
}

// queueUpkeepBatches makes more messages due at once than one upkeep may
// move, and checks that claims still get all of them, in order.
func queueUpkeepBatches(e *env) {
	q := e.name("q")
	const n = store.UpkeepBatch + 500
	var ids []string
	for i := range n {
		m := msg(fmt.Sprint(i))
		m.Delay = time.Second + time.Duration(i)*us
		e.enqueue(q, m)
		ids = append(ids, m.ID)
	}
	e.advance(2 * time.Second)
	var got []string
	for len(got) < n {
		c := e.claim(q, 100, time.Hour)
		if len(c.Messages) == 0 {
			e.Fatalf("claimed %d of %d due messages, then none", len(got), n)
		}
		for _, m := range c.Messages {
			got = append(got, m.ID)
		}
	}
	for i := range ids {
		if got[i] != ids[i] {
			e.Fatalf("claim %d: message %s, want %s (deliver-time order)", i, got[i], ids[i])
		}
	}
	e.wantStats(q, store.QueueStats{InFlight: n})
}

// ackErr acks one receipt: ErrReceiptExpired if its claim was not live.
func (e *env) ackErr(q, receipt string) error {
	acked, err := e.s.Ack(e.ctx, q, []string{receipt})
	if err == nil && (len(acked) != 1 || !acked[0]) {
		err = store.ErrReceiptExpired
	}
	return err
}

// queueAckMany: one Ack takes several receipts; each answer is its own, and
// the live ones are acked whatever the others are.
func queueAckMany(e *env) {
	q := e.name("q")
	for i := 0; i < 4; i++ {
		e.enqueue(q, store.NewMessage{ID: token.New(), Payload: []byte{byte(i)}, MaxAttempts: 3})
	}
	c := e.claim(q, 4, time.Minute)
	if len(c.Messages) != 4 {
		e.Fatalf("claimed %d, want 4", len(c.Messages))
	}
	stale := c.Messages[3].Receipt
	noErr(e, "first ack", e.ackErr(q, stale))
	receipts := []string{c.Messages[0].Receipt, stale, c.Messages[1].Receipt, store.MakeReceipt(token.New(), 1, token.New()), c.Messages[2].Receipt}
	acked, err := e.s.Ack(e.ctx, q, receipts)
	noErr(e, "Ack of five", err)
	if want := []bool{true, false, true, false, true}; fmt.Sprint(acked) != fmt.Sprint(want) {
		e.Fatalf("Ack of five = %v, want %v", acked, want)
	}
	e.wantStats(q, store.QueueStats{})
}

// queueClaimOrderAcrossSources: messages are served in the order they
// became due, whether they became due by their deliver time, a Nack's
// delay or the expiry of a claim, not grouped by how they became due.
func queueClaimOrderAcrossSources(e *env) {
	q := e.name("q")
	a, d, n, b, c := msg("a"), msg("d"), msg("n"), msg("b"), msg("c")
	e.enqueue(q, a)
	e.claimOne(q, 10*time.Second) // a: due again at +10s
	e.enqueue(q, d)
	e.claimOne(q, 20*time.Second) // d: at +20s
	e.enqueue(q, n)
	_, err := e.s.Nack(e.ctx, q, e.claimOne(q, time.Minute).Receipt, time.Second) // n: at +1s
	noErr(e, "Nack", err)
	b.Delay, c.Delay = 15*time.Second, 5*time.Second // b: at +15s, c: at +5s
	e.enqueue(q, b)
	e.enqueue(q, c)
	e.advance(25 * time.Second)
	e.wantIDs("by due time", e.claim(q, 10, time.Minute).Messages, n, c, a, b, d)
}

// queueClaimOrderManyDue makes more messages due than one upkeep moves,
// expired claims and delayed messages interleaved in due time, and checks
// that they are served in due-time order (ties: enqueue order).
func queueClaimOrderManyDue(e *env) {
	q := e.name("q")
	type due struct {
		at  time.Time
		ord int
		id  string
	}
	var want []due
	ord := 0
	t0 := e.now()
	// Groups of 100 claims whose deadlines are 2µs apart, from +10s on, and
	// between them delayed messages due 1µs after each group.
	const groups = store.UpkeepBatch/100 + 3
	for g := range groups {
		var ms []store.NewMessage
		for i := range 100 {
			m := msg(fmt.Sprint("claim ", g, " ", i))
			e.enqueue(q, m)
			ms = append(ms, m)
			ord++
		}
		c := e.claim(q, 100, t0.Add(10*time.Second+time.Duration(2*g)*us).Sub(e.now()))
		e.wantIDs(fmt.Sprint("group ", g), c.Messages, ms...)
		for i, m := range ms {
			want = append(want, due{c.Messages[i].ExpireTime, ord - 100 + i, m.ID})
		}
		m := msg(fmt.Sprint("delayed ", g))
		m.DeliverTime = t0.Add(10*time.Second + time.Duration(2*g+1)*us)
		e.enqueue(q, m)
		want = append(want, due{m.DeliverTime, ord, m.ID})
		ord++
		e.advance(us)
	}
	sort.Slice(want, func(i, j int) bool {
		if !want[i].at.Equal(want[j].at) {
			return want[i].at.Before(want[j].at)
		}
		return want[i].ord < want[j].ord
	})
	e.advance(time.Minute)
	var got []string
	for len(got) < len(want) {
		c := e.claim(q, 100, time.Hour)
		if len(c.Messages) == 0 {
			e.Fatalf("claimed %d of %d due messages, then none", len(got), len(want))
		}
		for _, m := range c.Messages {
			got = append(got, m.ID)
		}
	}
	for i := range want {
		if got[i] != want[i].id {
			e.Fatalf("claim %d: message %s, want %s (due at %v)", i, got[i], want[i].id, want[i].at)
		}
	}
}

// queueStatsManyDue: Stats counts exactly right after more messages came
// due than one upkeep moves, of every kind: delayed messages that became
// ready, claims that expired with attempts left (ready) or on their last
// attempt (dead), and dead letters that reached their ttl (gone).
func queueStatsManyDue(e *env) {
	q := e.name("q")
	const n = store.UpkeepBatch + 200
	for i := range n {
		m := msg(fmt.Sprint("delayed ", i))
		m.Delay = time.Second
		e.enqueue(q, m)
	}
	e.wantStats(q, store.QueueStats{Delayed: n})
	e.advance(time.Second)
	e.wantStats(q, store.QueueStats{Ready: n})

	q = e.name("claims")
	for i := range 2 * n {
		m := msg(fmt.Sprint("claimed ", i))
		if i%2 == 1 {
			m.MaxAttempts = 1
		}
		e.enqueue(q, m)
	}
	for claimed := 0; claimed < 2*n; {
		claimed += len(e.claim(q, 100, 10*time.Second).Messages)
	}
	e.wantStats(q, store.QueueStats{InFlight: 2 * n})
	e.advance(10 * time.Second)
	e.wantStats(q, store.QueueStats{Ready: n, Dead: n})
	e.advance(store.DefaultDeadLetterTTL - us)
	e.wantStats(q, store.QueueStats{Ready: n, Dead: n})
	e.advance(us)
	e.wantStats(q, store.QueueStats{Ready: n})
}

// queueDeadLetterTTL: a dead letter is kept DefaultDeadLetterTTL after it
// died (by a Nack on its last attempt, or its last claim's expiry), for
// Stats and Redrive, and forgotten then.
func queueDeadLetterTTL(e *env) {
	q := e.name("q")
	nacked, expired := msg("nacked"), msg("expired")
	nacked.MaxAttempts, expired.MaxAttempts = 1, 1
	e.enqueue(q, nacked)
	n, err := e.s.Nack(e.ctx, q, e.claimOne(q, time.Minute).Receipt, 0)
	noErr(e, "Nack", err)
	if !n.Dead {
		e.Fatalf("Nack on the last attempt = %+v, want dead", n)
	}
	e.enqueue(q, expired)
	e.claimOne(q, time.Second) // dies at +1s
	e.advance(time.Second)
	e.wantStats(q, store.QueueStats{Dead: 2})
	e.advance(store.DefaultDeadLetterTTL - time.Second - us)
	e.wantStats(q, store.QueueStats{Dead: 2})
	e.advance(us) // the nacked one's ttl has passed
	e.wantStats(q, store.QueueStats{Dead: 1})
	moved, err := e.s.Redrive(e.ctx, q, 10)
	noErr(e, "Redrive", err)
	eq(e, "redriven", moved, 1)
	// A redrive is a new enqueue: the message says when it was redriven.
	e.wantMessage("redriven", e.claimOne(q, time.Minute), expired, 1, e.now(), base)

	// One never redriven, its queue never touched until after its ttl.
	q = e.name("idle")
	dead := msg("dead")
	dead.MaxAttempts = 1
	e.enqueue(q, dead)
	e.claimOne(q, time.Second)
	e.advance(time.Second + store.DefaultDeadLetterTTL)
	moved, err = e.s.Redrive(e.ctx, q, 10)
	noErr(e, "Redrive after the ttl", err)
	eq(e, "redriven after the ttl", moved, 0)
	e.wantStats(q, store.QueueStats{})
}

// queueSeqRestart: once a queue has no message left, new messages still
// keep their enqueue order, before and after a redriven dead letter.
func queueSeqRestart(e *env) {
	q := e.name("q")
	var old []store.NewMessage
	for i := range 3 {
		m := msg(fmt.Sprint("old ", i))
		e.enqueue(q, m)
		old = append(old, m)
	}
	dead := msg("dead")
	dead.MaxAttempts = 1
	e.enqueue(q, dead)
	c := e.claim(q, 10, time.Minute)
	e.wantIDs("first", c.Messages, append(old, dead)...)
	for _, m := range c.Messages[:3] {
		e.ack(q, m.Receipt)
	}
	_, err := e.s.Nack(e.ctx, q, c.Messages[3].Receipt, 0)
	noErr(e, "Nack", err)
	e.wantStats(q, store.QueueStats{Dead: 1})
	x, y := msg("x"), msg("y")
	e.enqueue(q, x)
	moved, err := e.s.Redrive(e.ctx, q, 10)
	noErr(e, "Redrive", err)
	eq(e, "redriven", moved, 1)
	e.enqueue(q, y)
	e.wantIDs("after the queue emptied", e.claim(q, 10, time.Minute).Messages, x, dead, y)
}

// queueRedriveAfterManyForgotten: more dead letters reach their ttl than
// one upkeep deletes, and a later one has not: Stats counts only that one,
// and Redrive finds it.
func queueRedriveAfterManyForgotten(e *env) {
	q := e.name("q")
	const n = store.UpkeepBatch + 10
	for i := range n {
		m := msg(fmt.Sprint("early ", i))
		m.MaxAttempts = 1
		e.enqueue(q, m)
	}
	for claimed := 0; claimed < n; {
		claimed += len(e.claim(q, 100, time.Second).Messages) // dead at +1s
	}
	late := msg("late")
	late.MaxAttempts = 1
	e.enqueue(q, late)
	e.claimOne(q, 2*time.Second) // dead at +2s
	e.advance(time.Second + store.DefaultDeadLetterTTL)
	moved, err := e.s.Redrive(e.ctx, q, 10)
	noErr(e, "Redrive", err)
	eq(e, "redriven", moved, 1)
	e.wantIDs("redriven", e.claim(q, 10, time.Minute).Messages, late)
	e.wantStats(q, store.QueueStats{InFlight: 1})
}
