package memory

// Holds: locks (exclusive and shared), semaphore permits and leaderships
// are one structure, a holdSet per (kind, name), and one implementation;
// the kinds differ only in who fits beside whom (blocked, wakeable).
//
// Concurrency: every holdSet lives under s.lk, with the sessions that hold
// them (a session's keepalive or close touches holds of every kind) and
// the fence counter. Each call is one op: it takes s.lk, cleans up each
// set it touches once (bounded), and at its end lets in, for each set where
// something may have let a ticket in, the tickets that may be granted now
// (granting the calling instance's plain ones: hand-offs; noting the other
// instances to wake), frees the sets that became empty, releases s.lk and
// only then notifies.
//
// Bounded work: a set's holders are in a heap by deadline and its tickets
// in a heap by lease, so that the expired and lapsed ones are found
// without a scan; a call removes at most cleanBatch of each. Counts and
// eligibility stay exact when more than that expired at once (a rare
// case): live-ness is checked per record, and only then is a set scanned.
// The queue is a list in arrival order, with the exclusive lock tickets in
// a second list, so that "a live ticket ahead" and "a live exclusive ticket
// ahead" are found at the head.

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/coordd/coordd/internal/store"
)

const (
	// cleanBatch bounds the expired holders, and separately the lapsed
	// tickets, that one call removes from a set.
	cleanBatch = 100
	// maxWake bounds the tickets one call computes wake-ups for.
	maxWake = 64
	// maxRefresh bounds the tickets of one RefreshTickets call.
	maxRefresh = 1000
)

// holder is one grant of a set.
type holder struct {
	token, owner, session string
	fence                 uint64
	shared                bool
	acquired, deadline    time.Time
	holdUntil             time.Time     // zero: no max hold
	delay                 time.Duration // the session's lock-delay at grant
	value                 []byte        // a leader's value
	idx                   int           // in holdSet.byDeadline
}

func (h *holder) live(now time.Time) bool { return now.Before(h.deadline) }

// ticket is a waiting request's place in its set's queue.
type ticket struct {
	id, instance string
	seq          uint64
	shared       bool
	lease        time.Time
	plain        *plainReq // a plain request's, which may be handed off; nil for a session's
	prev, next   *ticket   // the queue, in arrival order
	xprev, xnext *ticket   // the exclusive tickets of a lock, in arrival order
	idx          int       // in holdSet.byLease
}

func (t *ticket) live(now time.Time) bool { return now.Before(t.lease) }

// plainReq is what a hand-off needs of a queued plain request (a lock's or
// a semaphore's, without a session) to grant it as AcquireHold would.
type plainReq struct {
	token, owner string
	ttl, maxHold time.Duration
}

// holdSet is the state of one (kind, name).
type holdSet struct {
	key        holdKey
	holders    map[string]*holder // by token
	byDeadline holderHeap
	byFence    map[uint64]*holder

	tickets      map[string]*ticket // by ticket
	head, tail   *ticket
	xhead, xtail *ticket
	byLease      ticketHeap
	seq          uint64 // the last ticket's arrival sequence

	limit      int       // a semaphore's limit, while it has holders or tickets
	maxHolders int       // a lock's cap on shared holders, from its last request
	delayUntil time.Time // lock-delay: nothing is granted before

	// Elections.
	leader    string // the token of the leader that the log's last change names
	rev       uint64
	log       []store.ElectionChange // the last store.ElectionLogSize changes
	changedAt time.Time

	dirty   bool // something may have let a ticket in (this op)
	touched bool // cleaned up in this op
}

func newHoldSet(k holdKey) *holdSet {
	return &holdSet{key: k, holders: make(map[string]*holder), byFence: make(map[uint64]*holder), tickets: make(map[string]*ticket)}
}

func (h *holdSet) kind() store.HoldKind { return h.key.kind }

