package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// The cases of what a store keeps: a name nobody holds, waits for or keeps
// a lock-delay on leaves nothing behind once its idle name ttl has passed
// (its fence counter included), fences stay above every fence the name
// had after that, reads create nothing, and a queue's cap. They need the
// harness's Residue (and Forget, where the store forgets by itself only in
// real time).
func residueTests() []test {
	return []test{
		{"IdleNamesLeaveNothing", residueIdleNames},
		{"IdleNameSessionLockDelay", residueLockDelay},
		{"FenceAfterNameForgotten", residueFenceAfterForgotten},
		{"ReadsCreateNothing", residueReads},
		{"QueueFull", residueQueueFull},
	}
}

// residue returns those of names the store would still keep after horizon.
func (e *env) residue(horizon time.Duration, names ...string) []string {
	e.Helper()
	if e.h.Residue == nil {
		e.Fatal("the harness has no Residue: every backend must say what it keeps")
	}
	got, err := e.h.Residue(horizon, names...)
	noErr(e, "Residue", err)
	slices.Sort(got)
	return got
}

// wantNoResidue checks that the store keeps nothing of names after
// horizon.
func (e *env) wantNoResidue(what string, horizon time.Duration, names ...string) {
	e.Helper()
	if got := e.residue(horizon, names...); len(got) > 0 {
		e.Errorf("%s: the store keeps %v beyond %v", what, got, horizon)
	}
}

// idleTTL is the harness's idle name ttl.
func (e *env) idleTTL() time.Duration {
	if e.h.IdleNameTTL > 0 {
		return e.h.IdleNameTTL
	}
	return time.Hour
}

// residueIdleNames: every kind of name, held and let go in every way,
// leaves nothing once it has been idle for the idle name ttl; while a
// name is held past that, the store keeps it (so the check can fail).
func residueIdleNames(e *env) {
	idle := e.idleTTL()
	lock, shared, sem, elect, waited := e.name("lock"), e.name("shared"), e.name("sem"), e.name("elect"), e.name("waited")
	all := []string{lock, shared, sem, elect, waited}

	r := exclusiveReq(lock, "o", 2*idle)
	e.grant(r)
	if got := e.residue(idle, lock); len(got) == 0 {
		e.Errorf("a lock held for %v more: the store keeps nothing of it beyond %v", 2*idle, idle)
	}
	e.free(r)

	s1, s2 := sharedReq(shared, "s1", time.Minute), sharedReq(shared, "s2", time.Minute)
	e.grant(s1)
	e.grant(s2)
	e.free(s1)
	e.free(s2)

	p1, p2 := permitReq(sem, "p1", 2, time.Minute), permitReq(sem, "p2", 2, time.Minute)
	e.grant(p1)
	e.grant(p2)
	e.free(p1)
	e.free(p2)

	id := token.New()
	_, err := e.s.CreateSession(e.ctx, id, time.Minute, 0, 0)
	noErr(e, "CreateSession", err)
	c := campaignReq(elect, id, "v")
	e.elect(c)
	if !e.resign(elect, c.Token) {
		e.Fatal("Resign = false, want true")
	}

	h := exclusiveReq(waited, "holder", time.Minute)
	e.grant(h)
	w := waiting(exclusiveReq(waited, "waiter", time.Minute), newInstance())
	e.refused("a waiter", w, refusal{holder: "holder", expire: e.now().Add(time.Minute), retryAt: e.now().Add(time.Minute), queued: true})
	e.leave(w)
	e.free(h)

	e.wantNoResidue("released, resigned and left at once", idle, all...)
}

// residueLockDelay: a session-bound lock whose session expired keeps its
// name for the lock-delay, then leaves nothing once idle for the ttl.
func residueLockDelay(e *env) {
	idle := e.idleTTL()
	n := e.name("delayed")
	const delay = 10 * time.Second
	id := e.sessionWithDelay(5*time.Second, delay)
	e.grant(inSession(exclusiveReq(n, "bound", 0), id))
	e.advance(5 * time.Second)
	// Nobody touches the name: the store applies the delay by itself.
	if got := e.residue(delay/2, n); len(got) == 0 {
		e.Errorf("within its lock-delay: the store keeps nothing of the name")
	}
	e.wantNoResidue("after its lock-delay", delay+idle, n)
}

