package storetest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// The cases of priorities and message groups (store.NewMessage.Priority,
// Group).
func queueGroupTests() []test {
	return []test{
		{"Priority", queuePriority},
		{"PriorityRedelivered", queuePriorityRedelivered},
		{"GroupOneAtATime", queueGroupOneAtATime},
		{"GroupEnqueueOrder", queueGroupEnqueueOrder},
		{"GroupDeadHeadMovesOn", queueGroupDeadHeadMovesOn},
		{"GroupRedrive", queueGroupRedrive},
		{"GroupsConcurrent", queueGroupsConcurrent},
		{"PartitionNames", queuePartitionNames},
		{"Partitionings", queuePartitionings},
		{"PartitionsAreQueues", queuePartitionsAreQueues},
	}
}

func prioMsg(payload string, prio int) store.NewMessage {
	m := msg(payload)
	m.Priority = prio
	return m
}

func groupMsg(payload, group string) store.NewMessage {
	m := msg(payload)
	m.Group = group
	return m
}

// queuePriority: among ready messages the highest priority is claimed
// first, then the one due first; a delayed message waits for its time
// whatever its priority; the message says its priority.
func queuePriority(e *env) {
	q := e.name("q")
	a, b, c, d := prioMsg("a", 0), prioMsg("b", 5), prioMsg("c", 9), prioMsg("d", 5)
	for _, m := range []store.NewMessage{a, b, c, d} {
		e.enqueue(q, m)
	}
	got := e.claim(q, 10, time.Minute)
	e.wantIDs("by priority, then enqueue order", got.Messages, c, b, d, a)
	for i, p := range []int{9, 5, 5, 0} {
		if i < len(got.Messages) && got.Messages[i].Priority != p {
			e.Errorf("message %d: priority %d, want %d", i, got.Messages[i].Priority, p)
		}
	}
	late, now := prioMsg("late", 9), prioMsg("now", 0)
	late.Delay = time.Second
	e.enqueue(q, late)
	e.enqueue(q, now)
	e.wantIDs("a delayed message of a higher priority waits for its time", e.claim(q, 10, time.Minute).Messages, now)
	e.advance(time.Second)
	low := prioMsg("low", 1)
	e.enqueue(q, low)
	e.wantIDs("once due, by priority", e.claim(q, 10, time.Minute).Messages, late, low)
}

// queuePriorityRedelivered: a message redelivered (its claim expired, or
// nacked) keeps its priority.
func queuePriorityRedelivered(e *env) {
	q := e.name("q")
	hi, lo := prioMsg("hi", 7), prioMsg("lo", 2)
	e.enqueue(q, hi)
	e.claimOne(q, time.Second)
	e.enqueue(q, lo)
	e.advance(2 * time.Second) // hi's claim expired after lo was enqueued
	got := e.claim(q, 10, time.Minute)
	e.wantIDs("the expired claim of the higher priority first", got.Messages, hi, lo)
	n, err := e.s.Nack(e.ctx, q, got.Messages[1].Receipt, 0)
	noErr(e, "Nack", err)
	if n.Dead {
		e.Fatal("nacked: dead")
	}
	_, err = e.s.Nack(e.ctx, q, got.Messages[0].Receipt, 0)
	noErr(e, "Nack", err)
	e.wantIDs("nacked, by priority", e.claim(q, 10, time.Minute).Messages, hi, lo)
}

// queueGroupOneAtATime: a group has at most one message out at a time, the
// earliest enqueued; the next is claimable once it is acked; a nacked one
// stays first; messages waiting behind their group count as delayed.
func queueGroupOneAtATime(e *env) {
	q := e.name("q")
	g1, g2, g3 := groupMsg("g1", "g"), groupMsg("g2", "g"), groupMsg("g3", "g")
	h1, free := groupMsg("h1", "h"), msg("free")
	for _, m := range []store.NewMessage{g1, g2, g3, h1, free} {
		e.enqueue(q, m)
	}
	e.wantStats(q, store.QueueStats{Ready: 3, Delayed: 2})
	got := e.claim(q, 10, time.Minute)
	e.wantIDs("one per group, and the rest", got.Messages, g1, h1, free)
	if got.Messages[0].Group != "g" {
		e.Errorf("a grouped message says group %q, want g", got.Messages[0].Group)
	}
	e.claimNone(q, time.Minute) // the claims' expiry
	e.wantStats(q, store.QueueStats{InFlight: 3, Delayed: 2})
	e.ack(q, got.Messages[0].Receipt)
	second := e.claimOne(q, time.Minute)
	e.wantIDs("after g1's ack", []store.Message{second}, g2)
	_, err := e.s.Nack(e.ctx, q, second.Receipt, 0)
	noErr(e, "Nack", err)
	e.wantIDs("a nacked head stays first", e.claim(q, 10, time.Minute).Messages, g2)
}