// empty reports whether the set holds nothing worth keeping. An election
// without leader or waiters keeps its revision and log for retention
// after its last change (Options.IdleNameTTL), so that observers behind
// it see the changes they missed; after that it is forgotten and its
// revisions start again from 1.
func (h *holdSet) empty(now time.Time, retention time.Duration) bool {
	if len(h.holders) > 0 || len(h.tickets) > 0 || now.Before(h.delayUntil) {
		return false
	}
	return h.rev == 0 || !now.Before(h.changedAt.Add(retention))
}

// keepsAt reports whether the set would still hold something at t with
// nobody touching it: a holder until its deadline and lock-delay, a
// ticket until its lease, a lock-delay, an election's retention.
func (h *holdSet) keepsAt(t time.Time, retention time.Duration) bool {
	for _, x := range h.byDeadline {
		if x.deadline.Add(x.delay).After(t) {
			return true
		}
	}
	for _, tk := range h.byLease {
		if tk.lease.After(t) {
			return true
		}
	}
	return h.delayUntil.After(t) || (h.rev != 0 && h.changedAt.Add(retention).After(t))
}

// firstLive returns the live holder whose deadline comes first, nil if none.
// Live holders are either all shared or one exclusive: a grant never
// overlaps an incompatible live holder, and an expired one never revives.
func (h *holdSet) firstLive(now time.Time) *holder {
	if len(h.byDeadline) == 0 {
		return nil
	}
	if top := h.byDeadline[0]; top.live(now) {
		return top
	}
	var first *holder // more than cleanBatch expired at once: scan
	for _, x := range h.byDeadline {
		if x.live(now) && (first == nil || x.deadline.Before(first.deadline)) {
			first = x
		}
	}
	return first
}

// liveHolders counts the live holders.
func (h *holdSet) liveHolders(now time.Time) int {
	if len(h.byDeadline) == 0 || h.byDeadline[0].live(now) {
		return len(h.byDeadline)
	}
	n := 0
	for _, x := range h.byDeadline {
		if x.live(now) {
			n++
		}
	}
	return n
}

// liveTickets counts the live tickets.
func (h *holdSet) liveTickets(now time.Time) int {
	if len(h.byLease) == 0 || h.byLease[0].live(now) {
		return len(h.byLease)
	}
	n := 0
	for _, t := range h.byLease {
		if t.live(now) {
			n++
		}
	}
	return n
}

// op is one call's work on the holds: it holds s.lk from begin to end.
type op struct {
	s      *Store
	now    time.Time
	sets   []*holdSet
	topics []string
	seen   map[string]bool // topics, once
	budget int             // lapsed tickets found in walks that may still be removed
	// me is the instance making the call ("": none): its plain tickets that
	// the op lets in are granted (handoffs) instead of woken.
	me       string
	handoffs []store.Handoff
}

func (s *Store) begin() *op {
	now := s.now()
	s.lk.Lock()
	return &op{s: s, now: now, budget: cleanBatch}
}

// end lets in whom the op let in (hand-offs to o.me, wake-ups to the
// others), frees the sets that became empty, releases s.lk, notifies, and
// returns the hand-offs.
func (o *op) end() []store.Handoff {
	for _, h := range o.sets {
		if h.dirty {
			o.wake(h)
		}
		h.dirty, h.touched = false, false
		if h.empty(o.now, o.s.idleTTL) && o.s.holds[h.key] == h {
			delete(o.s.holds, h.key)
		}
	}
	o.s.lk.Unlock()
	for _, t := range o.topics {
		o.s.hub.Notify(t)
	}
	return o.handoffs
}

func (o *op) notify(topic string) {
	if len(o.topics) < 16 { // most ops wake a few
		if !slices.Contains(o.topics, topic) {
			o.topics = append(o.topics, topic)
		}
		return
	}
	if o.seen == nil {
		o.seen = make(map[string]bool, 2*len(o.topics))
		for _, t := range o.topics {
			o.seen[t] = true
		}
	}
	if !o.seen[topic] {
		o.seen[topic] = true
		o.topics = append(o.topics, topic)
	}
}

