package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// deadLetterTests: listing, purging and redriving dead letters by ID.
func deadLetterTests() []test {
	return []test{
		{"DeadList", queueDeadList},
		{"DeadListPaging", queueDeadListPaging},
		{"DeadPurge", queueDeadPurge},
		{"DeadPurgeGroupHead", queueDeadPurgeGroupHead},
		{"RedriveIDs", queueRedriveIDs},
		{"RedriveIDsGroup", queueRedriveIDsGroup},
		{"DeadConcurrent", queueDeadConcurrent},
		{"DeadBeyondUpkeep", queueDeadBeyondUpkeep},
	}
}

// kill makes each of ms a dead letter, one at a time, one second apart, by
// a claim (with its only attempt) nacked: each dies at its Nack.
func (e *env) kill(q string, ms ...store.NewMessage) {
	e.Helper()
	for _, m := range ms {
		m.MaxAttempts = 1
		e.enqueue(q, m)
		got := e.claimOne(q, time.Minute)
		eq(e, "claimed", got.ID, m.ID)
		nk, err := e.s.Nack(e.ctx, q, got.Receipt, 0)
		noErr(e, "Nack", err)
		eq(e, "dead", nk.Dead, true)
		e.advance(time.Second)
	}
}

// listDead lists every dead letter of q, page after page of size n.
func (e *env) listDead(q string, n, preview int) []store.DeadLetter {
	e.Helper()
	var all []store.DeadLetter
	var pos store.DeadPos
	for range 10000 {
		page, err := e.s.ListDead(e.ctx, q, pos, n, preview)
		noErr(e, "ListDead", err)
		if len(page) > n {
			e.Fatalf("ListDead(max %d) returned %d", n, len(page))
		}
		all = append(all, page...)
		if len(page) < n {
			return all
		}
		pos = page[len(page)-1].Pos()
	}
	e.Fatal("ListDead never ended")
	return nil
}

func deadIDs(ds []store.DeadLetter) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

func msgIDs(ms ...store.NewMessage) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// queueDeadList: a dead letter is listed with its fields, in the order of
// death (a Nack, or a claim on its last attempt whose deadline passed,
// before any upkeep moved it), never a live message or a forgotten one.
func queueDeadList(e *env) {
	q := e.name("q")
	a := msg("alpha payload")
	a.Priority, a.Group = 7, "g"
	enq := e.now()
	e.kill(q, a) // dies at enq
	b := msg("b")
	b.MaxAttempts = 2
	e.enqueue(q, b)
	e.claimOne(q, 10*time.Second)
	e.advance(10 * time.Second)
	bDied := e.now()
	e.claimOne(q, 5*time.Second) // its last attempt: dead at its deadline
	e.enqueue(q, msg("live"))
	e.claimOne(q, time.Hour) // in flight: not dead
	e.enqueue(q, msg("ready"))
	got, err := e.s.ListDead(e.ctx, q, store.DeadPos{}, 10, 5)
	noErr(e, "ListDead", err)
	eq(e, "dead letters while b's last claim is live", fmt.Sprint(deadIDs(got)), fmt.Sprint(msgIDs(a)))
	e.advance(5 * time.Second)
	bDied = bDied.Add(5 * time.Second)
	// No write since b's claim ended: it is listed by its deadline.
	got, err = e.s.ListDead(e.ctx, q, store.DeadPos{}, 10, 5)
	noErr(e, "ListDead", err)
	eq(e, "dead letters", fmt.Sprint(deadIDs(got)), fmt.Sprint(msgIDs(a, b)))
	if len(got) == 2 {
		d := got[0]
		eq(e, "preview", string(d.Preview), "alpha")
		eq(e, "size", d.Size, len("alpha payload"))
		eq(e, "attempts", d.Attempts, 1)
		eq(e, "priority", d.Priority, 7)
		eq(e, "group", d.Group, "g")
		eqTime(e, "enqueue time", d.EnqueueTime, enq)
		eqTime(e, "dead time", d.DeadTime, enq)
		d = got[1]
		eq(e, "b preview", string(d.Preview), "b")
		eq(e, "b size", d.Size, 1)
		eq(e, "b attempts", d.Attempts, 2)
		eqTime(e, "b dead time", d.DeadTime, bDied)
		after, err := e.s.ListDead(e.ctx, q, got[0].Pos(), 10, 0)
		noErr(e, "ListDead after the first", err)
		eq(e, "after the first", fmt.Sprint(deadIDs(after)), fmt.Sprint(msgIDs(b)))
		if len(after) == 1 && (len(after[0].Preview) != 0 || after[0].Size != 1) {
			e.Errorf("preview 0: %q, size %d; want none, 1", after[0].Preview, after[0].Size)
		}
	}
	e.wantStats(q, store.QueueStats{Ready: 1, InFlight: 1, Dead: 2})
	e.advance(store.DefaultDeadLetterTTL - 10*time.Second) // a is forgotten, b not yet
	got, err = e.s.ListDead(e.ctx, q, store.DeadPos{}, 10, 5)
	noErr(e, "ListDead", err)
	eq(e, "dead letters after a's ttl", fmt.Sprint(deadIDs(got)), fmt.Sprint(msgIDs(b)))
}

