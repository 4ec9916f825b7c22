package linearizability

// Search hints: constraints that every valid linearization of a history
// satisfies, derived from the history itself, which spare porcupine's
// search the branches that cannot succeed.
//
// Why: porcupine tries operations in the order of their calls, so it
// linearizes a Release (or a grant) as early as it can; the operations that
// started after that Release's call but saw the lock still held then fail,
// but only when they return, after the search has linearized many more
// operations that leave the state as it is (GetLock, a Lock not acquired, a
// Release with a stale token); it then backtracks through every order of
// those before undoing the Release: 2^k steps for k of them. At a latency
// spike, with 16 clients, k reaches 20 and the check of a few thousand
// operations takes minutes.
//
// The lock's life, in a valid linearization, is a sequence of phases in the
// order of the fences (every grant's fence exceeds the ones before): phase 0
// free, phase 1 held by the grant of the lowest fence, phase 2 free after its
// release, phase 3 held by the next grant, and so on. Phase 2k+1 can only lie
// between the call of grant k and the return of its release, phase 2k+2
// between the call of that release and the return of grant k+1. An operation
// that leaves the state as it is takes effect within its call and return, in
// a phase that lies there and that fits its answer (GetLock held with fence
// F: the phase of F; a Lock not acquired naming X: a phase held by X; GetLock
// free: a free phase; a Renew or Release refused: any phase but that of its
// token). The hint gives it the window of the phases that fit, [Lo, Hi]; the
// model refuses it outside, and refuses to end phase Hi (the grant or the
// release that starts the next) before it has taken effect. The model's
// state counts the operations that took effect before their deadlines, by
// deadline (state.Early).
//
// Hints only take linearizations away, so a history the hinted model accepts
// the plain one accepts too: an Ok never rests on them. They take away only
// linearizations that are not valid (given the history, a valid one goes
// through the phases in order and keeps every operation in its window), so
// the hinted model accepts every history the plain one does, and an Illegal
// does not rest on them either; the tests check that the two agree. A
// partition with an operation of unknown outcome gets no hints (a grant
// nobody saw would be a phase the history does not show), nor does one
// whose grants and releases do not make such a sequence (the plain model
// rejects it anyway).

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/anishathalye/porcupine"
)

// hintWidth bounds the windows: an operation whose window spans more phases
// gets no hint.
const hintWidth = 16

// hint constrains where an operation may take effect.
type hint struct {
	// Observes: the operation takes effect in a phase in [Lo, Hi], and
	// before phase Hi ends.
	Observes bool
	Lo, Hi   int
	// Ends: the operation ends phase Phase, after the Need operations whose
	// window ends there.
	Ends  bool
	Phase int
	Need  uint16
}

func (h hint) String() string {
	switch {
	case h.Observes && h.Lo == h.Hi:
		return fmt.Sprintf(" [phase %d]", h.Lo)
	case h.Observes:
		return fmt.Sprintf(" [phases %d-%d]", h.Lo, h.Hi)
	case h.Ends:
		return fmt.Sprintf(" [ends phase %d, after %d]", h.Phase, h.Need)
	}
	return ""
}

// withHints returns a copy of history whose operations carry hints.
func withHints(history []porcupine.Operation) []porcupine.Operation {
	out := slices.Clone(history)
	byName := map[string][]int{}
	for i, op := range out {
		n := op.Input.(input).Name
		byName[n] = append(byName[n], i)
	}
	for _, idx := range byName {
		hintPartition(out, idx)
	}
	return out
}

// span is a closed interval of time.
type span struct{ from, to int64 }

func (a span) overlaps(b span) bool { return a.from <= b.to && b.from <= a.to }

// hintPartition sets the hints of the operations out[idx], of one lock.
func hintPartition(out []porcupine.Operation, idx []int) {
	type grant struct {
		op      int // index in out of the Lock that acquired
		release int // index of the Release that released it; -1: none
		fence   uint64
		owner   string
	}
	var grants []grant
	for _, i := range idx {
		in, o := out[i].Input.(input), out[i].Output.(output)
		if o.Unknown {
			return
		}
		if in.Kind == opLock && o.Acquired {
			grants = append(grants, grant{op: i, release: -1, fence: o.Fence, owner: in.Owner})
		}
	}
	slices.SortFunc(grants, func(a, b grant) int { return cmp.Compare(a.fence, b.fence) })
	byToken := map[string]int{} // token → index in grants
	for k, g := range grants {
		tok := out[g.op].Output.(output).Token
		if _, dup := byToken[tok]; dup || k > 0 && grants[k-1].fence == g.fence {
			return // a token or a fence granted twice
		}
		byToken[tok] = k
	}
	for _, i := range idx {
		in, o := out[i].Input.(input), out[i].Output.(output)
		if in.Kind != opRelease || !o.Released {
			continue
		}
		k, ok := byToken[in.Token]
		if !ok || grants[k].release >= 0 {
			return // a release of a token never granted, or released twice
		}
		grants[k].release = i
	}
	for k := range len(grants) - 1 {
		if grants[k].release < 0 {
			return // held until the end, and yet granted again
		}
	}

	// Where each phase can lie, at the widest.
	const forever = math.MaxInt64
	phases := []span{{math.MinInt64, forever}}
	for k, g := range grants {
		phases[2*k].to = out[g.op].Return
		phases = append(phases, span{out[g.op].Call, forever})
		if g.release >= 0 {
			phases[2*k+1].to = out[g.release].Return
			phases = append(phases, span{out[g.release].Call, forever})
		}
	}
	heldBy := func(p int) *grant { // nil for a free phase
		if p%2 == 0 {
			return nil
		}
		return &grants[p/2]
	}

	// The windows of the operations that leave the state as it is.
	need := make([]uint16, len(phases))
	for _, i := range idx {
		in, o := out[i].Input.(input), out[i].Output.(output)
		var fits func(g *grant) bool
		switch in.Kind {
		case opGet:
			if o.Held {
				fits = func(g *grant) bool { return g != nil && g.fence == o.Fence }
			} else {
				fits = func(g *grant) bool { return g == nil }
			}
		case opLock:
			if o.Acquired {
				continue
			}
			fits = func(g *grant) bool { return g != nil && g.owner == o.Holder }
		case opRenew:
			if o.OK {
				fits = func(g *grant) bool { return g != nil && out[g.op].Output.(output).Token == in.Token }
			} else {
				fits = func(g *grant) bool { return g == nil || out[g.op].Output.(output).Token != in.Token }
			}
		case opRelease:
			if o.Released {
				continue
			}
			fits = func(g *grant) bool { return g == nil || out[g.op].Output.(output).Token != in.Token }
		}
		when := span{out[i].Call, out[i].Return}
		lo, hi := -1, -1
		for p, sp := range phases {
			if sp.overlaps(when) && fits(heldBy(p)) {
				if lo < 0 {
					lo = p
				}
				hi = p
			}
		}
		if lo < 0 || hi-lo >= hintWidth || need[hi] == math.MaxUint16 {
			continue // no phase fits: the plain model rejects it anyway
		}
		in.Hint = hint{Observes: true, Lo: lo, Hi: hi}
		out[i].Input = in
		need[hi]++
	}

	// The ends of phases: grant k ends phase 2k, its release phase 2k+1.
	ends := func(i, p int) {
		in := out[i].Input.(input)
		in.Hint = hint{Ends: true, Phase: p, Need: need[p]}
		out[i].Input = in
	}
	for k, g := range grants {
		ends(g.op, 2*k)
		if g.release >= 0 {
			ends(g.release, 2*k+1)
		}
	}
}