// set returns the set of (kind, name), creating it if create, cleaned up
// once per op; nil if it does not exist.
func (o *op) set(kind store.HoldKind, name string, create bool) *holdSet {
	k := holdKey{kind, name}
	h := o.s.holds[k]
	if h == nil {
		if !create {
			return nil
		}
		h = newHoldSet(k)
		o.s.holds[k] = h
	}
	if !h.touched {
		h.touched = true
		o.sets = append(o.sets, h)
		o.clean(h)
	}
	return h
}

// clean removes up to cleanBatch expired holders (applying lock-delay; an
// election's leader is logged gone) and up to cleanBatch lapsed tickets,
// and reports how many it removed.
func (o *op) clean(h *holdSet) int {
	n := 0
	for i := 0; i < cleanBatch && len(h.byDeadline) > 0 && !h.byDeadline[0].live(o.now); i++ {
		o.removeHolder(h, h.byDeadline[0])
		n++
	}
	if len(h.byDeadline) > 0 && !h.byDeadline[0].live(o.now) {
		// More expired at once than one call removes: their lock-delays
		// apply already (removal will find them applied).
		for _, x := range h.byDeadline {
			if !x.live(o.now) {
				h.delayFrom(x, o.now)
			}
		}
	}
	for i := 0; i < cleanBatch && len(h.byLease) > 0 && !h.byLease[0].live(o.now); i++ {
		h.removeTicket(h.byLease[0])
		h.dirty = true
		n++
	}
	return n
}

// removeHolder deletes a holder. One that ended by itself (expired) while
// bound to a session with a lock-delay, and not by its max hold, delays
// the name. It may let tickets in; a leader's is logged as "no leader".
func (o *op) removeHolder(h *holdSet, x *holder) {
	delete(h.holders, x.token)
	delete(h.byFence, x.fence)
	heap.Remove(&h.byDeadline, x.idx)
	h.delayFrom(x, o.now)
	h.dirty = true
	if h.kind() == store.HoldElection {
		if h.leader == x.token {
			h.leader = ""
			o.change(h, store.LeaderInfo{})
		}
	}
}

// delayFrom applies the lock-delay of x if it ended by its session's
// expiry: not live, session-bound with a delay, and not ended by its max
// hold.
func (h *holdSet) delayFrom(x *holder, now time.Time) {
	if !x.live(now) && x.session != "" && x.delay > 0 && (x.holdUntil.IsZero() || x.deadline.Before(x.holdUntil)) {
		if u := x.deadline.Add(x.delay); u.After(h.delayUntil) {
			h.delayUntil = u
		}
	}
}

// queue appends a ticket at the back of the queue.
func (h *holdSet) queue(t *ticket) {
	h.seq++
	t.seq = h.seq
	h.tickets[t.id] = t
	heap.Push(&h.byLease, t)
	t.prev = h.tail
	if h.tail != nil {
		h.tail.next = t
	} else {
		h.head = t
	}
	h.tail = t
	if h.kind() == store.HoldLock && !t.shared {
		t.xprev = h.xtail
		if h.xtail != nil {
			h.xtail.xnext = t
		} else {
			h.xhead = t
		}
		h.xtail = t
	}
}

// removeTicket takes a ticket out of the queue.
func (h *holdSet) removeTicket(t *ticket) {
	delete(h.tickets, t.id)
	heap.Remove(&h.byLease, t.idx)
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		h.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		h.tail = t.prev
	}
	if h.kind() == store.HoldLock && !t.shared {
		if t.xprev != nil {
			t.xprev.xnext = t.xnext
		} else {
			h.xhead = t.xnext
		}
		if t.xnext != nil {
			t.xnext.xprev = t.xprev
		} else {
			h.xtail = t.xprev
		}
	}
	t.prev, t.next, t.xprev, t.xnext = nil, nil, nil, nil
}

// step returns the live ticket at or after t (in the queue, or in the
// exclusive list if x), removing the lapsed ones it passes while the op's
// budget lasts.
func (o *op) step(h *holdSet, t *ticket, x bool) *ticket {
	for t != nil && !t.live(o.now) {
		next := t.next
		if x {
			next = t.xnext
		}
		if o.budget > 0 {
			o.budget--
			h.removeTicket(t)
			h.dirty = true
		}
		t = next
	}
	return t
}

