package linearizability

// The sequential model of the holds of one name (store.Holds): a lock with
// shared and exclusive holders, or a semaphore, each with its queue of
// waiting tickets, for porcupine. Leases and ticket leases are far longer
// than a test, so that neither expiry nor a ticket's lapse is part of the
// model. Sessions have no lock-delay: a session-bound hold lives while its
// session does, and ends when the session expires (an Expire operation the
// recorder adds, spanning the instants the session's last renewal may have
// set its deadline to), without a delay.
//
// The model follows the store contract (internal/store/holds.go and
// docs/ARCHITECTURE.md's hold states): a request is granted iff it fits
// beside the live holders and no ticket ahead of it would be blocked by it
// (a request without a ticket, or whose ticket is not queued, is behind
// the whole queue); a waiting request that is not granted keeps its place, or joins
// the queue at the back; a grant takes the ticket out of the queue and has
// a fence greater than every fence issued before; a semaphore's limit is
// the one of its holders and waiters while it has any, and another is
// ErrLimitMismatch. Tokens and tickets are chosen by the caller, so the
// model knows them from the inputs; fences come from the outputs.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/internal/store"
)

// hop is an operation of store.Holds.
type hop uint8

const (
	hAcquire hop = iota
	hRelease
	hRenew
	hGet
	hLeave
	hExpire // a session's deadline passes (recorded, not called)
)

func (o hop) String() string {
	return [...]string{"AcquireHold", "ReleaseHold", "RenewHold", "GetHolds", "LeaveQueue", "Expire"}[o]
}

// hin is what a client asked.
type hin struct {
	Op    hop
	Kind  store.HoldKind
	Name  string
	Owner string // AcquireHold: the owner label
	// Token: AcquireHold, the token sent (a retry of a waiting request sends
	// the same); RenewHold, ReleaseHold, the token sent.
	Token string
	Which string // RenewHold, ReleaseHold: "own", "stale" or "random"
	// AcquireHold: a shared lock; the lock's cap on shared holders (0:
	// none); the semaphore's limit.
	Shared     bool
	MaxHolders int
	Limit      int
	// Ticket: AcquireHold with Wait (the same for every try of one waiting
	// request), LeaveQueue.
	Ticket string
	// Session: AcquireHold, the session the hold is bound to ("": a plain
	// lease); Expire, the session whose deadline passes.
	Session string
	ID      int // the operation's number in its history
}

// hout is what the client was answered.
type hout struct {
	// Unknown: the call failed (Err) and may or may not have taken effect.
	Unknown bool
	Err     string

	// AcquireHold.
	Acquired, AlreadyHeld, Queued bool
	Mismatch                      bool // ErrLimitMismatch
	Fence                         uint64
	Holder                        string
	RetryAt                       bool // RetryAt is not zero
	Holders, Limit                int

	OK    bool // RenewHold renewed (false: ErrLockNotHeld); Fence its fence
	Bound bool // RenewHold: ErrSessionBound
	// AcquireHold: ErrSessionNotFound.
	SessionGone bool
	Released    bool // ReleaseHold

	// GetHolds: the holders as listed, the waiters, the limit, and the
	// single-holder fields (Held, Owner, Fence).
	Info    []hholder
	Waiters int
	Held    bool
	Owner   string
}

// hholder is a live holder. Fence 0: granted by an AcquireHold of unknown
// outcome, the fence never seen.
type hholder struct {
	Token   string // "" in a GetHolds answer
	Owner   string
	Fence   uint64
	Shared  bool
	Bound   bool   // session-bound
	Session string // the session it is bound to; "" in a GetHolds answer
}

// hticket is a waiting ticket.
type hticket struct {
	Ticket string
	Shared bool
}

// hstate is one name's holds as the model sees them.
type hstate struct {
	Holders []hholder // by token
	Queue   []hticket // in arrival order
	Last    uint64    // the highest fence seen: a new grant's must exceed it
	Limit   int       // a semaphore's limit while it has holders or waiters; else 0
	Dead    []string  // the sessions that have expired, sorted
}

