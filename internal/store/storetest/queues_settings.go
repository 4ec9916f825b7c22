package storetest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

func queueSettingsTests() []test {
	return []test{
		{"Pause", queuePause},
		{"SettingsKeepNoRecord", queueSettingsKeepNoRecord},
		{"MaxInFlight", queueMaxInFlight},
		{"MaxInFlightConcurrent", queueMaxInFlightConcurrent},
		{"ClaimRate", queueClaimRate},
		{"ClaimRateWindows", queueClaimRateWindows},
		{"Replace", queueReplace},
		{"ReplaceGroup", queueReplaceGroup},
		{"ReplaceConcurrent", queueReplaceConcurrent},
		{"Reservations", queueReservations},
	}
}

func (e *env) pause(q string, paused bool) store.QueueSettings {
	e.Helper()
	c, err := e.s.PauseQueue(e.ctx, q, paused)
	noErr(e, "PauseQueue", err)
	eq(e, "PauseQueue: Paused", c.Paused, paused)
	return c
}

func (e *env) configure(q string, c store.QueueSettings) {
	e.Helper()
	got, err := e.s.ConfigureQueue(e.ctx, q, c)
	noErr(e, "ConfigureQueue", err)
	c.Paused = got.Paused
	eq(e, "ConfigureQueue's settings", got, c)
	read, err := e.s.QueueSettings(e.ctx, q)
	noErr(e, "QueueSettings", err)
	eq(e, "QueueSettings", read, got)
}

// queuePause: a paused queue takes messages and hands out none; claims
// made before the pause stay live (acked, extended) and its caps stay;
// resuming wakes the queue's waiters and hands out what waited.
func queuePause(e *env) {
	q := e.name("q")
	a, b := msg("a"), msg("b")
	e.enqueue(q, a)
	ca := e.claimOne(q, time.Minute)
	e.configure(q, store.QueueSettings{MaxInFlight: 7})
	got := e.pause(q, true)
	eq(e, "a pause keeps the caps", got.MaxInFlight, 7)
	e.enqueue(q, b)
	e.claimNone(q, time.Minute) // a's claim expires then
	eq(e, "HeldBack while paused", e.claim(q, 1, time.Minute).HeldBack, "paused")
	e.wantStats(q, store.QueueStats{Ready: 1, InFlight: 1, Paused: true})
	_, err := e.s.ExtendClaim(e.ctx, q, ca.Receipt, 2*time.Minute)
	noErr(e, "ExtendClaim while paused", err)
	e.ack(q, ca.Receipt)
	e.configure(q, store.QueueSettings{MaxInFlight: 9})
	got, err = e.s.QueueSettings(e.ctx, q)
	noErr(e, "QueueSettings", err)
	eq(e, "ConfigureQueue keeps the pause", got.Paused, true)
	e.claimNone(q, 0)
	sub := e.subscribe(store.QueueTopic(q))
	drain(sub)
	e.pause(q, false)
	e.wantWake(sub, "QueueTopic after a resume")
	e.wantIDs("after the resume", e.claim(q, 10, time.Minute).Messages, b)
}

// queueSettingsKeepNoRecord: settings set back to none leave nothing, and
// reading a queue's settings creates nothing.
func queueSettingsKeepNoRecord(e *env) {
	q := e.name("q")
	got, err := e.s.QueueSettings(e.ctx, q)
	noErr(e, "QueueSettings", err)
	eq(e, "a new queue's settings", got, store.QueueSettings{})
	e.pause(q, true)
	e.configure(q, store.QueueSettings{MaxInFlight: 1, RateLimit: 5, RatePeriod: time.Second})
	e.pause(q, false)
	if got := e.residue(time.Hour, q); len(got) == 0 {
		e.Errorf("a queue with settings: the store keeps nothing of them")
	}
	e.configure(q, store.QueueSettings{})
	e.wantNoResidue("queue settings set back to none", time.Minute, q)
}