func (o *op) nextLive(h *holdSet, t *ticket) *ticket { return o.step(h, t.next, false) }

// blocked tells whether a request (shared or not, with its queued live
// ticket tk or nil) does not fit now, ignoring lock-delay, and if so
// whether live holders block it (one of them ending may let it in) or only
// tickets ahead (a wake-up will come).
func (o *op) blocked(h *holdSet, shared bool, maxHolders, limit int, tk *ticket) (blocked, byHolders bool) {
	first := h.firstLive(o.now)
	switch {
	case h.kind() == store.HoldSemaphore:
		n := h.liveHolders(o.now)
		if n >= limit {
			return true, true
		}
		ahead := 0
		for t := o.step(h, h.head, false); t != nil && t != tk && ahead < limit; t = o.nextLive(h, t) {
			ahead++
		}
		if n+ahead >= limit {
			return true, ahead < limit
		}
	case h.kind() == store.HoldLock && shared:
		if first != nil && !first.shared {
			return true, true
		}
		if maxHolders > 0 && h.liveHolders(o.now) >= maxHolders {
			return true, true
		}
		if x := o.step(h, h.xhead, true); x != nil && (tk == nil || x.seq < tk.seq) {
			return true, false
		}
	default: // an exclusive lock, an election
		if first != nil {
			return true, true
		}
		if t := o.step(h, h.head, false); t != nil && t != tk {
			return true, false
		}
	}
	return false, false
}

// wake lets in the tickets at the head of the queue that may be granted
// now, in queue order, and no others (at most maxWake): a lock's head if it
// is exclusive and the lock is free, or the run of shared tickets at its
// head up to the free shared places; a semaphore's first (limit -
// holders); an election's head if it has no leader. A ticket let in but not
// granted here counts as a holder for those behind it. A plain ticket of
// o.me is granted (handOff); any other's instance is woken.
func (o *op) wake(h *holdSet) {
	if o.now.Before(h.delayUntil) {
		return
	}
	ahead := 0
	for t, n := o.step(h, h.head, false), 0; t != nil && n < maxWake; n++ {
		next := o.nextLive(h, t)
		live := h.liveHolders(o.now)
		var fits bool
		switch {
		case h.kind() == store.HoldSemaphore:
			fits = live+ahead < h.limit
		case h.kind() == store.HoldLock && t.shared:
			first := h.firstLive(o.now)
			fits = (first == nil || first.shared) && (h.maxHolders <= 0 || live+ahead < h.maxHolders)
		default: // an exclusive lock, an election
			fits = live == 0 && ahead == 0
		}
		if !fits {
			return
		}
		if t.plain != nil && o.me != "" && t.instance == o.me {
			o.handOff(h, t)
		} else {
			o.notify(store.WaitTopic(h.kind(), h.key.name, t.instance))
			ahead++
		}
		if h.kind() != store.HoldSemaphore && !t.shared {
			return // nothing behind an exclusive ticket fits
		}
		t = next
	}
}

// handOff grants queued plain ticket t as AcquireHold would have granted
// its request now, and notes the hand-off.
func (o *op) handOff(h *holdSet, t *ticket) {
	p := t.plain
	var holdUntil time.Time
	if p.maxHold > 0 {
		holdUntil = o.now.Add(us(p.maxHold))
	}
	x := &holder{token: p.token, owner: p.owner, shared: t.shared, deadline: capHold(o.now.Add(us(p.ttl)), holdUntil), holdUntil: holdUntil}
	o.grant(h, t, x)
	o.handoffs = append(o.handoffs, store.Handoff{Ticket: t.id, Token: p.token, Grant: h.grantOf(x, o.now)})
}

// grantOf is holder x's grant as AcquireHold answers it, now.
func (h *holdSet) grantOf(x *holder, now time.Time) store.Grant {
	return store.Grant{
		Acquired: true, Fence: x.fence, TTL: x.deadline.Sub(now), ExpireTime: x.deadline,
		Holders: h.liveHolders(now), Limit: h.semLimit(now),
	}
}

