package linearizability

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Hand-made histories, to show what the model accepts and what it rejects.

// handMade builds a history of one lock, "x": ops in order, each with its client,
// call and return time (return -1: never, an unknown outcome).
type handMade struct{ ops []porcupine.Operation }

func (b *handMade) add(client int, call, ret int64, in input, out output) *handMade {
	in.Name = "x"
	in.ID = len(b.ops) + 1
	if in.Kind == opLock {
		in.Owner = "c" + strconv.Itoa(client)
	}
	if ret < 0 {
		ret = never
	}
	b.ops = append(b.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	return b
}

func (b *handMade) lock(c int, call, ret int64, out output) *handMade {
	return b.add(c, call, ret, input{Kind: opLock}, out)
}

// lockUnknown adds a Lock of unknown outcome whose clean-up may come at any
// later moment, as the recorder does (input.Orphan; TestHandMadeHistories
// checks it as a Lock and a clean-up too, see unfold).
func (b *handMade) lockUnknown(c int, call int64) *handMade {
	return b.add(c, call, -1, input{Kind: opLock, Orphan: true}, output{Unknown: true})
}

func (b *handMade) renew(c int, call, ret int64, tok string, out output) *handMade {
	return b.add(c, call, ret, input{Kind: opRenew, Token: tok}, out)
}

func (b *handMade) release(c int, call, ret int64, tok string, out output) *handMade {
	return b.add(c, call, ret, input{Kind: opRelease, Token: tok}, out)
}

func (b *handMade) get(c int, call, ret int64, out output) *handMade {
	return b.add(c, call, ret, input{Kind: opGet}, out)
}

func acquired(tok string, fence uint64) output {
	return output{Acquired: true, Token: tok, Fence: fence}
}
func notAcquired(holder string) output { return output{Holder: holder} }
func renewed(fence uint64) output      { return output{OK: true, Fence: fence} }
func released(ok bool) output          { return output{Released: ok} }
func heldBy(owner string, fence uint64) output {
	return output{Held: true, Owner: owner, Fence: fence}
}

var (
	notHeld = output{}
	free    = output{}
	unknown = output{Unknown: true}
)

// handMadeCase is one hand-made history and the verdict the model must give.
type handMadeCase struct {
	name string
	h    *handMade
	want porcupine.CheckResult
}

// TestHandMadeHistories checks the model on hand-made histories, plain,
// with hints and unfolded (see unfold), one group of them per subtest.
func TestHandMadeHistories(t *testing.T) {
	for _, g := range []struct {
		name  string
		cases []handMadeCase
	}{
		{"grants and fences", handMadeGrants()},
		{"releases and renewals", handMadeReleases()},
		{"GetLock", handMadeGetLocks()},
		{"unknown outcomes", handMadeUnknown()},
	} {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.cases {
				t.Run(tc.name, func(t *testing.T) {
					check(t, "plain", model(variant{}), tc.h.ops, tc.want)
					check(t, "hinted", model(variant{}), withHints(tc.h.ops), tc.want)
					check(t, "unfolded", model(variant{}), unfold(tc.h.ops), tc.want)
				})
			}
		})
	}
}