func (s hstate) clone() hstate {
	s.Holders = slices.Clone(s.Holders)
	s.Queue = slices.Clone(s.Queue)
	s.Dead = slices.Clone(s.Dead)
	return s
}

func (s hstate) equal(o hstate) bool {
	return s.Last == o.Last && s.Limit == o.Limit && slices.Equal(s.Holders, o.Holders) && slices.Equal(s.Queue, o.Queue) &&
		slices.Equal(s.Dead, o.Dead)
}

func (s hstate) hash() uint64 {
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
	for _, x := range s.Holders {
		str(x.Token)
		str(x.Owner)
		word(x.Fence)
		if x.Shared {
			word(1)
		}
		str(x.Session)
	}
	word(uint64(len(s.Holders)))
	for _, t := range s.Queue {
		str(t.Ticket)
		if t.Shared {
			word(1)
		}
	}
	word(s.Last)
	word(uint64(s.Limit))
	for _, d := range s.Dead {
		str(d)
	}
	return h
}

func (s hstate) holder(tok string) int {
	return slices.IndexFunc(s.Holders, func(x hholder) bool { return x.Token == tok })
}

// bound returns the index of the holder bound to session, or -1.
func (s hstate) bound(session string) int {
	if session == "" {
		return -1
	}
	return slices.IndexFunc(s.Holders, func(x hholder) bool { return x.Session == session })
}

func (s hstate) queued(ticket string) int {
	if ticket == "" {
		return -1
	}
	return slices.IndexFunc(s.Queue, func(t hticket) bool { return t.Ticket == ticket })
}

// settle keeps the holders by token and forgets a semaphore's limit when
// it has no holders and no waiters.
func (s hstate) settle() hstate {
	slices.SortFunc(s.Holders, func(a, b hholder) int { return strings.Compare(a.Token, b.Token) })
	if len(s.Holders) == 0 && len(s.Queue) == 0 {
		s.Limit = 0
	}
	return s
}

// decision is what the contract makes of an AcquireHold in a state.
type decision struct {
	mismatch bool // ErrLimitMismatch
	limit    int  // the limit that applies (semaphore)
	eligible bool
	// Not eligible: blocking are the live holders that keep it out (the
	// answer names one of them, and has a RetryAt); none when it is kept out
	// only by tickets ahead (the answer names no holder, and has no
	// RetryAt). loose: a semaphore request kept out by its holders and the
	// tickets ahead together, and not by its holders alone: the contract
	// leaves open whether its holders count as blocking, so the answer may
	// name any of them, or none.
	blocking []hholder
	loose    bool
}

// hvariant makes the model deliberately wrong, to show that a wrong model
// is caught.
type hvariant struct {
	// sharedIgnoresTickets: a shared request is not held back by the
	// exclusive tickets ahead (readers starve writers).
	sharedIgnoresTickets bool
}

func (v hvariant) decide(s hstate, in hin) decision {
	ahead := s.Queue
	if i := s.queued(in.Ticket); i >= 0 {
		ahead = s.Queue[:i]
	}
	switch {
	case in.Kind == store.HoldSemaphore:
		if len(s.Holders)+len(s.Queue) > 0 && in.Limit != s.Limit {
			return decision{mismatch: true}
		}
		d := decision{limit: in.Limit, eligible: len(s.Holders)+len(ahead) < in.Limit}
		switch {
		case d.eligible:
		case len(s.Holders) >= in.Limit:
			d.blocking = s.Holders
		case len(s.Holders) > 0:
			d.loose = true
		}
		return d
	case !in.Shared:
		if len(s.Holders) == 0 && len(ahead) == 0 {
			return decision{eligible: true}
		}
		return decision{blocking: s.Holders}
	default:
		var excl []hholder
		for _, x := range s.Holders {
			if !x.Shared {
				excl = append(excl, x)
			}
		}
		if len(excl) > 0 {
			return decision{blocking: excl}
		}
		if in.MaxHolders > 0 && len(s.Holders) >= in.MaxHolders {
			return decision{blocking: s.Holders}
		}
		if !v.sharedIgnoresTickets && slices.ContainsFunc(ahead, func(t hticket) bool { return !t.Shared }) {
			return decision{}
		}
		return decision{eligible: true}
	}
}