// queueDeadListPaging: pages of any size list every dead letter once, in
// order, also those that died at the same instant (a claim of several on
// their last attempt) and across a position whose dead letter is gone.
func queueDeadListPaging(e *env) {
	q := e.name("q")
	var want []string
	for round := range 4 {
		var ms []store.NewMessage
		for i := range 9 {
			m := msg(fmt.Sprint(round, ".", i))
			m.MaxAttempts = 1
			e.enqueue(q, m)
			ms = append(ms, m)
		}
		c := e.claim(q, 9, time.Second) // all die at the same deadline
		eq(e, "claimed", len(c.Messages), 9)
		want = append(want, msgIDs(ms...)...)
		e.advance(time.Second)
		if round%2 == 1 {
			e.claimNone(q, 0) // upkeep moves them to the dead letters
		}
	}
	e.wantStats(q, store.QueueStats{Dead: int64(len(want))})
	for _, n := range []int{1, 4, 9, 36, 50} {
		eq(e, fmt.Sprint("pages of ", n), fmt.Sprint(deadIDs(e.listDead(q, n, 1))), fmt.Sprint(want))
	}
	first, err := e.s.ListDead(e.ctx, q, store.DeadPos{}, 5, 0)
	noErr(e, "ListDead", err)
	n, err := e.s.RedriveIDs(e.ctx, q, []string{first[4].ID})
	noErr(e, "RedriveIDs", err)
	eq(e, "redriven", n, 1)
	rest, err := e.s.ListDead(e.ctx, q, first[4].Pos(), 100, 0)
	noErr(e, "ListDead after a redriven one", err)
	eq(e, "after a redriven one", fmt.Sprint(deadIDs(rest)), fmt.Sprint(want[5:]))
}

// queueDeadPurge: PurgeDead deletes at most max, oldest first, and counts
// what remains; purged messages are gone for good.
func queueDeadPurge(e *env) {
	q := e.name("q")
	var ms []store.NewMessage
	for i := range 10 {
		ms = append(ms, msg(fmt.Sprint(i)))
	}
	e.kill(q, ms...)
	e.enqueue(q, msg("live"))
	purged, remaining, err := e.s.PurgeDead(e.ctx, q, 3)
	noErr(e, "PurgeDead(3)", err)
	eq(e, "purged", purged, 3)
	eq(e, "remaining", remaining, 7)
	eq(e, "left, oldest first", fmt.Sprint(deadIDs(e.listDead(q, 100, 0))), fmt.Sprint(msgIDs(ms[3:]...)))
	n, err := e.s.RedriveIDs(e.ctx, q, msgIDs(ms[:3]...))
	noErr(e, "RedriveIDs of purged", err)
	eq(e, "redriven purged", n, 0)
	purged, remaining, err = e.s.PurgeDead(e.ctx, q, 100)
	noErr(e, "PurgeDead(100)", err)
	eq(e, "purged", purged, 7)
	eq(e, "remaining", remaining, 0)
	purged, remaining, err = e.s.PurgeDead(e.ctx, q, 100)
	noErr(e, "PurgeDead with none", err)
	eq(e, "purged", purged, 0)
	eq(e, "remaining", remaining, 0)
	e.wantStats(q, store.QueueStats{Ready: 1})
	n, err = e.s.Redrive(e.ctx, q, 100)
	noErr(e, "Redrive", err)
	eq(e, "redriven after purge", n, 0)
}

// queueDeadPurgeGroupHead: purging a group's head that died by its claim's
// deadline (before upkeep moved it) lets the group move on.
func queueDeadPurgeGroupHead(e *env) {
	q := e.name("q")
	head, next := groupMsg("head", "g"), groupMsg("next", "g")
	head.MaxAttempts = 1
	e.enqueue(q, head)
	e.enqueue(q, next)
	e.claimOne(q, time.Second)
	e.advance(time.Second)
	sub := e.subscribe(store.QueueTopic(q))
	drain(sub)
	purged, remaining, err := e.s.PurgeDead(e.ctx, q, 10)
	noErr(e, "PurgeDead", err)
	eq(e, "purged", purged, 1)
	eq(e, "remaining", remaining, 0)
	e.wantWake(sub, "QueueTopic after the group moved on")
	e.wantIDs("the group's next", e.claim(q, 10, time.Minute).Messages, next)
}

