package linearizability

// The sequential model of a lease lock without expiry, for porcupine.

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// kind is an operation of LockService.
type kind uint8

const (
	opLock kind = iota
	opRenew
	opRelease
	opGet
)

func (k kind) String() string {
	return [...]string{"Lock", "Renew", "Release", "GetLock"}[k]
}

// input is what a client asked.
type input struct {
	Kind  kind
	Name  string
	Owner string        // Lock: the caller's owner label
	Wait  time.Duration // Lock: how long it may wait
	Token string        // Renew, Release: the token sent
	// Which token Renew or Release sent, for the visualization: "own" (the
	// one the client believes it holds), "stale" (one it held before),
	// "random" (never granted) or "cleanup" (see cleanupToken).
	Which string
	ID    int  // the operation's number in its history
	Hint  hint // see hints_test.go; the zero hint constrains nothing
	// Orphan: a Lock of unknown outcome whose clean-up may take effect at
	// any later moment (see state.Orphan); its clean-up is not an
	// operation of the history.
	Orphan bool
}

// output is what the client was answered.
type output struct {
	// Unknown: the call failed (Err) and may or may not have taken effect.
	Unknown bool
	Err     string

	Acquired bool   // Lock
	Token    string // Lock: the token granted
	Holder   string // Lock not acquired: the holder's owner label
	Fence    uint64 // Lock acquired, Renew ok, GetLock held
	OK       bool   // Renew: renewed (false: LOCK_NOT_HELD)
	Released bool   // Release
	Held     bool   // GetLock
	Owner    string // GetLock: the holder's owner label
}

// state is the lock as the model sees it.
type state struct {
	Held  bool
	Token string // the holder's token
	Owner string // the holder's owner label
	// Fence is the holder's fence; 0 while held by a grant whose fence has
	// not been seen (a Lock of unknown outcome).
	Fence uint64
	// Last is the highest fence seen so far: a new grant's must exceed it.
	Last uint64
	// Phase and Early follow the search hints (hints_test.go): the index of
	// the phase the lock is in, and Early[i] the number of operations that
	// have taken effect and must do so before phase Phase+i ends. Both stay
	// zero without hints.
	Phase int
	Early [hintWidth]uint16
	// Orphan: held by a Lock of unknown outcome (input.Orphan) whose
	// clean-up may free it at any moment: before any later operation the
	// model lets it be free. That is the clean-up as an operation that never
	// returns, called when its Lock was (a Release of the Lock's token, the
	// identity unless that token holds the lock), without its cost: a
	// pending operation that never returns may be linearized before or after
	// each of the others, and a hundred of them made the checker's search
	// grow past its bound (TestUnknownOutcomes; TestOrphansAgree shows the
	// two agree).
	Orphan bool
}

func (s state) free() state { return state{Last: s.Last} }

// cleanupToken stands for the token of a Lock of unknown outcome (operation
// id): the client never saw it, but the server did, and tried to release it.
func cleanupToken(id int) string { return "?" + strconv.Itoa(id) }

// unfold returns history with the clean-up of every orphan Lock
// (input.Orphan) as an operation of its own, called when its Lock was and
// never returning, and no orphans: the history as it would be without
// state.Orphan, which the model must judge the same (TestOrphansAgree).
func unfold(history []porcupine.Operation) []porcupine.Operation {
	out := slices.Clone(history)
	id := 0
	for _, op := range history {
		id = max(id, op.Input.(input).ID)
	}
	for i, op := range history {
		in := op.Input.(input)
		if in.Kind != opLock || !in.Orphan {
			continue
		}
		in.Orphan = false
		out[i].Input = in
		id++
		cleanup := input{Kind: opRelease, Name: in.Name, Token: cleanupToken(in.ID), Which: "cleanup", ID: id}
		out = append(out, porcupine.Operation{ClientId: op.ClientId, Input: cleanup, Call: op.Call, Output: output{Unknown: true}, Return: never})
	}
	return out
}

// variant makes the model deliberately wrong, to show that a wrong model
// is caught.
type variant struct {
	// releaseFreesAlways: every Release frees the lock, whatever its token
	// (the answer must still be released == the token holds).
	releaseFreesAlways bool
}

// step returns every state the lock may be in after the operation, from s;
// none if the output is impossible from s.
func (v variant) step(s state, in input, out output) []state {
	h := in.Hint
	phase, early := s.Phase, s.Early
	switch {
	case h.Observes:
		if s.Phase < h.Lo || s.Phase > h.Hi {
			return nil
		}
		early[h.Hi-s.Phase]++
	case h.Ends:
		if s.Phase != h.Phase || s.Early[0] != h.Need {
			return nil
		}
		phase++
		copy(early[:], early[1:])
		early[hintWidth-1] = 0
	}
	next := v.step1(s, in, out)
	for i := range next {
		next[i].Phase, next[i].Early = phase, early
	}
	return next
}

// step1 is step without the hint's constraints.
func (v variant) step1(s state, in input, out output) []state {
	if s.Orphan {
		// The orphan's clean-up may have come before the operation.
		return append(v.apply(s, in, out), v.apply(s.free(), in, out)...)
	}
	return v.apply(s, in, out)
}