// handMadeGrants: the Lock calls: who is granted, who is told the holder, and the fences they get.
func handMadeGrants() []handMadeCase {
	return []handMadeCase{
		{"grant, release, grant", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			renew(0, 12, 14, "A", renewed(5)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, acquired("B", 6)).
			get(2, 60, 70, heldBy("c1", 6)), porcupine.Ok},
		{"a Release and a grant concurrent", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 40, "A", released(true)).
			lock(1, 25, 35, acquired("B", 6)).
			lock(2, 26, 34, notAcquired("c0")), porcupine.Ok},
		{"contenders see the holder", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			lock(1, 5, 15, notAcquired("c0")).
			lock(0, 20, 30, notAcquired("c0")).
			get(2, 20, 30, heldBy("c0", 5)).
			release(1, 20, 30, "A-stale", released(false)).
			renew(2, 31, 32, "B", notHeld).
			get(2, 35, 36, heldBy("c0", 5)), porcupine.Ok},
		{"two grants without a release", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			lock(1, 20, 30, acquired("B", 6)), porcupine.Illegal},
		{"two concurrent grants", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			lock(1, 5, 15, acquired("B", 6)), porcupine.Illegal},
		{"a fence issued twice", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, acquired("B", 5)), porcupine.Illegal},
		{"a fence going back", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, acquired("B", 4)), porcupine.Illegal},
		{"not acquired when free, naming a holder", new(handMade).
			lock(0, 0, 10, notAcquired("c9")), porcupine.Illegal},
		{"not acquired when free, naming none: tickets waited ahead", new(handMade).
			lock(0, 0, 10, notAcquired("")), porcupine.Ok},
		{"naming no holder while held", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			lock(1, 20, 30, notAcquired("")), porcupine.Illegal},
		{"the wrong holder named", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			lock(1, 20, 30, notAcquired("c2")), porcupine.Illegal},
		{"not acquired after the release returned", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, notAcquired("c0")), porcupine.Illegal},
		{"not acquired, concurrent with the release", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 25, 50, notAcquired("c0")), porcupine.Ok},
		{"a Lock refused by the holder it raced with", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 25, 60, acquired("B", 6)).
			lock(2, 26, 59, notAcquired("c1")).
			get(2, 61, 62, heldBy("c1", 6)), porcupine.Ok},
	}
}

// handMadeReleases: Release and Renew: which token may, and what they answer.
func handMadeReleases() []handMadeCase {
	return []handMadeCase{
		{"a stale token releases", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, acquired("B", 6)).
			release(0, 60, 70, "A", released(true)), porcupine.Illegal},
		{"a random token releases", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(1, 20, 30, "R", released(true)), porcupine.Illegal},
		{"the holder's Release refused", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(false)), porcupine.Illegal},
		{"a Renew after the release", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			renew(0, 40, 50, "A", renewed(5)), porcupine.Illegal},
		{"a Renew with another fence", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			renew(0, 20, 30, "A", renewed(7)), porcupine.Illegal},
		{"the holder's Renew refused", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			renew(0, 20, 30, "A", notHeld), porcupine.Illegal},
		{"one token released twice", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			release(1, 40, 50, "A", released(true)), porcupine.Illegal},
		{"one token released by two concurrent calls", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			release(1, 20, 30, "A", released(true)), porcupine.Illegal},
		{"a stale token renews the next holder's lock", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, acquired("B", 6)).
			renew(0, 60, 70, "A", renewed(6)), porcupine.Illegal},
	}
}

// handMadeGetLocks: what a GetLock may report, alone or spanning other calls.
func handMadeGetLocks() []handMadeCase {
	return []handMadeCase{
		{"a holder out of nowhere", new(handMade).
			get(0, 0, 10, heldBy("c0", 5)), porcupine.Illegal},
		{"a stale GetLock", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, 30, "A", released(true)).
			get(1, 40, 50, heldBy("c0", 5)), porcupine.Illegal},
		{"free while held", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			get(1, 20, 30, free), porcupine.Illegal},
		{"a GetLock spanning two holds", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			get(2, 5, 100, heldBy("c1", 6)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, acquired("B", 6)), porcupine.Ok},
		{"a GetLock spanning two holds, with a fence neither had", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			get(2, 5, 100, heldBy("c1", 7)).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, acquired("B", 6)), porcupine.Illegal},
		{"the holder's fence misreported", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			get(1, 20, 30, heldBy("c0", 6)), porcupine.Illegal},
		{"a GetLock that saw the lock free between two holds", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			get(2, 5, 100, free).
			release(0, 20, 30, "A", released(true)).
			lock(1, 40, 50, acquired("B", 6)), porcupine.Ok},
		{"a GetLock saw it free, but it never was", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			get(2, 12, 100, free).
			renew(0, 20, 30, "A", renewed(5)).
			lock(1, 40, 50, notAcquired("c0")), porcupine.Illegal},
	}
}