// step returns every state the name may be in after the operation, from s;
// none if the output is impossible from s.
func (v hvariant) step(s hstate, in hin, out hout) []hstate {
	switch in.Op {
	case hAcquire:
		return v.acquire(s, in, out)
	case hRelease:
		i := s.holder(in.Token)
		gone := s.clone()
		if i >= 0 {
			gone.Holders = slices.Delete(gone.Holders, i, i+1)
			gone = gone.settle()
		}
		switch {
		case out.Unknown && i >= 0:
			return []hstate{s, gone}
		case out.Unknown:
			return []hstate{s}
		case out.Released != (i >= 0):
			return nil
		}
		return []hstate{gone}
	case hRenew:
		i := s.holder(in.Token)
		switch {
		case out.Unknown:
			return []hstate{s}
		case out.Bound != (i >= 0 && s.Holders[i].Bound):
			return nil
		case out.OK != (i >= 0 && !s.Holders[i].Bound):
			return nil
		case out.OK && s.Holders[i].Fence != 0 && out.Fence != s.Holders[i].Fence:
			return nil
		}
		return []hstate{s}
	case hGet:
		if out.Unknown || v.infoFits(s, in, out) {
			return []hstate{s}
		}
		return nil
	case hLeave:
		i := s.queued(in.Ticket)
		if i < 0 {
			return []hstate{s}
		}
		gone := s.clone()
		gone.Queue = slices.Delete(gone.Queue, i, i+1)
		gone = gone.settle()
		if out.Unknown {
			return []hstate{s, gone}
		}
		return []hstate{gone}
	case hExpire:
		next := s.clone()
		next.Holders = slices.DeleteFunc(next.Holders, func(x hholder) bool { return x.Session == in.Session })
		if i, found := slices.BinarySearch(next.Dead, in.Session); !found {
			next.Dead = slices.Insert(next.Dead, i, in.Session)
		}
		return []hstate{next.settle()}
	}
	panic(fmt.Sprintf("unknown operation %d", in.Op))
}

func (v hvariant) acquire(s hstate, in hin, out hout) []hstate {
	// An expired session is ErrSessionNotFound, or not granted (the store
	// may look at the session only for a request it would grant).
	if _, dead := slices.BinarySearch(s.Dead, in.Session); dead && in.Session != "" {
		if out.Unknown || out.SessionGone {
			return []hstate{s}
		}
		if out.Acquired {
			return nil
		}
	} else if out.SessionGone {
		return nil
	}
	// A session asking again for what it holds is answered with that grant.
	if i := s.bound(in.Session); i >= 0 {
		switch {
		case out.Unknown:
		case !out.AlreadyHeld || !out.Acquired:
			return nil
		case s.Holders[i].Fence != 0 && out.Fence != s.Holders[i].Fence:
			return nil
		}
		return []hstate{s}
	}
	d := v.decide(s, in)
	if d.mismatch {
		if out.Unknown || out.Mismatch {
			return []hstate{s}
		}
		return nil
	}
	if out.Mismatch || out.AlreadyHeld {
		return nil
	}
	next := s.clone()
	if in.Kind == store.HoldSemaphore {
		next.Limit = d.limit
	}
	if d.eligible {
		if !out.Unknown && (!out.Acquired || out.Queued || out.Fence <= s.Last) {
			return nil
		}
		if i := next.queued(in.Ticket); i >= 0 {
			next.Queue = slices.Delete(next.Queue, i, i+1)
		}
		next.Holders = append(next.Holders, hholder{Token: in.Token, Owner: in.Owner, Fence: out.Fence,
			Shared: in.Kind == store.HoldLock && in.Shared, Bound: in.Session != "", Session: in.Session})
		if out.Fence > next.Last {
			next.Last = out.Fence
		}
		next = next.settle()
		if out.Unknown {
			return []hstate{s, next}
		}
		if out.Holders != len(next.Holders) || in.Kind == store.HoldSemaphore && out.Limit != d.limit {
			return nil
		}
		return []hstate{next}
	}
	if in.Ticket != "" && next.queued(in.Ticket) < 0 {
		next.Queue = append(next.Queue, hticket{Ticket: in.Ticket, Shared: in.Kind == store.HoldLock && in.Shared})
	}
	next = next.settle()
	if out.Unknown {
		if next.equal(s) {
			return []hstate{s}
		}
		return []hstate{s, next}
	}
	if out.Acquired || out.Queued != (in.Ticket != "") || out.RetryAt != (out.Holder != "") {
		return nil
	}
	named := func(hs []hholder) bool {
		return slices.ContainsFunc(hs, func(x hholder) bool { return x.Owner == out.Holder })
	}
	if len(d.blocking) > 0 {
		if !named(d.blocking) {
			return nil
		}
	} else if out.Holder != "" && (!d.loose || !named(s.Holders)) {
		return nil
	}
	return []hstate{next}
}