// queueRedriveIDs: exactly the named dead letters move, as Redrive moves
// them; unknown, live, repeated and forgotten IDs are skipped.
func queueRedriveIDs(e *env) {
	q := e.name("q")
	old := msg("old")
	e.kill(q, old)
	e.advance(store.DefaultDeadLetterTTL) // old is forgotten
	a, b, c := msg("a"), msg("b"), msg("c")
	e.kill(q, a, b, c)
	live, ready := msg("live"), msg("ready")
	e.enqueue(q, live)
	e.claimOne(q, time.Hour)
	e.enqueue(q, ready)
	sub := e.subscribe(store.QueueTopic(q))
	drain(sub)
	now := e.now()
	n, err := e.s.RedriveIDs(e.ctx, q, []string{c.ID, token.New(), live.ID, ready.ID, old.ID, a.ID, c.ID})
	noErr(e, "RedriveIDs", err)
	eq(e, "moved", n, 2)
	e.wantWake(sub, "QueueTopic after RedriveIDs")
	e.wantStats(q, store.QueueStats{Ready: 3, InFlight: 1, Dead: 1})
	eq(e, "still dead", fmt.Sprint(deadIDs(e.listDead(q, 10, 0))), fmt.Sprint(msgIDs(b)))
	got := e.claim(q, 10, time.Minute).Messages
	e.wantIDs("ready, then the redriven in the order given", got, ready, c, a)
	for _, m := range got[1:] {
		eq(e, "attempt after RedriveIDs", m.Attempt, 1)
		eqTime(e, "enqueue time after RedriveIDs", m.EnqueueTime, now)
	}
	drain(sub)
	n, err = e.s.RedriveIDs(e.ctx, q, []string{a.ID, token.New()})
	noErr(e, "RedriveIDs again", err)
	eq(e, "moved again", n, 0)
	e.wantNoWake(sub, "QueueTopic after RedriveIDs moved nothing")
}

// queueRedriveIDsGroup: a group's dead letter redriven by ID goes behind
// the group's messages, as with Redrive; a group's head that died by its
// claim's deadline, redriven by ID, lets the group move on first.
func queueRedriveIDsGroup(e *env) {
	q := e.name("q")
	dead, next := groupMsg("dead", "g"), groupMsg("next", "g")
	dead.MaxAttempts = 1
	e.enqueue(q, dead)
	e.enqueue(q, next)
	_, err := e.s.Nack(e.ctx, q, e.claimOne(q, time.Minute).Receipt, 0)
	noErr(e, "Nack", err)
	mn := e.claimOne(q, time.Minute) // next, now the head
	moved, err := e.s.RedriveIDs(e.ctx, q, []string{dead.ID})
	noErr(e, "RedriveIDs", err)
	eq(e, "redriven", moved, 1)
	e.claimNone(q, time.Minute)
	e.ack(q, mn.Receipt)
	e.wantIDs("the redriven message, behind the head", e.claim(q, 10, time.Minute).Messages, dead)

	q = e.name("q2")
	head, second := groupMsg("head", "h"), groupMsg("second", "h")
	head.MaxAttempts = 1
	e.enqueue(q, head)
	e.enqueue(q, second)
	e.claimOne(q, time.Second)
	e.advance(time.Second) // head's claim ended: dead, not yet moved
	moved, err = e.s.RedriveIDs(e.ctx, q, []string{head.ID})
	noErr(e, "RedriveIDs", err)
	eq(e, "redriven head", moved, 1)
	e.wantIDs("the group moved on first", e.claim(q, 10, time.Minute).Messages, second)
}