// grant makes x (its token, owner, session, deadline and max hold set) a
// holder of h with the next fence, and takes its ticket tk, if any, out of
// the queue.
func (o *op) grant(h *holdSet, tk *ticket, x *holder) {
	if tk != nil {
		h.removeTicket(tk)
	}
	fence := max(o.s.lastFence+1, uint64(o.now.UnixMicro()))
	o.s.lastFence = fence
	x.fence, x.acquired = fence, o.now
	h.holders[x.token] = x
	h.byFence[fence] = x
	heap.Push(&h.byDeadline, x)
	h.dirty = true // a shared grant may let the next shared ticket in
}

// grantReq is a request for a hold of any kind.
type grantReq struct {
	store.HoldRequest
	kind  store.HoldKind
	value []byte // a campaign's
}

// granted is the outcome of acquire.
type granted struct {
	ok, already bool
	x           *holder // the grant; or, when not granted, the blocking holder (nil: none)
	queued      bool
	retryAt     time.Time
	holders     int
	limit       int
}

// acquire is AcquireHold and Campaign (store.Holds, design: eligibility,
// then the session's checks, then the grant; not granted: the queue).
func (o *op) acquire(h *holdSet, req grantReq) (granted, error) {
	now := o.now
	if req.SessionID == "" {
		if x := h.liveHolder(req.Token, now); x != nil {
			// Granted already, by a hand-off: its ticket, if queued, leaves.
			if req.Wait != nil {
				if t := h.tickets[req.Wait.Ticket]; t != nil {
					h.removeTicket(t)
					h.dirty = true
				}
			}
			return granted{ok: true, x: x, holders: h.liveHolders(now), limit: h.semLimit(now)}, nil
		}
	} else {
		if sess := o.s.sessions[req.SessionID]; sess != nil {
			if b, ok := sess.holds[h.key]; ok {
				if x := h.holders[b.token]; x != nil && x.live(now) {
					if req.Wait != nil { // its ticket, if queued, leaves: it is answered
						if t := h.tickets[req.Wait.Ticket]; t != nil {
							h.removeTicket(t)
							h.dirty = true
						}
					}
					return granted{ok: true, already: true, x: x, holders: h.liveHolders(now), limit: h.semLimit(now)}, nil
				}
			}
		}
	}
	limit := 0
	switch h.kind() {
	case store.HoldSemaphore:
		if h.liveHolders(now) > 0 || h.liveTickets(now) > 0 {
			if req.Limit != h.limit {
				return granted{}, store.ErrLimitMismatch
			}
		}
		h.limit = req.Limit
		limit = req.Limit
	case store.HoldLock:
		if req.MaxHolders > 0 {
			h.maxHolders = req.MaxHolders
		}
	}
	var tk *ticket
	if req.Wait != nil {
		if t := h.tickets[req.Wait.Ticket]; t != nil {
			if t.live(now) {
				tk = t
			} else {
				h.removeTicket(t)
				h.dirty = true
			}
		}
	}
	shared := req.Shared && h.kind() == store.HoldLock
	blocked, byHolders := o.blocked(h, shared, req.MaxHolders, limit, tk)
	if blocked || now.Before(h.delayUntil) {
		g := granted{holders: h.liveHolders(now), limit: limit}
		if byHolders {
			g.x = h.firstLive(now)
			g.retryAt = g.x.deadline
		}
		if now.Before(h.delayUntil) && h.delayUntil.After(g.retryAt) {
			g.retryAt = h.delayUntil
		}
		if req.Wait == nil {
			return g, nil
		}
		lease := ticketLease(req.Wait.Lease)
		if tk != nil {
			tk.lease = now.Add(lease)
			heap.Fix(&h.byLease, tk.idx)
		} else {
			if h.liveTickets(now) >= store.MaxWaiters {
				return granted{}, store.ErrTooManyWaiters
			}
			t := &ticket{id: req.Wait.Ticket, instance: req.Wait.Instance, shared: shared, lease: now.Add(lease)}
			if req.SessionID == "" && h.kind() != store.HoldElection {
				t.plain = &plainReq{token: req.Token, owner: req.Owner, ttl: req.TTL, maxHold: req.MaxHold}
			}
			h.queue(t)
		}
		g.queued = true
		return g, nil
	}
	var holdUntil time.Time
	if req.MaxHold > 0 {
		holdUntil = now.Add(us(req.MaxHold))
	}
	deadline := now.Add(us(req.TTL))
	var sess *sessionRec
	if req.SessionID != "" {
		sess = o.s.sessions[req.SessionID]
		if sess == nil || !sess.live(now) {
			return granted{}, store.ErrSessionNotFound
		}
		if req.MaxSessionHolds > 0 && len(sess.holds)+len(sess.lost) >= req.MaxSessionHolds {
			return granted{}, store.ErrTooManyHolds
		}
		deadline = sess.deadline
	}
	x := &holder{
		token: req.Token, owner: req.Owner, session: req.SessionID, shared: shared,
		deadline: capHold(deadline, holdUntil), holdUntil: holdUntil, value: slices.Clone(req.value),
	}
	o.grant(h, tk, x)
	if sess != nil {
		x.delay = sess.delay
		sess.bind(h.kind(), h.key.name, sessionHold{token: req.Token, fence: x.fence, holdUntil: holdUntil})
		o.notify(store.SessionTopic(req.SessionID))
	}
	return granted{ok: true, x: x, holders: h.liveHolders(now), limit: limit}, nil
}