// residueFenceAfterForgotten: once a name has been idle past the idle name
// ttl and the store forgot it, its next fence is still greater than every
// fence it had, even the ones a counter pushed past the clock; a clock set
// back by less than the ttl while the name is remembered does not lower
// fences either.
func residueFenceAfterForgotten(e *env) {
	idle := e.idleTTL()
	lock, sem := e.name("lock"), e.name("sem")
	req := func(n, owner string) store.HoldRequest {
		if n == sem {
			return permitReq(n, owner, 1, time.Minute)
		}
		return exclusiveReq(n, owner, time.Minute)
	}
	top := map[string]uint64{}
	grant := func(what, n string) {
		e.Helper()
		r := req(n, what)
		g := e.grant(r)
		if g.Fence <= top[n] {
			e.Errorf("%s %s: fence %d, want > %d", r.Kind, what, g.Fence, top[n])
		}
		top[n] = g.Fence
		e.free(r)
	}
	// Several grants in one microsecond: the counter runs ahead of the
	// clock's floor.
	for i := range 4 {
		grant(fmt.Sprint("in one microsecond ", i), lock)
		grant(fmt.Sprint("in one microsecond ", i), sem)
	}
	e.clk.Set(e.now().Add(-idle / 2))
	grant("after the clock went back", lock)
	grant("after the clock went back", sem)
	e.wantNoResidue("released", idle, lock, sem)
	e.advance(idle/2 + idle + time.Second)
	if e.h.Forget != nil {
		noErr(e, "Forget", e.h.Forget(lock, sem))
	}
	grant("after the name was forgotten", lock)
	grant("after the name was forgotten", sem)
}

// residueReads: reading a name or a queue nobody uses creates nothing.
func residueReads(e *env) {
	lock, sem, elect, q := e.name("lock"), e.name("sem"), e.name("elect"), e.name("q")
	e.holds(store.HoldLock, lock)
	e.holds(store.HoldSemaphore, sem)
	e.checkFence(store.HoldLock, lock, 1)
	e.leader(elect)
	e.changes(elect, 0)
	_, err := e.s.Stats(e.ctx, q)
	noErr(e, "Stats", err)
	cl, err := e.s.Claim(e.ctx, q, store.Claim{Tokens: []string{token.New()}, Visibility: time.Minute})
	noErr(e, "Claim", err)
	eq(e, "messages claimed from nothing", len(cl.Messages), 0)
	acked, err := e.s.Ack(e.ctx, q, []string{store.MakeReceipt("m", 1, token.New())})
	noErr(e, "Ack", err)
	eq(e, "acked", len(acked) == 1 && !acked[0], true)
	_, err = e.s.Nack(e.ctx, q, store.MakeReceipt("m", 1, token.New()), 0)
	isErr(e, "Nack", err, store.ErrReceiptExpired)
	_, err = e.s.ExtendClaim(e.ctx, q, store.MakeReceipt("m", 1, token.New()), time.Minute)
	isErr(e, "ExtendClaim", err, store.ErrReceiptExpired)
	_, err = e.s.ListDead(e.ctx, q, store.DeadPos{}, 10, 10)
	noErr(e, "ListDead", err)
	_, err = e.s.Redrive(e.ctx, q, 10)
	noErr(e, "Redrive", err)
	_, err = e.s.RedriveIDs(e.ctx, q, []string{"m"})
	noErr(e, "RedriveIDs", err)
	_, _, err = e.s.PurgeDead(e.ctx, q, 10)
	noErr(e, "PurgeDead", err)
	e.wantNoResidue("reads", 0, lock, sem, elect, q)
}

// residueQueueFull: a queue holds at most MaxMessages, dead letters
// included; a duplicate is still answered when it is full, and a message
// acked makes room.
func residueQueueFull(e *env) {
	q := e.name("q")
	enqueue := func(dedup string) (store.Enqueued, error) {
		return e.s.Enqueue(e.ctx, q, store.NewMessage{ID: token.New(), Payload: []byte("p"), MaxAttempts: 1,
			DedupID: dedup, DedupWindow: time.Hour, MaxMessages: 3})
	}
	first, err := enqueue("d")
	noErr(e, "Enqueue", err)
	for range 2 {
		_, err := enqueue("")
		noErr(e, "Enqueue", err)
	}
	_, err = enqueue("")
	isErr(e, "Enqueue into a full queue", err, store.ErrQueueFull)
	dup, err := enqueue("d")
	noErr(e, "a duplicate into a full queue", err)
	eq(e, "duplicate", dup.Duplicate && dup.ID == first.ID, true)
	// A claim whose only attempt runs out: a dead letter, still counted.
	cl, err := e.s.Claim(e.ctx, q, store.Claim{Tokens: []string{token.New(), token.New()}, Visibility: time.Second})
	noErr(e, "Claim", err)
	eq(e, "claimed", len(cl.Messages), 2)
	e.advance(2 * time.Second)
	st, err := e.s.Stats(e.ctx, q)
	noErr(e, "Stats", err)
	eq(e, "dead", st.Dead, int64(2))
	_, err = enqueue("")
	isErr(e, "Enqueue with two dead letters and one ready", err, store.ErrQueueFull)
	n, _, err := e.s.PurgeDead(e.ctx, q, 10)
	noErr(e, "PurgeDead", err)
	eq(e, "purged", n, int64(2))
	for range 2 {
		_, err := enqueue("")
		noErr(e, "Enqueue after a purge", err)
	}
	_, err = enqueue("")
	isErr(e, "Enqueue into a full queue again", err, store.ErrQueueFull)
}
