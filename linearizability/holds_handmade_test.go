package linearizability

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/internal/store"
)

// Hand-made histories of holds, to show what the holds model accepts and
// what it rejects.

// holdsMade builds a history of one name, "x": ops in order, each with its
// client, call and return time (return -1: never, an unknown outcome).
type holdsMade struct {
	kind store.HoldKind
	ops  []porcupine.Operation
}

func (b *holdsMade) add(c int, call, ret int64, in hin, out hout) *holdsMade {
	in.Name, in.Kind, in.ID = "x", b.kind, len(b.ops)+1
	if ret < 0 {
		ret = never
	}
	b.ops = append(b.ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
	return b
}

// acq asks for a lock (shared or not; MaxHolders 2) or a semaphore permit
// (limit), with token tok and, if not "", ticket.
func (b *holdsMade) acq(c int, call, ret int64, tok string, shared bool, limit int, ticket string, out hout) *holdsMade {
	in := hin{Op: hAcquire, Owner: owner(c), Token: tok, Shared: shared, Limit: limit, Ticket: ticket}
	if b.kind == store.HoldLock {
		in.MaxHolders = 2
	}
	return b.add(c, call, ret, in, out)
}

func (b *holdsMade) rel(c int, call, ret int64, tok string, ok bool) *holdsMade {
	return b.add(c, call, ret, hin{Op: hRelease, Token: tok}, hout{Released: ok})
}

func (b *holdsMade) get(c int, call, ret int64, waiters, limit int, hs ...hholder) *holdsMade {
	out := hout{Info: hs, Waiters: waiters, Limit: limit, Held: len(hs) > 0}
	if len(hs) > 0 {
		out.Owner, out.Fence = hs[0].Owner, hs[0].Fence
	}
	return b.add(c, call, ret, hin{Op: hGet}, out)
}

func owner(c int) string { return "c" + string(rune('0'+c)) }

func granted(fence uint64, holders, limit int) hout {
	return hout{Acquired: true, Fence: fence, Holders: holders, Limit: limit}
}

// refused: not acquired, blocked by the holder of client c (-1: by no
// holder), queued or not.
func refused(c int, queued bool) hout {
	if c < 0 {
		return hout{Queued: queued}
	}
	return hout{Holder: owner(c), RetryAt: true, Queued: queued}
}

const excl, shared = false, true

func TestHoldsHandMade(t *testing.T) {
	lock := func() *holdsMade { return &holdsMade{kind: store.HoldLock} }
	sem := func() *holdsMade { return &holdsMade{kind: store.HoldSemaphore} }
	for _, tc := range []struct {
		name string
		h    *holdsMade
		want porcupine.CheckResult
	}{
		{"two readers, a writer refused", lock().
			acq(0, 0, 10, "A", shared, 0, "", granted(5, 1, 0)).
			acq(1, 5, 15, "B", shared, 0, "", granted(6, 2, 0)).
			acq(2, 20, 30, "C", excl, 0, "", refused(1, false)).
			get(3, 20, 30, 0, 0, hholder{Owner: "c0", Fence: 5, Shared: true}, hholder{Owner: "c1", Fence: 6, Shared: true}).
			rel(0, 40, 50, "A", true).rel(1, 40, 50, "B", true).
			acq(2, 60, 70, "C2", excl, 0, "", granted(7, 1, 0)), porcupine.Ok},
		{"a reader beside a writer", lock().
			acq(0, 0, 10, "A", excl, 0, "", granted(5, 1, 0)).
			acq(1, 20, 30, "B", shared, 0, "", granted(6, 2, 0)), porcupine.Illegal},
		{"a writer beside a reader", lock().
			acq(0, 0, 10, "A", shared, 0, "", granted(5, 1, 0)).
			acq(1, 20, 30, "B", excl, 0, "", granted(6, 1, 0)), porcupine.Illegal},
		{"more readers than MaxHolders", lock().
			acq(0, 0, 10, "A", shared, 0, "", granted(5, 1, 0)).
			acq(1, 0, 10, "B", shared, 0, "", granted(6, 2, 0)).
			acq(2, 20, 30, "C", shared, 0, "", granted(7, 3, 0)), porcupine.Illegal},
		{"a reader refused naming a reader that does not block it", lock().
			acq(0, 0, 10, "A", shared, 0, "", granted(5, 1, 0)).
			acq(1, 20, 30, "B", excl, 0, "tB", refused(0, true)).
			acq(2, 40, 50, "C", shared, 0, "", refused(0, false)), porcupine.Illegal},
		{"a reader behind a waiting writer", lock().
			acq(0, 0, 10, "A", shared, 0, "", granted(5, 1, 0)).
			acq(1, 20, 30, "B", excl, 0, "tB", refused(0, true)).
			acq(2, 40, 50, "C", shared, 0, "", refused(-1, false)).
			rel(0, 60, 70, "A", true).
			acq(1, 80, 90, "B", excl, 0, "tB", granted(6, 1, 0)), porcupine.Ok},
		{"a reader jumps a waiting writer", lock().
			acq(0, 0, 10, "A", shared, 0, "", granted(5, 1, 0)).
			acq(1, 20, 30, "B", excl, 0, "tB", refused(0, true)).
			acq(2, 40, 50, "C", shared, 0, "", granted(6, 2, 0)), porcupine.Illegal},
		{"waiters granted out of order", lock().
			acq(0, 0, 10, "A", excl, 0, "", granted(5, 1, 0)).
			acq(1, 20, 30, "B", excl, 0, "tB", refused(0, true)).
			acq(2, 40, 50, "C", excl, 0, "tC", refused(0, true)).
			rel(0, 60, 70, "A", true).
			acq(2, 80, 90, "C", excl, 0, "tC", granted(6, 1, 0)), porcupine.Illegal},
		{"waiters granted in order, after one leaves", lock().
			acq(0, 0, 10, "A", excl, 0, "", granted(5, 1, 0)).
			acq(1, 20, 30, "B", excl, 0, "tB", refused(0, true)).
			acq(2, 40, 50, "C", excl, 0, "tC", refused(0, true)).
			get(3, 55, 56, 2, 0, hholder{Owner: "c0", Fence: 5}).
			rel(0, 60, 70, "A", true).
			add(1, 72, 74, hin{Op: hLeave, Ticket: "tB"}, hout{}).
			acq(2, 80, 90, "C", excl, 0, "tC", granted(6, 1, 0)), porcupine.Ok},
		{"a writer misreported as a reader", lock().
			acq(0, 0, 10, "A", excl, 0, "", granted(5, 1, 0)).
			get(1, 20, 30, 0, 0, hholder{Owner: "c0", Fence: 5, Shared: true}), porcupine.Illegal},
		{"a semaphore full, then not", sem().
			acq(0, 0, 10, "A", excl, 2, "", granted(5, 1, 2)).
			acq(1, 0, 10, "B", excl, 2, "", granted(6, 2, 2)).
			acq(2, 20, 30, "C", excl, 2, "", refused(1, false)).
			acq(3, 20, 30, "D", excl, 3, "", hout{Mismatch: true}).
			get(3, 20, 30, 0, 2, hholder{Owner: "c0", Fence: 5}, hholder{Owner: "c1", Fence: 6}).
			rel(0, 40, 50, "A", true).
			acq(2, 60, 70, "C2", excl, 2, "", granted(7, 2, 2)).
			rel(1, 80, 90, "B", true).rel(2, 80, 90, "C2", true).
			acq(3, 100, 110, "D2", excl, 3, "", granted(8, 1, 3)), porcupine.Ok},
		{"a permit refused behind a waiter, naming a holder or not", sem().
			acq(0, 0, 10, "A", excl, 2, "", granted(5, 1, 2)).
			acq(1, 20, 30, "B", excl, 2, "tB", hout{Queued: true}). // cannot be: it fits
			rel(0, 40, 50, "A", true), porcupine.Illegal},
		{"a permit refused behind a waiter", sem().
			acq(0, 0, 10, "A", excl, 2, "", granted(5, 1, 2)).
			acq(1, 0, 10, "B", excl, 2, "", granted(6, 2, 2)).
			acq(2, 20, 30, "C", excl, 2, "tC", refused(0, true)).
			rel(0, 40, 50, "A", true).
			acq(3, 60, 70, "D", excl, 2, "", refused(1, false)).
			acq(3, 60, 70, "E", excl, 2, "", refused(-1, false)).
			acq(2, 80, 90, "C", excl, 2, "tC", granted(7, 2, 2)), porcupine.Ok},
		{"limit+1 holders", sem().
			acq(0, 0, 10, "A", excl, 2, "", granted(5, 1, 2)).
			acq(1, 0, 10, "B", excl, 2, "", granted(6, 2, 2)).
			acq(2, 20, 30, "C", excl, 2, "", granted(7, 3, 2)), porcupine.Illegal},
		{"another limit while held", sem().
			acq(0, 0, 10, "A", excl, 2, "", granted(5, 1, 2)).
			acq(1, 20, 30, "B", excl, 3, "", granted(6, 2, 3)), porcupine.Illegal},
		{"a permit jumps the queue", sem().
			acq(0, 0, 10, "A", excl, 2, "", granted(5, 1, 2)).
			acq(1, 0, 10, "B", excl, 2, "", granted(6, 2, 2)).
			acq(2, 20, 30, "C", excl, 2, "tC", refused(0, true)).
			rel(0, 40, 50, "A", true).
			acq(3, 60, 70, "D", excl, 2, "", granted(7, 2, 2)), porcupine.Illegal},
		{"a fence going back", sem().
			acq(0, 0, 10, "A", excl, 2, "", granted(5, 1, 2)).
			rel(0, 20, 30, "A", true).
			acq(1, 40, 50, "B", excl, 2, "", granted(4, 1, 2)), porcupine.Illegal},
		{"a grant of unknown outcome, seen later", sem().
			acq(0, 0, -1, "A", excl, 1, "", hout{Unknown: true}).
			acq(1, 20, 30, "B", excl, 1, "", refused(0, false)).
			get(2, 40, 50, 0, 1, hholder{Owner: "c0", Fence: 9}), porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, "plain", holdsModel(hvariant{}), tc.h.ops, tc.want)
		})
	}
}

// TestWrongHoldsModelIsCaught: a model that lets readers past waiting
// writers rejects a correct history where a reader waits behind one.
func TestWrongHoldsModelIsCaught(t *testing.T) {
	ops := (&holdsMade{kind: store.HoldLock}).
		acq(0, 0, 10, "A", shared, 0, "", granted(5, 1, 0)).
		acq(1, 20, 30, "B", excl, 0, "tB", refused(0, true)).
		acq(2, 40, 50, "C", shared, 0, "", refused(-1, false)).ops
	check(t, "right model", holdsModel(hvariant{}), ops, porcupine.Ok)
	check(t, "wrong model", holdsModel(hvariant{sharedIgnoresTickets: true}), ops, porcupine.Illegal)
}