// ticketLease is a ticket's lease: d, or store.WaitLease if d is not
// positive (a ticket that lapsed at once would only cost work).
func ticketLease(d time.Duration) time.Duration {
	if d = us(d); d > 0 {
		return d
	}
	return store.WaitLease
}

// semLimit is a semaphore's limit while it has holders or tickets, else 0.
func (h *holdSet) semLimit(now time.Time) int {
	if h.kind() != store.HoldSemaphore || (h.liveHolders(now) == 0 && h.liveTickets(now) == 0) {
		return 0
	}
	return h.limit
}

// liveHolder returns token's live holder of the set, nil if none.
func (h *holdSet) liveHolder(token string, now time.Time) *holder {
	if h == nil {
		return nil
	}
	if x := h.holders[token]; x != nil && x.live(now) {
		return x
	}
	return nil
}

// ticket returns the set's queued ticket id, nil if none.
func (h *holdSet) ticket(id string) *ticket {
	if h == nil || id == "" {
		return nil
	}
	return h.tickets[id]
}

func checkKind(kind store.HoldKind) error {
	switch kind {
	case store.HoldLock, store.HoldSemaphore, store.HoldElection:
		return nil
	}
	return fmt.Errorf("unknown hold kind %q", kind)
}

// AcquireHold implements store.Holds.
func (s *Store) AcquireHold(_ context.Context, req store.HoldRequest) (store.Grant, error) {
	kind := req.Kind
	if kind == "" {
		kind = store.HoldLock
	}
	switch {
	case kind != store.HoldLock && kind != store.HoldSemaphore:
		return store.Grant{}, fmt.Errorf("AcquireHold of kind %q", kind)
	case kind == store.HoldSemaphore && req.Limit < 1:
		return store.Grant{}, fmt.Errorf("semaphore limit %d, want >= 1", req.Limit)
	}
	o := s.begin()
	defer o.end()
	g, err := o.acquire(o.set(kind, req.Name, true), grantReq{HoldRequest: req, kind: kind})
	if err != nil {
		return store.Grant{}, err
	}
	out := store.Grant{Acquired: g.ok, AlreadyHeld: g.already, Queued: g.queued, RetryAt: g.retryAt, Holders: g.holders, Limit: g.limit}
	if g.x != nil {
		out.TTL, out.ExpireTime = g.x.deadline.Sub(o.now), g.x.deadline
		if g.ok {
			out.Fence = g.x.fence
		} else {
			out.Holder = g.x.owner
		}
	}
	if g.already {
		out.Token = g.x.token
	}
	return out, nil
}