// queueMaxInFlight: a Claim hands out no more than the free slots; an
// Ack, a Nack and an expired claim free one, and the first two wake the
// queue.
func queueMaxInFlight(e *env) {
	q := e.name("q")
	e.configure(q, store.QueueSettings{MaxInFlight: 2})
	ms := make([]store.NewMessage, 5)
	for i := range ms {
		ms[i] = msg(fmt.Sprint(i))
		e.enqueue(q, ms[i])
	}
	c := e.claim(q, 10, time.Minute)
	e.wantIDs("the first claim", c.Messages, ms[0], ms[1])
	eq(e, "HeldBack", c.HeldBack, "max_in_flight")
	e.claimNone(q, time.Minute)
	sub := e.subscribe(store.QueueTopic(q))
	drain(sub)
	e.ack(q, c.Messages[0].Receipt)
	e.wantWake(sub, "QueueTopic after an Ack freed a slot")
	c2 := e.claim(q, 10, time.Minute)
	e.wantIDs("after the Ack", c2.Messages, ms[2])
	drain(sub)
	_, err := e.s.Nack(e.ctx, q, c2.Messages[0].Receipt, time.Hour)
	noErr(e, "Nack", err)
	e.wantWake(sub, "QueueTopic after a Nack freed a slot")
	e.wantIDs("after the Nack", e.claim(q, 10, time.Minute).Messages, ms[3])
	e.advance(time.Minute) // both claims expire: two slots, and both ready again after 4
	e.wantIDs("after the expiries", e.claim(q, 10, time.Minute).Messages, ms[4], ms[1])
	e.configure(q, store.QueueSettings{MaxInFlight: 3})
	e.wantIDs("after the cap rose", e.claim(q, 10, time.Minute).Messages, ms[3])
	e.configure(q, store.QueueSettings{})
	e.wantStats(q, store.QueueStats{Delayed: 1, InFlight: 3})

	// A claim on its last attempt frees its slot at its deadline, which
	// NextDue tells a Claim the cap held back.
	q2 := e.name("q2")
	e.configure(q2, store.QueueSettings{MaxInFlight: 1})
	last, next := msg("last"), msg("next")
	last.MaxAttempts = 1
	e.enqueue(q2, last)
	e.enqueue(q2, next)
	e.claimOne(q2, 10*time.Second)
	e.claimNone(q2, 10*time.Second)
	e.advance(10 * time.Second)
	e.wantIDs("after the last attempt's deadline", e.claim(q2, 10, time.Minute).Messages, next)
}