// infoFits reports whether a GetHolds answer describes s.
func (v hvariant) infoFits(s hstate, in hin, out hout) bool {
	if len(out.Info) != len(s.Holders) || out.Waiters != len(s.Queue) || out.Held != (len(out.Info) > 0) {
		return false
	}
	if in.Kind == store.HoldSemaphore && out.Limit != s.Limit {
		return false
	}
	if out.Held && (out.Owner != out.Info[0].Owner || out.Fence != out.Info[0].Fence) {
		return false
	}
	for i := 1; i < len(out.Info); i++ {
		if out.Info[i].Fence <= out.Info[i-1].Fence {
			return false // by fence, each its own
		}
	}
	// Match the listed holders with the model's: by fence, or, for a grant
	// whose fence was never seen, by owner and mode.
	used := make([]bool, len(s.Holders))
	var unseen []hholder
	for _, x := range out.Info {
		i := slices.IndexFunc(s.Holders, func(m hholder) bool { return m.Fence != 0 && m.Fence == x.Fence })
		if i < 0 {
			unseen = append(unseen, x)
			continue
		}
		if m := s.Holders[i]; m.Owner != x.Owner || m.Shared != x.Shared || m.Bound != x.Bound {
			return false
		}
		used[i] = true
	}
	for _, x := range unseen {
		like := func(m hholder) bool {
			return m.Fence == 0 && m.Owner == x.Owner && m.Shared == x.Shared && m.Bound == x.Bound
		}
		i := slices.IndexFunc(s.Holders, like)
		for i >= 0 && used[i] {
			j := slices.IndexFunc(s.Holders[i+1:], like)
			if j < 0 {
				return false
			}
			i += 1 + j
		}
		if i < 0 {
			return false
		}
		used[i] = true
	}
	return true
}