// handMadeUnknown: calls that failed without an answer: they may or may not have taken effect.
func handMadeUnknown() []handMadeCase {
	return []handMadeCase{
		{"a failed Lock that granted, then cleaned up", new(handMade).
			lockUnknown(0, 0).
			get(1, 10, 20, heldBy("c0", 9)).
			lock(1, 30, 40, notAcquired("c0")).
			lock(2, 50, 60, acquired("B", 12)), porcupine.Ok},
		{"a failed Lock that did nothing", new(handMade).
			lockUnknown(0, 0).
			get(1, 10, 20, free).
			lock(2, 50, 60, acquired("B", 12)), porcupine.Ok},
		{"a failed Lock's grant, cleaned up, then seen again", new(handMade).
			lockUnknown(0, 0).
			get(1, 10, 20, heldBy("c0", 9)).
			get(1, 30, 40, free).
			get(2, 50, 60, heldBy("c0", 9)), porcupine.Illegal},
		{"a failed Lock's fence, then a lower one", new(handMade).
			lockUnknown(0, 0).
			get(1, 10, 20, heldBy("c0", 9)).
			lock(2, 50, 60, acquired("B", 8)), porcupine.Illegal},
		{"a failed Lock naming another owner", new(handMade).
			lockUnknown(0, 0).
			get(1, 10, 20, heldBy("c3", 9)), porcupine.Illegal},
		{"a failed Release that released", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, -1, "A", unknown).
			lock(1, 30, 40, acquired("B", 6)), porcupine.Ok},
		{"a failed Release that did not", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(0, 20, -1, "A", unknown).
			lock(1, 30, 40, notAcquired("c0")), porcupine.Ok},
		{"a failed Release of another token", new(handMade).
			lock(0, 0, 10, acquired("A", 5)).
			release(1, 20, -1, "R", unknown).
			lock(1, 30, 40, acquired("B", 6)), porcupine.Illegal},
	}
}

// TestWrongModelHandMade: a model that frees the lock on any Release rejects
// a correct history where a stale Release is refused and the holder keeps
// the lock.
func TestWrongModelHandMade(t *testing.T) {
	ops := new(handMade).
		lock(0, 0, 10, acquired("A", 5)).
		release(1, 20, 30, "A-stale", released(false)).
		lock(2, 40, 50, notAcquired("c0")).ops
	check(t, "plain", model(variant{}), ops, porcupine.Ok)
	check(t, "wrong model", model(variant{releaseFreesAlways: true}), ops, porcupine.Illegal)
}

// TestTimeoutIsAFailure: a check that runs out of time fails the test,
// whatever it wanted: porcupine's Unknown is never taken for a pass.
func TestTimeoutIsAFailure(t *testing.T) {
	defer func(d time.Duration) { checkTimeout = d }(checkTimeout)
	checkTimeout = 50 * time.Millisecond
	t.Setenv("TMPDIR", t.TempDir()) // for the visualization of the failure
	// A model that takes 10 ms a step, on a history of 40 operations.
	slow := porcupine.Model{
		Init: func() interface{} { return 0 },
		Step: func(s, _, _ interface{}) (bool, interface{}) {
			time.Sleep(10 * time.Millisecond)
			return true, s.(int) + 1
		},
	}
	var ops []porcupine.Operation
	for i := range 40 {
		ops = append(ops, porcupine.Operation{ClientId: i, Call: int64(2 * i), Return: int64(2*i + 1)})
	}
	for _, want := range []porcupine.CheckResult{porcupine.Ok, porcupine.Illegal} {
		ft := &failureTB{TB: t}
		check(ft, "slow", slow, ops, want)
		if !ft.failed {
			t.Errorf("want %s: a check that timed out did not fail the test", want)
		}
		t.Logf("want %s: failed, as it should: %s", want, ft.msg)
	}
}

// failureTB is a testing.TB that notes a failure instead of failing.
type failureTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *failureTB) Errorf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}

func (f *failureTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}