// queueMaxInFlightConcurrent: 32 claimers under a cap of 5, acking,
// nacking and letting claims expire while the clock moves: at every
// claim, the claims held (claimed, not yet given back, not expired) stay
// within the cap.
func queueMaxInFlightConcurrent(e *env) {
	q := e.name("q")
	const capN, total = 5, 400
	e.configure(q, store.QueueSettings{MaxInFlight: capN})
	for i := range total {
		e.enqueue(q, msg(fmt.Sprint(i)))
	}
	var mu sync.Mutex
	held := map[string]time.Time{} // receipt -> claim deadline
	acked := map[string]bool{}
	over := 0
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 40 {
				req := store.Claim{Tokens: []string{token.New(), token.New()}, Visibility: time.Duration(1+r.IntN(3)) * time.Second}
				c, err := e.s.Claim(e.ctx, q, req)
				if err != nil {
					e.Errorf("Claim: %v", err)
					return
				}
				mu.Lock()
				for _, m := range c.Messages {
					held[m.Receipt] = m.ExpireTime
				}
				// Claims whose deadline has passed are not held (on Redis
				// a Claim whose time was read before a clock step may
				// hand out claims that end at once).
				now := e.now()
				for rc, d := range held {
					if !now.Before(d) {
						delete(held, rc)
					}
				}
				if len(held) > capN {
					over++
				}
				mu.Unlock()
				for _, m := range c.Messages {
					mu.Lock()
					delete(held, m.Receipt) // before the store frees it: held stays within the store's claims
					mu.Unlock()
					switch r.IntN(3) {
					case 0:
						if a, err := e.s.Ack(e.ctx, q, []string{m.Receipt}); err == nil && a[0] {
							mu.Lock()
							acked[m.ID] = true
							mu.Unlock()
						}
					case 1:
						_, _ = e.s.Nack(e.ctx, q, m.Receipt, 0)
					default:
						mu.Lock()
						held[m.Receipt] = m.ExpireTime // left to expire
						mu.Unlock()
					}
				}
				if r.IntN(8) == 0 {
					mu.Lock()
					e.advance(time.Second)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	eq(e, "claims seen over the cap", over, 0)
	st, err := e.s.Stats(e.ctx, q)
	noErr(e, "Stats", err)
	if st.InFlight > capN {
		e.Errorf("Stats: %d in flight, over the cap of %d", st.InFlight, capN)
	}
	eq(e, "messages kept", st.Ready+st.Delayed+st.InFlight+st.Dead+int64(len(acked)), int64(total))
}

// queueClaimRate: a Claim hands out no more than the bucket's tokens and
// says when the next one comes.
func queueClaimRate(e *env) {
	q := e.name("q")
	e.configure(q, store.QueueSettings{RateLimit: 3, RatePeriod: time.Second})
	for i := range 10 {
		e.enqueue(q, msg(fmt.Sprint(i)))
	}
	c := e.claim(q, 10, time.Minute)
	eq(e, "claimed from a full bucket", len(c.Messages), 3)
	eq(e, "HeldBack", c.HeldBack, "claim_rate")
	eq(e, "NextDue: the next token", c.NextDue, 333334*time.Microsecond)
	e.advance(333334 * time.Microsecond)
	eq(e, "claimed a third of a period later", len(e.claim(q, 10, time.Minute).Messages), 1)
	e.advance(10 * time.Second)
	eq(e, "claimed after a long pause (the bucket holds 3)", len(e.claim(q, 10, time.Minute).Messages), 3)
	e.advance(10 * time.Second)
	c = e.claim(q, 1, time.Minute)
	eq(e, "claimed within the bucket", len(c.Messages), 1)
	eq(e, "HeldBack when the rate held none back", c.HeldBack, "")
	e.configure(q, store.QueueSettings{RateLimit: 2, RatePeriod: time.Second})
	eq(e, "claimed after the rate changed (a full bucket)", len(e.claim(q, 10, time.Minute).Messages), 2)
}

// queueClaimRateWindows: over 60 periods of random claims and clock steps,
// the messages claimed up to any instant never pass the bucket: limit +
// limit per period since the start.
func queueClaimRateWindows(e *env) {
	q := e.name("q")
	const limit, period = 5, time.Second
	for i := range 400 {
		e.enqueue(q, msg(fmt.Sprint(i)))
	}
	e.configure(q, store.QueueSettings{RateLimit: limit, RatePeriod: period})
	start := e.now()
	claimed := 0
	r := rand.New(rand.NewPCG(7, 7))
	for e.now().Sub(start) < 60*period {
		claimed += len(e.claim(q, 1+r.IntN(4), time.Hour).Messages)
		max := limit + int(int64(limit)*int64(e.now().Sub(start))/int64(period))
		if claimed > max {
			e.Fatalf("%d claimed %v after the start; the bucket allows %d", claimed, e.now().Sub(start), max)
		}
		e.advance(time.Duration(r.IntN(150)) * time.Millisecond)
	}
	if claimed < 60*limit {
		e.Errorf("%d claimed over 60 periods; the rate allows %d", claimed, 60*limit)
	}
}

// replaceMsg is a message with DedupID id to replace, in a window of a
// minute.
func replaceMsg(payload, id string, delay time.Duration, prio int) store.NewMessage {
	m := msg(payload)
	m.DedupID, m.DedupWindow, m.Replace, m.Delay, m.Priority = id, time.Minute, true, delay, prio
	return m
}

// queueReplace: a replacing enqueue of a message not yet claimed changes
// its payload, deliver time and priority (debounce: each trigger pushes
// the run later) and restarts the window; once it was claimed (in flight,
// acked, dead) the next trigger is a new message.
func queueReplace(e *env) {
	q := e.name("q")
	first := replaceMsg("v1", "job", 10*time.Second, 0)
	r := e.enqueue(q, first)
	eqEnqueued(e, "the first enqueue adds", r, store.Enqueued{ID: first.ID, DeliverTime: e.now().Add(10 * time.Second)})
	e.advance(5 * time.Second)
	r = e.enqueue(q, replaceMsg("v2", "job", 10*time.Second, 3))
	eqEnqueued(e, "a trigger while it waits replaces", r, store.Enqueued{ID: first.ID, DeliverTime: e.now().Add(10 * time.Second), Replaced: true})
	e.advance(5 * time.Second)
	e.claimNone(q, 5*time.Second) // pushed later by the second trigger
	e.wantStats(q, store.QueueStats{Delayed: 1})
	other := msg("other")
	other.Priority = 2
	e.enqueue(q, other)
	e.advance(5 * time.Second)
	c := e.claim(q, 10, time.Minute).Messages
	e.wantIDs("by the replaced priority", c, first, other)
	eq(e, "the replaced payload", string(c[0].Payload), "v2")
	eq(e, "the replaced priority", c[0].Priority, 3)

	// In flight: a trigger adds a run after it.
	in := replaceMsg("v3", "job", 0, 0)
	r = e.enqueue(q, in)
	eqEnqueued(e, "a trigger while it runs adds", r, store.Enqueued{ID: in.ID, DeliverTime: e.now()})
	again := replaceMsg("v4", "job", 0, 0)
	r = e.enqueue(q, again)
	eqEnqueued(e, "and replaces that one while it waits", r, store.Enqueued{ID: in.ID, DeliverTime: e.now(), Replaced: true})
	e.ack(q, c[0].Receipt)
	e.ack(q, c[1].Receipt)
	got := e.claimOne(q, time.Minute)
	eq(e, "the run after", got.ID, in.ID)
	eq(e, "its payload", string(got.Payload), "v4")
	e.ack(q, got.Receipt)
	done := replaceMsg("v5", "job", 0, 0)
	r = e.enqueue(q, done)
	eqEnqueued(e, "a trigger after it was acked adds", r, store.Enqueued{ID: done.ID, DeliverTime: e.now()})
	e.wantStats(q, store.QueueStats{Ready: 1})

	// Without Replace the dedup ID still keeps the first.
	keep := msg("keep")
	keep.DedupID, keep.DedupWindow = "job", time.Minute
	eqEnqueued(e, "keep first", e.enqueue(q, keep), store.Enqueued{ID: done.ID, DeliverTime: e.now(), Duplicate: true})
}

// queueReplaceGroup: a replaced message keeps its place in its group,
// whether it waits behind the head or is the head; a group's next head is
// claimable from its turn on (its deliver time says so).
func queueReplaceGroup(e *env) {
	q := e.name("q")
	head, behind := groupMsg("h", "g"), replaceMsg("b1", "b", 0, 0)
	behind.Group = "g"
	e.enqueue(q, head)
	e.enqueue(q, behind)
	again := replaceMsg("b2", "b", time.Second, 0)
	again.Group = "g"
	eq(e, "replaced behind the head", e.enqueue(q, again).Replaced, true)
	c := e.claimOne(q, time.Minute)
	eq(e, "the head first", c.ID, head.ID)
	e.advance(2 * time.Second)
	e.ack(q, c.Receipt)
	next := e.claimOne(q, time.Minute)
	eq(e, "then the replaced one", next.ID, behind.ID)
	eq(e, "with its payload", string(next.Payload), "b2")
	eqTime(e, "its deliver time: its turn", next.DeliverTime, e.now())
	e.ack(q, next.Receipt)
	// The head itself, ready after its turn came.
	h2, b := groupMsg("h2", "g2"), replaceMsg("x1", "x", 0, 0)
	b.Group = "g2"
	e.enqueue(q, h2)
	e.enqueue(q, b)
	c = e.claimOne(q, time.Minute)
	e.advance(time.Second)
	e.ack(q, c.Receipt) // b is the head, ready since now
	e.advance(time.Second)
	x2 := replaceMsg("x2", "x", 0, 0)
	x2.Group = "g2"
	eq(e, "the head replaced", e.enqueue(q, x2).Replaced, true)
	got := e.claimOne(q, time.Minute)
	eq(e, "the head, replaced", string(got.Payload), "x2")
	e.ack(q, got.Receipt)
	e.claimNone(q, 0)
}

// queueReplaceConcurrent: concurrent replacing enqueues of one dedup ID
// leave exactly one waiting message, with the last payload.
func queueReplaceConcurrent(e *env) {
	q := e.name("q")
	const workers = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last string
	for i := range workers {
		wg.Go(func() {
			m := replaceMsg(fmt.Sprint(i), "same", 0, 0)
			mu.Lock() // the order the store sees them in: under the lock
			defer mu.Unlock()
			_, err := e.s.Enqueue(e.ctx, q, m)
			noErr(e, "Enqueue", err)
			last = fmt.Sprint(i)
		})
	}
	// And without the lock: whatever the order, one message.
	for i := range workers {
		wg.Go(func() {
			_, err := e.s.Enqueue(e.ctx, q, replaceMsg("free"+fmt.Sprint(i), "other", 0, 0))
			noErr(e, "Enqueue", err)
		})
	}
	wg.Wait()
	e.wantStats(q, store.QueueStats{Ready: 2})
	c := e.claim(q, 10, time.Minute).Messages
	if len(c) != 2 {
		e.Fatalf("claimed %d, want 2", len(c))
	}
	payloads := map[string]bool{string(c[0].Payload): true, string(c[1].Payload): true}
	if !payloads[last] {
		e.Errorf("payloads %v, want the last replacing enqueue's %q among them", payloads, last)
	}
}

func eqEnqueued(e *env, what string, got, want store.Enqueued) {
	e.Helper()
	if got.ID != want.ID || got.Duplicate != want.Duplicate || got.Replaced != want.Replaced || !got.DeliverTime.Equal(want.DeliverTime) {
		e.Errorf("%s: Enqueue = %+v, want %+v", what, got, want)
	}
}

func (e *env) reserve(q string, n int, hold time.Duration) (store.Reserved, []string) {
	e.Helper()
	toks := make([]string, n)
	for i := range toks {
		toks[i] = token.New()
	}
	r, err := e.s.ReserveClaims(e.ctx, q, toks, hold)
	noErr(e, "ReserveClaims", err)
	return r, toks
}

// queueReservations: a partitioned queue's reservations count against its
// caps as claims do: at most MaxInFlight live, at most the rate's tokens;
// a release frees a slot (waking the queue at its cap) and gives unused
// tokens back; an expired reservation frees its slot; one held longer
// does not, and one that ended is made again by a hold; a paused queue
// reserves nothing.
func queueReservations(e *env) {
	q := e.name("q")
	e.configure(q, store.QueueSettings{MaxInFlight: 3, RateLimit: 4, RatePeriod: time.Hour})
	r, t1 := e.reserve(q, 5, 10*time.Second)
	eq(e, "reserved", r, store.Reserved{N: 3, NextDue: 10 * time.Second, HeldBack: "max_in_flight"})
	r, _ = e.reserve(q, 1, 10*time.Second)
	eq(e, "reserved at the cap", r.N, 0)
	sub := e.subscribe(store.QueueTopic(q))
	drain(sub)
	noErr(e, "ReleaseClaims", e.s.ReleaseClaims(e.ctx, q, t1[:1], false))
	e.wantWake(sub, "QueueTopic after a release at the cap")
	r, _ = e.reserve(q, 2, 10*time.Second)
	eq(e, "reserved after a release (the last rate token)", r, store.Reserved{N: 1, NextDue: 10 * time.Second, HeldBack: "max_in_flight"})
	noErr(e, "ReleaseClaims unused", e.s.ReleaseClaims(e.ctx, q, t1[1:3], true))
	r, t2 := e.reserve(q, 3, 10*time.Second)
	eq(e, "reserved with the rate's tokens given back", r, store.Reserved{N: 2, NextDue: 10 * time.Second, HeldBack: "max_in_flight"})
	noErr(e, "HoldReservations", e.s.HoldReservations(e.ctx, q, t2[:1], time.Minute))
	e.advance(10 * time.Second)
	e.configure(q, store.QueueSettings{MaxInFlight: 3}) // no rate: only the slots count
	r, _ = e.reserve(q, 5, 10*time.Second)
	eq(e, "reserved after the others expired (one extended)", r.N, 2)
	noErr(e, "HoldReservations of ended ones", e.s.HoldReservations(e.ctx, q, t1, time.Minute))
	r, _ = e.reserve(q, 1, 10*time.Second)
	eq(e, "reserved over the held ones", r.N, 0)
	e.pause(q, true)
	r, _ = e.reserve(q, 1, 10*time.Second)
	eq(e, "reserved while paused", r, store.Reserved{HeldBack: "paused"})
}