// holdsModel returns the porcupine model of the holds of one name per
// name: histories are partitioned by name.
func holdsModel(v hvariant) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byName := map[string][]porcupine.Operation{}
			var names []string
			var expiries []porcupine.Operation // every name's
			for _, op := range history {
				if op.Input.(hin).Op == hExpire {
					expiries = append(expiries, op)
					continue
				}
				n := op.Input.(hin).Name
				if _, ok := byName[n]; !ok {
					names = append(names, n)
				}
				byName[n] = append(byName[n], op)
			}
			out := make([][]porcupine.Operation, 0, len(names))
			for _, n := range names {
				out = append(out, append(byName[n], expiries...))
			}
			return out
		},
		Init: func() []interface{} { return []interface{}{hstate{}} },
		Step: func(s, in, out interface{}) []interface{} {
			next := v.step(s.(hstate), in.(hin), out.(hout))
			res := make([]interface{}, len(next))
			for i, n := range next {
				res[i] = n
			}
			return res
		},
		Equal:             func(a, b interface{}) bool { return a.(hstate).equal(b.(hstate)) },
		Hash:              func(s interface{}) uint64 { return s.(hstate).hash() },
		DescribeOperation: describeHold,
		DescribeState: func(s interface{}) string {
			st := s.(hstate)
			var b strings.Builder
			if len(st.Holders) == 0 {
				b.WriteString("no holders")
			}
			for i, x := range st.Holders {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s (%s, fence %d%s", x.Owner, short(x.Token), x.Fence, mode(x.Shared))
				if x.Session != "" {
					fmt.Fprintf(&b, ", session %s", short(x.Session))
				}
				b.WriteString(")")
			}
			if len(st.Queue) > 0 {
				b.WriteString("; queue")
				for _, t := range st.Queue {
					fmt.Fprintf(&b, " %s%s", short(t.Ticket), mode(t.Shared))
				}
			}
			if st.Limit > 0 {
				fmt.Fprintf(&b, "; limit %d", st.Limit)
			}
			fmt.Fprintf(&b, "; last fence %d", st.Last)
			return b.String()
		},
	}
	return nm.ToModel()
}

func mode(shared bool) string {
	if shared {
		return ", shared"
	}
	return ""
}

func describeHold(i, o interface{}) string {
	in, out := i.(hin), o.(hout)
	var call string
	switch in.Op {
	case hAcquire:
		what := "exclusive"
		switch {
		case in.Kind == store.HoldSemaphore:
			what = fmt.Sprintf("limit %d", in.Limit)
		case in.Shared:
			what = "shared"
		}
		call = fmt.Sprintf("AcquireHold(%s, %s, owner %s, token %s", in.Name, what, in.Owner, short(in.Token))
		if in.Ticket != "" {
			call += ", ticket " + short(in.Ticket)
		}
		call += ")"
	case hRenew, hRelease:
		call = fmt.Sprintf("%v(%s, %s token %s)", in.Op, in.Name, in.Which, short(in.Token))
	case hGet:
		call = fmt.Sprintf("GetHolds(%s)", in.Name)
	case hLeave:
		call = fmt.Sprintf("LeaveQueue(%s, ticket %s)", in.Name, short(in.Ticket))
	case hExpire:
		return fmt.Sprintf("session %s expires", short(in.Session))
	}
	if in.Op == hAcquire && in.Session != "" {
		call += " in session " + short(in.Session)
	}
	var res string
	switch {
	case out.Unknown:
		res = "unknown: " + out.Err
	case in.Op == hAcquire && out.Mismatch:
		res = "ErrLimitMismatch"
	case in.Op == hAcquire && out.SessionGone:
		res = "ErrSessionNotFound"
	case in.Op == hAcquire && out.AlreadyHeld:
		res = fmt.Sprintf("already held, fence %d", out.Fence)
	case in.Op == hAcquire && out.Acquired:
		res = fmt.Sprintf("acquired, fence %d, holders %d", out.Fence, out.Holders)
	case in.Op == hAcquire:
		res = fmt.Sprintf("not acquired, holder %q, queued %t", out.Holder, out.Queued)
	case in.Op == hRenew && out.OK:
		res = fmt.Sprintf("renewed, fence %d", out.Fence)
	case in.Op == hRenew && out.Bound:
		res = "ErrSessionBound"
	case in.Op == hRenew:
		res = "ErrLockNotHeld"
	case in.Op == hRelease:
		res = fmt.Sprintf("released=%t", out.Released)
	case in.Op == hGet:
		var hs []string
		for _, x := range out.Info {
			b := ""
			if x.Bound {
				b = ", bound"
			}
			hs = append(hs, fmt.Sprintf("%s@%d%s%s", x.Owner, x.Fence, mode(x.Shared), b))
		}
		res = fmt.Sprintf("holders [%s], waiters %d, limit %d", strings.Join(hs, " "), out.Waiters, out.Limit)
	default:
		res = "ok"
	}
	return call + " → " + res
}