// RenewHold implements store.Holds.
func (s *Store) RenewHold(_ context.Context, kind store.HoldKind, name, token string, ttl time.Duration) (store.Lease, error) {
	if err := checkKind(kind); err != nil {
		return store.Lease{}, err
	}
	o := s.begin()
	defer o.end()
	h := o.set(kind, name, false)
	x := h.liveHolder(token, o.now)
	switch {
	case x == nil:
		return store.Lease{}, store.ErrNotHeld
	case x.session != "":
		return store.Lease{}, store.ErrSessionBound
	}
	x.deadline = capHold(o.now.Add(us(ttl)), x.holdUntil)
	heap.Fix(&h.byDeadline, x.idx)
	return store.Lease{TTL: x.deadline.Sub(o.now), ExpireTime: x.deadline, Fence: x.fence}, nil
}

// ReleaseHold implements store.Holds.
func (s *Store) ReleaseHold(_ context.Context, kind store.HoldKind, name, token, instance string) (store.Released, error) {
	if err := checkKind(kind); err != nil {
		return store.Released{}, err
	}
	o := s.begin()
	o.me = instance
	var rel store.Released
	h := o.set(kind, name, false)
	if x := h.liveHolder(token, o.now); x != nil {
		o.removeHolder(h, x)
		if sess := o.s.sessions[x.session]; sess != nil {
			sess.unbind(kind, name, token)
		}
		rel.Released, rel.Held = true, o.now.Sub(x.acquired)
	}
	rel.Handoffs = o.end()
	return rel, nil
}

// AbandonHold implements store.Holds.
func (s *Store) AbandonHold(_ context.Context, kind store.HoldKind, name, token, ticket string) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	o := s.begin()
	defer o.end()
	h := o.set(kind, name, false)
	if t := h.ticket(ticket); t != nil {
		h.removeTicket(t) // nobody hands it the hold now (o.me is "")
		h.dirty = true
	}
	x := h.liveHolder(token, o.now)
	if x == nil {
		return nil
	}
	o.removeHolder(h, x)
	if sess := o.s.sessions[x.session]; sess != nil {
		if b, ok := sess.unbind(kind, name, token); ok {
			sess.report(store.LostHold{Kind: kind, Name: name, Fence: b.fence, Reason: store.LostGone})
		}
		o.notify(store.SessionTopic(x.session))
	}
	return nil
}

// GetHolds implements store.Holds.
func (s *Store) GetHolds(_ context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	if err := checkKind(kind); err != nil {
		return store.HoldInfo{}, err
	}
	o := s.begin()
	defer o.end()
	h := o.set(kind, name, false)
	if h == nil {
		return store.HoldInfo{}, nil
	}
	info := store.HoldInfo{Waiters: h.liveTickets(o.now), Limit: h.semLimit(o.now)}
	for _, x := range h.byDeadline {
		if x.live(o.now) {
			info.Holders = append(info.Holders, store.HolderInfo{
				Owner: x.owner, Fence: x.fence, Shared: x.shared, SessionBound: x.session != "",
				TTL: x.deadline.Sub(o.now), ExpireTime: x.deadline, AcquireTime: x.acquired,
			})
		}
	}
	slices.SortFunc(info.Holders, func(a, b store.HolderInfo) int { return cmp.Compare(a.Fence, b.Fence) })
	if len(info.Holders) > 0 {
		f := info.Holders[0]
		info.Held, info.Owner, info.Fence, info.SessionBound = true, f.Owner, f.Fence, f.SessionBound
		info.TTL, info.ExpireTime, info.AcquireTime = f.TTL, f.ExpireTime, f.AcquireTime
	}
	return info, nil
}

// LeaveQueue implements store.Holds.
func (s *Store) LeaveQueue(_ context.Context, kind store.HoldKind, name, ticketID, token, instance string) ([]store.Handoff, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	o := s.begin()
	o.me = instance
	if h := o.set(kind, name, false); h != nil {
		if t := h.ticket(ticketID); t != nil {
			h.removeTicket(t)
			h.dirty = true
		} else if x := h.liveHolder(token, o.now); token != "" && x != nil && x.session == "" {
			// A hand-off granted it before its request gave up: the caller's.
			o.handoffs = append(o.handoffs, store.Handoff{Ticket: ticketID, Token: token, Grant: h.grantOf(x, o.now)})
		}
	}
	return o.end(), nil
}