// apply is step1 from a state whose holder is not an orphan.
func (v variant) apply(s state, in input, out output) []state {
	holds := s.Held && in.Token == s.Token
	switch in.Kind {
	case opLock:
		if out.Unknown {
			if s.Held {
				return []state{s} // not acquired
			}
			// Not granted, or granted to a token only the server knows (its
			// clean-up release is an operation of its own).
			return []state{s, {Held: true, Token: cleanupToken(in.ID), Owner: in.Owner, Last: s.Last, Orphan: in.Orphan}}
		}
		if out.Acquired {
			if s.Held || out.Fence <= s.Last || out.Token == "" {
				return nil
			}
			return []state{{Held: true, Token: out.Token, Owner: in.Owner, Fence: out.Fence, Last: out.Fence}}
		}
		if !s.Held {
			// Free, yet refused: only tickets waiting ahead of the request
			// can do that (waiters are served in arrival order; a waiting
			// Lock's ticket lives from its first try to its grant or its
			// give-up), and such a refusal names no holder.
			if out.Holder != "" {
				return nil
			}
			return []state{s}
		}
		if out.Holder != s.Owner {
			return nil
		}
		return []state{s}

	case opRenew:
		if out.Unknown {
			return []state{s} // renewing changes nothing the model sees
		}
		if out.OK != holds {
			return nil
		}
		if out.OK {
			return learnFence(s, out.Fence)
		}
		return []state{s}

	case opRelease:
		if v.releaseFreesAlways {
			if !out.Unknown && out.Released != holds {
				return nil
			}
			return []state{s.free()}
		}
		if out.Unknown {
			if holds {
				return []state{s, s.free()}
			}
			return []state{s}
		}
		if out.Released != holds {
			return nil
		}
		if holds {
			return []state{s.free()}
		}
		return []state{s}

	case opGet:
		if out.Unknown {
			return []state{s}
		}
		if out.Held != s.Held {
			return nil
		}
		if !s.Held {
			return []state{s}
		}
		if out.Owner != s.Owner {
			return nil
		}
		return learnFence(s, out.Fence)
	}
	panic(fmt.Sprintf("unknown operation %d", in.Kind))
}

// learnFence checks a held lock's fence as Renew or GetLock report it; a
// grant of unknown outcome learns its fence from the first report.
func learnFence(s state, fence uint64) []state {
	if s.Fence != 0 {
		if fence != s.Fence {
			return nil
		}
		return []state{s}
	}
	if fence <= s.Last {
		return nil
	}
	s.Fence, s.Last = fence, fence
	return []state{s}
}

// hash is FNV-1a over the state's fields. porcupine hashes a state at every
// step of its search: formatting it (fmt) took most of a check's time.
func (s state) hash() uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	word := func(v uint64) {
		for range 8 {
			h = (h ^ v&0xff) * prime
			v >>= 8
		}
	}
	str := func(v string) {
		for i := range len(v) {
			h = (h ^ uint64(v[i])) * prime
		}
		word(uint64(len(v)))
	}
	if s.Held {
		word(1)
	} else {
		word(0)
	}
	str(s.Token)
	str(s.Owner)
	word(s.Fence)
	word(s.Last)
	word(uint64(s.Phase))
	if s.Orphan {
		word(1)
	} else {
		word(0)
	}
	for _, e := range s.Early {
		h = (h ^ uint64(e)) * prime
	}
	return h
}

// model returns the porcupine model of one lock per name: histories are
// partitioned by name.
func model(v variant) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byName := map[string][]porcupine.Operation{}
			var names []string
			for _, op := range history {
				n := op.Input.(input).Name
				if _, ok := byName[n]; !ok {
					names = append(names, n)
				}
				byName[n] = append(byName[n], op)
			}
			out := make([][]porcupine.Operation, 0, len(names))
			for _, n := range names {
				out = append(out, byName[n])
			}
			return out
		},
		Init: func() []interface{} { return []interface{}{state{}} },
		Step: func(s, in, out interface{}) []interface{} {
			next := v.step(s.(state), in.(input), out.(output))
			res := make([]interface{}, len(next))
			for i, n := range next {
				res[i] = n
			}
			return res
		},
		Hash:              func(s interface{}) uint64 { return s.(state).hash() },
		DescribeOperation: describe,
		DescribeState: func(s interface{}) string {
			st := s.(state)
			var d string
			if !st.Held {
				d = fmt.Sprintf("free (last fence %d)", st.Last)
			} else {
				d = fmt.Sprintf("held by %s, token %s, fence %d", st.Owner, short(st.Token), st.Fence)
			}
			if st.Orphan {
				d += " (orphan: its clean-up may come at any moment)"
			}
			if st.Phase > 0 || st.Early != [hintWidth]uint16{} {
				d += fmt.Sprintf(" [phase %d, early %v]", st.Phase, st.Early)
			}
			return d
		},
	}
	return nm.ToModel()
}

func describe(i, o interface{}) string {
	in, out := i.(input), o.(output)
	var call string
	switch in.Kind {
	case opLock:
		call = fmt.Sprintf("Lock(%s, owner %s, wait %v)", in.Name, in.Owner, in.Wait)
	case opRenew, opRelease:
		call = fmt.Sprintf("%v(%s, %s token %s)", in.Kind, in.Name, in.Which, short(in.Token))
	case opGet:
		call = fmt.Sprintf("GetLock(%s)", in.Name)
	}
	var res string
	switch {
	case out.Unknown:
		res = "unknown: " + out.Err
	case in.Kind == opLock && out.Acquired:
		res = fmt.Sprintf("acquired, token %s, fence %d", short(out.Token), out.Fence)
	case in.Kind == opLock:
		res = "not acquired, holder " + out.Holder
	case in.Kind == opRenew && out.OK:
		res = fmt.Sprintf("renewed, fence %d", out.Fence)
	case in.Kind == opRenew:
		res = "LOCK_NOT_HELD"
	case in.Kind == opRelease:
		res = fmt.Sprintf("released=%t", out.Released)
	case out.Held:
		res = fmt.Sprintf("held by %s, fence %d", out.Owner, out.Fence)
	default:
		res = "free"
	}
	return call + " → " + res + in.Hint.String()
}

func short(tok string) string {
	if len(tok) > 8 {
		return tok[:8]
	}
	return tok
}