// queueGroupEnqueueOrder: a group's messages are delivered in enqueue
// order, whatever their delays and priorities.
func queueGroupEnqueueOrder(e *env) {
	q := e.name("q")
	first, second := groupMsg("first", "g"), groupMsg("second", "g")
	first.Delay = 10 * time.Second
	second.Priority = 9
	e.enqueue(q, first)
	e.enqueue(q, second)
	e.claimNone(q, 10*time.Second)
	e.advance(10 * time.Second)
	m := e.claimOne(q, time.Minute)
	e.wantIDs("the earlier one, once due", []store.Message{m}, first)
	e.ack(q, m.Receipt)
	e.wantIDs("then the later one", e.claim(q, 10, time.Minute).Messages, second)
}

// queueGroupDeadHeadMovesOn: a group's head that dies, by a Nack on its
// last attempt or by its last claim's expiry, lets the next message of the
// group out.
func queueGroupDeadHeadMovesOn(e *env) {
	q := e.name("q")
	a, b, c := groupMsg("a", "g"), groupMsg("b", "g"), groupMsg("c", "g")
	a.MaxAttempts, b.MaxAttempts = 1, 1
	for _, m := range []store.NewMessage{a, b, c} {
		e.enqueue(q, m)
	}
	n, err := e.s.Nack(e.ctx, q, e.claimOne(q, time.Minute).Receipt, 0)
	noErr(e, "Nack", err)
	if !n.Dead {
		e.Fatalf("Nack on the last attempt = %+v, want dead", n)
	}
	mb := e.claimOne(q, time.Second)
	e.wantIDs("after the head's death by Nack", []store.Message{mb}, b)
	e.advance(time.Second) // b's last claim expires: dead
	e.wantIDs("after the head's death by expiry", e.claim(q, 10, time.Minute).Messages, c)
	e.wantStats(q, store.QueueStats{InFlight: 1, Dead: 2})
}

// queueGroupRedrive: a dead message of a group is redriven behind the
// group's messages, or as its head if it has none.
func queueGroupRedrive(e *env) {
	q := e.name("q")
	dead, next := groupMsg("dead", "g"), groupMsg("next", "g")
	dead.MaxAttempts = 1
	e.enqueue(q, dead)
	e.enqueue(q, next)
	_, err := e.s.Nack(e.ctx, q, e.claimOne(q, time.Minute).Receipt, 0)
	noErr(e, "Nack", err)
	mn := e.claimOne(q, time.Minute) // next, now the head
	moved, err := e.s.Redrive(e.ctx, q, 10)
	noErr(e, "Redrive", err)
	eq(e, "redriven", moved, 1)
	e.claimNone(q, time.Minute) // the head's claim's expiry
	e.ack(q, mn.Receipt)
	e.wantIDs("the redriven message, behind the head", e.claim(q, 10, time.Minute).Messages, dead)
}

// queueGroupsConcurrent: 1,000 groups of 20 messages, claimed and acked by
// 8 consumers at once: no group ever has two messages out, and each
// group's messages are acked in enqueue order.
func queueGroupsConcurrent(e *env) {
	const groups, per, consumers = 1000, 20, 8
	q := e.name("q")
	order := make(map[string][2]int, groups*per) // message ID -> group, index
	msgs := make([][per]store.NewMessage, groups)
	for g := range groups {
		for i := range per {
			m := groupMsg(fmt.Sprint(i), fmt.Sprint("g", g))
			msgs[g][i], order[m.ID] = m, [2]int{g, i}
		}
	}
	// Each enqueuer has its own groups, so that a group's messages are
	// enqueued in index order, while the groups interleave.
	var enqueues sync.WaitGroup
	for k := range consumers {
		enqueues.Go(func() {
			for i := range per {
				for g := k; g < groups; g += consumers {
					if _, err := e.s.Enqueue(e.ctx, q, msgs[g][i]); err != nil {
						e.Error(err)
						return
					}
				}
			}
		})
	}
	enqueues.Wait()
	if e.Failed() {
		return
	}
	var (
		out      [groups]atomic.Int32 // messages of the group out now
		acked    [groups]atomic.Int32 // how many of the group were acked
		done     atomic.Int32
		failures atomic.Int32
	)
	fail := func(format string, a ...any) {
		if failures.Add(1) <= 5 {
			e.Errorf(format, a...)
		}
	}
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for done.Load() < groups*per && failures.Load() == 0 {
				req := store.Claim{Tokens: make([]string, 1+rng.IntN(32)), Visibility: time.Hour}
				for i := range req.Tokens {
					req.Tokens[i] = token.New()
				}
				got, err := e.s.Claim(e.ctx, q, req)
				if err != nil {
					fail("Claim: %v", err)
					return
				}
				receipts := make([]string, 0, len(got.Messages))
				for _, m := range got.Messages {
					gi := order[m.ID]
					if n := out[gi[0]].Add(1); n > 1 {
						fail("group %d has %d messages out", gi[0], n)
					}
					if a := acked[gi[0]].Load(); int(a) != gi[1] {
						fail("group %d: message %d claimed after %d were acked", gi[0], gi[1], a)
					}
					receipts = append(receipts, m.Receipt)
				}
				for _, m := range got.Messages {
					gi := order[m.ID]
					acked[gi[0]].Add(1)
					out[gi[0]].Add(-1)
				}
				if len(receipts) > 0 {
					ok, err := e.s.Ack(e.ctx, q, receipts)
					if err != nil {
						fail("Ack: %v", err)
						return
					}
					for i, a := range ok {
						if !a {
							fail("Ack of a live claim (%s): false", receipts[i])
						}
					}
					done.Add(int32(len(receipts)))
				}
			}
		})
	}
	wg.Wait()
	if d := done.Load(); d != groups*per && failures.Load() == 0 {
		e.Errorf("acked %d of %d", d, groups*per)
	}
	e.wantStats(q, store.QueueStats{})
}