// queueDeadConcurrent: PurgeDead, RedriveIDs and Redrive race each other
// and Claim: every dead letter is purged or redriven, never both, never
// twice, and the counts add up.
func queueDeadConcurrent(e *env) {
	q := e.name("q")
	const total = 300
	var ids []string
	for i := range total {
		m := msg(fmt.Sprint(i))
		m.MaxAttempts = 1
		e.enqueue(q, m)
		ids = append(ids, m.ID)
	}
	for range total / 50 {
		eq(e, "claimed", len(e.claim(q, 50, time.Second).Messages), 50)
	}
	e.advance(time.Second) // all dead, none moved yet
	var purged, moved atomic.Int64
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for range 20 {
				switch w % 3 {
				case 0:
					p, _, err := e.s.PurgeDead(e.ctx, q, 1+rand.IntN(7))
					noErr(e, "PurgeDead", err)
					purged.Add(p)
				case 1:
					sub := make([]string, 10)
					for i := range sub {
						sub[i] = ids[rand.IntN(total)]
					}
					n, err := e.s.RedriveIDs(e.ctx, q, sub)
					noErr(e, "RedriveIDs", err)
					moved.Add(int64(n))
					if w == 4 {
						n, err := e.s.Redrive(e.ctx, q, 3)
						noErr(e, "Redrive", err)
						moved.Add(int64(n))
					}
				case 2:
					c := e.claim(q, 5, time.Hour)
					mu.Lock()
					for _, m := range c.Messages {
						claimed[m.ID]++
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for {
		c := e.claim(q, 50, time.Hour)
		if len(c.Messages) == 0 {
			break
		}
		for _, m := range c.Messages {
			claimed[m.ID]++
		}
	}
	st, err := e.s.Stats(e.ctx, q)
	noErr(e, "Stats", err)
	eq(e, "claimed after redrive = moved", int64(len(claimed)), moved.Load())
	eq(e, "purged + moved + still dead", purged.Load()+moved.Load()+st.Dead, total)
	for id, n := range claimed {
		if n != 1 {
			e.Errorf("message %s claimed %d times after its redrive", id, n)
		}
	}
	left := e.listDead(q, 500, 0)
	eq(e, "listed dead = Stats.Dead", int64(len(left)), st.Dead)
	for _, d := range left {
		if claimed[d.ID] > 0 {
			e.Errorf("message %s is dead and was redriven", d.ID)
		}
	}
	if !slices.IsSortedFunc(left, func(a, b store.DeadLetter) int { return a.DeadTime.Compare(b.DeadTime) }) {
		e.Error("dead letters not in order of death")
	}
}

// queueDeadBeyondUpkeep: with more than an upkeep batch ended or forgotten
// at once, what upkeep left is still seen as Stats sees it: ended claims
// on a last attempt are dead (listed, purged, their group moving on), and
// forgotten dead letters are neither listed nor redriven.
func queueDeadBeyondUpkeep(e *env) {
	const n = store.UpkeepBatch + 10
	// n claims that end at once, the last of them a group's head.
	endAll := func(q string) []store.NewMessage {
		var ms []store.NewMessage
		for i := range n {
			m := msg(fmt.Sprint("m ", i))
			if i == n-1 {
				m = groupMsg("head", "g")
			}
			m.MaxAttempts = 1
			e.enqueue(q, m)
			ms = append(ms, m)
		}
		for claimed := 0; claimed < n; {
			claimed += len(e.claim(q, 100, time.Second).Messages) // ends at +1s
		}
		return ms
	}

	// Forgotten: upkeep (RedriveIDs's own) forgets a batch, the rest are
	// past their ttl all the same.
	q := e.name("forgotten")
	old := endAll(q)
	e.advance(time.Second)
	e.claimNone(q, 0) // buries a batch
	e.claimNone(q, 0) // and the rest: all dead now
	e.advance(store.DefaultDeadLetterTTL)
	moved, err := e.s.RedriveIDs(e.ctx, q, msgIDs(old[n-20:]...))
	noErr(e, "RedriveIDs of forgotten ones", err)
	eq(e, "forgotten redriven", moved, 0)
	eq(e, "forgotten listed", len(e.listDead(q, 10, 0)), 0)

	// Ended: no upkeep has run since the claims ended.
	q = e.name("ended")
	ended := endAll(q)
	next := groupMsg("next", "g")
	e.enqueue(q, next)
	e.advance(time.Second)
	e.wantStats(q, store.QueueStats{Delayed: 1, Dead: n})
	for _, size := range []int{7, store.MaxListDead} {
		got := e.listDead(q, size, 0)
		eq(e, fmt.Sprint("listed in pages of ", size), len(got), n)
		if len(got) == n {
			eq(e, "listed in enqueue order", fmt.Sprint(deadIDs(got)), fmt.Sprint(msgIDs(ended...)))
		}
	}
	// Its upkeep buries a batch; the purge takes the rest, the group's
	// head among them, from the ended claims.
	purged, remaining, err := e.s.PurgeDead(e.ctx, q, store.MaxPurgeDead)
	noErr(e, "PurgeDead", err)
	eq(e, "purged", purged, int64(n))
	eq(e, "remaining", remaining, 0)
	e.wantIDs("the group moved on", e.claim(q, 10, time.Minute).Messages, next)
}