// RefreshTickets implements store.Holds.
func (s *Store) RefreshTickets(_ context.Context, kind store.HoldKind, name string, tickets []string, lease time.Duration) ([]string, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	if len(tickets) > maxRefresh {
		return nil, fmt.Errorf("RefreshTickets of %d tickets, at most %d per call", len(tickets), maxRefresh)
	}
	o := s.begin()
	defer o.end()
	h := o.set(kind, name, false)
	var gone []string
	for _, id := range tickets {
		var t *ticket
		if h != nil {
			t = h.tickets[id]
		}
		switch {
		case t == nil:
			gone = append(gone, id)
		case !t.live(o.now):
			h.removeTicket(t)
			h.dirty = true
			gone = append(gone, id)
		default:
			t.lease = o.now.Add(ticketLease(lease))
			heap.Fix(&h.byLease, t.idx)
		}
	}
	return gone, nil
}

// CheckFence implements store.Holds.
func (s *Store) CheckFence(_ context.Context, kind store.HoldKind, name string, fence uint64) (bool, error) {
	if err := checkKind(kind); err != nil {
		return false, err
	}
	o := s.begin()
	defer o.end()
	h := o.set(kind, name, false)
	if h == nil {
		return false, nil
	}
	x := h.byFence[fence]
	return x != nil && x.live(o.now), nil
}

// refreshHold reports whether token still holds (kind, name) live and, if
// renew, extends it to deadline (capped by its max hold; never shortened):
// a session's keepalive or check of its holds. Within an op (s.lk held).
func (o *op) refreshHold(kind store.HoldKind, name, token string, deadline time.Time, renew bool) bool {
	h := o.set(kind, name, false)
	x := h.liveHolder(token, o.now)
	if x == nil {
		return false
	}
	if d := capHold(deadline, x.holdUntil); renew && d.After(x.deadline) {
		x.deadline = d
		heap.Fix(&h.byDeadline, x.idx)
	}
	return true
}

// dropHold deletes (kind, name) if token holds it, live or not, and
// reports whether it was live and for how long it had been held then (an
// election's drop is a resignation). Within an op, which wakes the waiters
// that it lets in when it ends.
func (o *op) dropHold(kind store.HoldKind, name, token string) (bool, time.Duration) {
	h := o.set(kind, name, false)
	if h == nil {
		return false, 0
	}
	x := h.holders[token]
	if x == nil {
		return false, 0
	}
	live := x.live(o.now)
	o.removeHolder(h, x)
	return live, o.now.Sub(x.acquired)
}

// sweepHolds cleans up to sweepBatch sets (expired holders, lapsed
// tickets, each bounded), wakes whom that lets in, frees the empty ones,
// and deletes sessions past their grace. It reports how many records it
// removed.
func (s *Store) sweepHolds() int {
	o := s.begin()
	defer o.end()
	n, seen := 0, 0
	for k := range s.holds {
		if seen++; seen > sweepBatch {
			break
		}
		h := o.s.holds[k]
		if !h.touched {
			h.touched = true
			o.sets = append(o.sets, h)
			n += o.clean(h)
		}
	}
	return n + s.sweepSessions(o)
}

type holderHeap []*holder

func (q holderHeap) Len() int           { return len(q) }
func (q holderHeap) Less(i, j int) bool { return q[i].deadline.Before(q[j].deadline) }
func (q holderHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}
func (q *holderHeap) Push(x any) {
	h := x.(*holder)
	h.idx = len(*q)
	*q = append(*q, h)
}
func (q *holderHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return h
}

type ticketHeap []*ticket

func (q ticketHeap) Len() int           { return len(q) }
func (q ticketHeap) Less(i, j int) bool { return q[i].lease.Before(q[j].lease) }
func (q ticketHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}
func (q *ticketHeap) Push(x any) {
	t := x.(*ticket)
	t.idx = len(*q)
	*q = append(*q, t)
}
func (q *ticketHeap) Pop() any {
	old := *q
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return t
}