// queuePartitionNames: partition 0 of 1 is the queue itself; the names of
// every (p, k) of one queue, and of another queue, are distinct and stable.
func queuePartitionNames(e *env) {
	q, other := e.name("q"), e.name("q2")
	if got := e.s.PartitionName(q, 0, 1); got != q {
		e.Errorf("PartitionName(q, 0, 1) = %q, want q itself", got)
	}
	seen := map[string]string{q: "q", other: "q2"}
	for _, name := range []string{q, other} {
		for _, k := range []int{2, 3, 5, store.MaxPartitions} {
			for p := range k {
				n := e.s.PartitionName(name, p, k)
				what := fmt.Sprintf("%s %d of %d", name, p, k)
				if was, ok := seen[n]; ok {
					e.Errorf("PartitionName(%s) = %q, the name of %s too", what, n, was)
				}
				seen[n] = what
				if again := e.s.PartitionName(name, p, k); again != n {
					e.Errorf("PartitionName(%s) = %q, then %q", what, n, again)
				}
			}
		}
	}
}

// queuePartitionings: the record holds 1 and every k added, sorted, each
// once, and is per queue.
func queuePartitionings(e *env) {
	q := e.name("q")
	for _, c := range []struct {
		k    int
		want string
	}{{3, "[1 3]"}, {3, "[1 3]"}, {2, "[1 2 3]"}, {1, "[1 2 3]"}, {store.MaxPartitions, fmt.Sprintf("[1 2 3 %d]", store.MaxPartitions)}} {
		ks, err := e.s.Partitionings(e.ctx, q, c.k)
		if err != nil || fmt.Sprint(ks) != c.want {
			e.Errorf("Partitionings(q, %d) = %v, %v; want %s", c.k, ks, err, c.want)
		}
	}
	if ks, err := e.s.Partitionings(e.ctx, e.name("other"), 1); err != nil || fmt.Sprint(ks) != "[1]" {
		e.Errorf("Partitionings(other, 1) = %v, %v; want [1]", ks, err)
	}
}

// queuePartitionsAreQueues: each partition is a queue of its own: what is
// enqueued in one is claimed, counted and acked there only.
func queuePartitionsAreQueues(e *env) {
	q := e.name("q")
	p0, p1 := e.s.PartitionName(q, 0, 2), e.s.PartitionName(q, 1, 2)
	a, b := msg("a"), msg("b")
	e.enqueue(p0, a)
	e.enqueue(p1, b)
	for _, name := range []string{q, p0, p1} {
		st, err := e.s.Stats(e.ctx, name)
		want := store.QueueStats{Ready: 1}
		if name == q {
			want = store.QueueStats{}
		}
		if err != nil || st != want {
			e.Errorf("Stats(%q) = %+v, %v; want %+v", name, st, err, want)
		}
	}
	got := e.claim(p1, 10, time.Minute)
	e.wantIDs("partition 1", got.Messages, b)
	if acked, err := e.s.Ack(e.ctx, p0, []string{got.Messages[0].Receipt}); err != nil || acked[0] {
		e.Errorf("Ack of partition 1's receipt in partition 0 = %v, %v; want not acked", acked, err)
	}
	if acked, err := e.s.Ack(e.ctx, p1, []string{got.Messages[0].Receipt}); err != nil || !acked[0] {
		e.Errorf("Ack in partition 1 = %v, %v; want acked", acked, err)
	}
	e.wantIDs("partition 0", e.claim(p0, 10, time.Minute).Messages, a)
}
