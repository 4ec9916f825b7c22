package memory

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/coordd/coordd/internal/store"
)

type msgState int

const (
	stDelayed msgState = iota
	stReady
	stInFlight // claimed, with attempts left
	stLast     // claimed on its last attempt
	stDead
	stWaiting // behind its group's head: in no heap
)

type message struct {
	id          string
	payload     []byte
	enqueued    time.Time
	deliver     time.Time
	maxAttempts int
	attempt     int
	state       msgState
	receipt     string
	prio        int
	group       string
	// due orders the message in its state's heap: delayed, its deliver
	// time; ready, when it became due (after its priority, highest first);
	// claimed, the claim's deadline; dead, when it died.
	due   time.Time
	seq   uint64 // enqueue order (renewed by Redrive), to break ties of due
	index int    // position in its state's heap
}

type dedupRec struct {
	id      string
	deliver time.Time
	expire  time.Time
}

// queueRec is one queue: a min-heap by (due, seq) for each state, so that
// upkeep takes what has come due from the tops and Stats counts by due
// times; the ready heap, which Claim serves from, by priority first
// (highest first). A group's messages behind its head wait in its list
// (state stWaiting), and the next becomes head when the head is acked or
// dies (advance), as in the Redis store.
type queueRec struct {
	mu     sync.Mutex
	seq    uint64
	msgs   map[string]*message
	heaps  [stDead + 1]msgHeap // by state
	dedup  map[string]dedupRec
	groups map[string][]*message // head first
	wait   int                   // messages in stWaiting
	// conf: the queue's settings; tat, its claim rate's theoretical
	// arrival time (rateTake). A record with settings is kept when empty.
	conf store.QueueSettings
	tat  float64
	// slots: a partitioned queue's reservations (ReserveClaims), by
	// token, until when.
	slots map[string]time.Time
	// gone: the sweep dropped the record (it was empty); a call that
	// locked it before seeing that looks it up again (writeQueue).
	gone bool
}

func (q *queueRec) heap(st msgState) *msgHeap { return &q.heaps[st] }

// put moves m, in no heap, to state st with due time due.
func (q *queueRec) put(m *message, st msgState, due time.Time) {
	m.state, m.due = st, due
	heap.Push(q.heap(st), m)
}

// take removes m from its state's heap.
func (q *queueRec) take(m *message) { heap.Remove(q.heap(m.state), m.index) }

// place puts m, in no heap, where its deliver time says: delayed, or
// ready as of ready (now, or its deliver time).
func (q *queueRec) place(m *message, now, ready time.Time) {
	if m.deliver.After(now) {
		q.put(m, stDelayed, m.deliver)
	} else {
		q.put(m, stReady, ready)
	}
}

// join makes m, in no heap, its group's last message: the head (placed, as
// place), or waiting behind it.
func (q *queueRec) join(m *message, now, ready time.Time) {
	if m.group == "" {
		q.place(m, now, ready)
		return
	}
	g := q.groups[m.group]
	q.groups[m.group] = append(g, m)
	if len(g) == 0 {
		q.place(m, now, ready)
	} else {
		m.state = stWaiting
		q.wait++
	}
}

// advance ends the turn of head, its group's head (acked, dead or
// forgotten): the next message, if any, becomes the head and is placed.
// It reports whether that one is ready.
func (q *queueRec) advance(head *message, now time.Time) bool {
	if head.group == "" {
		return false
	}
	g := q.groups[head.group]
	if len(g) == 0 || g[0] != head {
		return false
	}
	g = g[1:]
	if len(g) == 0 {
		delete(q.groups, head.group)
		return false
	}
	q.groups[head.group] = g
	next := g[0]
	q.wait--
	if next.deliver.Before(now) {
		next.deliver = now // claimable from its turn on
	}
	q.place(next, now, now)
	return next.state == stReady
}

// writeQueue returns queue name's record, locked, made if it has none.
// A record the sweep dropped (gone) is never returned: the sweep drops a
// record between finding it and locking it only if it is empty, and marks
// it, so a write never lands where nobody will look again.
func (s *Store) writeQueue(name string) *queueRec {
	for {
		s.qm.Lock()
		q := s.queues[name]
		if q == nil {
			q = &queueRec{msgs: make(map[string]*message), dedup: make(map[string]dedupRec), groups: make(map[string][]*message)}
			s.queues[name] = q
		}
		s.qm.Unlock()
		q.mu.Lock()
		if !q.gone {
			return q
		}
		q.mu.Unlock()
	}
}

// readQueue returns queue name's record, locked, or nil if it has none:
// a call that finds no queue creates none, so that asking about names
// costs no memory. A dropped record held nothing, and is answered as none.
func (s *Store) readQueue(name string) *queueRec {
	s.qm.Lock()
	q := s.queues[name]
	s.qm.Unlock()
	if q == nil {
		return nil
	}
	q.mu.Lock()
	if q.gone {
		q.mu.Unlock()
		return nil
	}
	return q
}

func (s *Store) queueList() []*queueRec {
	s.qm.Lock()
	defer s.qm.Unlock()
	l := make([]*queueRec, 0, len(s.queues))
	for _, q := range s.queues {
		l = append(l, q)
	}
	return l
}

// dropEmptyQueues forgets queues with no messages, no dedup entries, no
// settings and no live reservations.
func (s *Store) dropEmptyQueues() {
	now := s.now()
	s.qm.Lock()
	defer s.qm.Unlock()
	for name, q := range s.queues {
		q.mu.Lock()
		for t, until := range q.slots {
			if !now.Before(until) {
				delete(q.slots, t)
			}
		}
		if len(q.msgs) == 0 && len(q.dedup) == 0 && !q.conf.Capped() && len(q.slots) == 0 {
			q.gone = true
			delete(s.queues, name)
		}
		q.mu.Unlock()
	}
}

// upkeep moves or deletes what has come due or ended, at most
// store.UpkeepBatch of each kind: due delayed messages and expired claims
// with attempts left become ready, in the order they came due; expired
// claims on a last attempt become dead letters (their groups move on), and
// dead letters older than ttl are forgotten. It reports whether a kind had
// more than a batch, and whether a group's next message became ready.
// Reads do not depend on how far it got.
func (q *queueRec) upkeep(now time.Time, ttl time.Duration) (more, woke bool) {
	delayed, inFlight := q.heap(stDelayed), q.heap(stInFlight)
	n := 0
	for ; n < store.UpkeepBatch; n++ {
		var h *msgHeap
		for _, c := range []*msgHeap{delayed, inFlight} {
			if c.Len() > 0 && !c.top().due.After(now) && (h == nil || before(c.top(), h.top())) {
				h = c
			}
		}
		if h == nil {
			break
		}
		m := heap.Pop(h).(*message)
		m.receipt = ""
		q.put(m, stReady, m.due)
	}
	more = n == store.UpkeepBatch
	for _, st := range []msgState{stLast, stDead} {
		h := q.heap(st)
		limit := now
		if st == stDead {
			limit = now.Add(-ttl)
		}
		n := 0
		for ; n < store.UpkeepBatch && h.Len() > 0 && !h.top().due.After(limit); n++ {
			m := heap.Pop(h).(*message)
			switch st {
			case stLast:
				m.receipt = ""
				if m.due.After(now.Add(-ttl)) {
					q.put(m, stDead, m.due)
				} else {
					delete(q.msgs, m.id)
				}
				woke = q.advance(m, now) || woke
			case stDead:
				delete(q.msgs, m.id)
			}
		}
		more = more || n == store.UpkeepBatch
	}
	return more, woke
}

// nextDue is how long until the next delayed message is due or the next
// claim with attempts left expires (what can make a message ready); 0 if
// neither exists. A heap whose top has come due holds a ready message, and
// is skipped: the waiter needs no timer then.
func (q *queueRec) nextDue(now time.Time) time.Duration {
	var due time.Time
	for _, st := range []msgState{stDelayed, stInFlight} {
		h := q.heap(st)
		if h.Len() == 0 || !h.top().due.After(now) {
			continue
		}
		if t := h.top().due; due.IsZero() || t.Before(due) {
			due = t
		}
	}
	if due.IsZero() {
		return 0
	}
	return due.Sub(now)
}

// Enqueue implements store.Queues.
func (s *Store) Enqueue(_ context.Context, queue string, nm store.NewMessage) (store.Enqueued, error) {
	now := s.now()
	q := s.writeQueue(queue)
	if nm.DedupID != "" {
		if d, ok := q.dedup[nm.DedupID]; ok && now.Before(d.expire) {
			if !nm.Replace {
				q.mu.Unlock()
				return store.Enqueued{ID: d.id, DeliverTime: d.deliver, Duplicate: true}, nil
			}
			if m := q.msgs[d.id]; m != nil && m.attempt == 0 && (m.state == stDelayed || m.state == stReady || m.state == stWaiting) {
				deliver := q.replace(m, nm, now)
				q.dedup[nm.DedupID] = dedupRec{id: m.id, deliver: deliver, expire: now.Add(us(nm.DedupWindow))}
				q.mu.Unlock()
				s.hub.Notify(store.QueueTopic(queue))
				return store.Enqueued{ID: m.id, DeliverTime: deliver, Replaced: true}, nil
			}
		}
	}
	if nm.MaxMessages > 0 && len(q.msgs) >= nm.MaxMessages {
		q.mu.Unlock()
		return store.Enqueued{}, store.ErrQueueFull
	}
	deliver := deliverTime(nm, now)
	m := &message{
		id: nm.ID, payload: append([]byte{}, nm.Payload...), enqueued: now, deliver: deliver,
		maxAttempts: nm.MaxAttempts, seq: q.seq, prio: nm.Priority, group: nm.Group,
	}
	q.seq++
	q.msgs[m.id] = m
	q.join(m, now, deliver)
	if nm.DedupID != "" {
		q.dedup[nm.DedupID] = dedupRec{id: m.id, deliver: deliver, expire: now.Add(us(nm.DedupWindow))}
	}
	q.mu.Unlock()
	s.hub.Notify(store.QueueTopic(queue))
	return store.Enqueued{ID: m.id, DeliverTime: deliver}, nil
}

// deliverTime is when nm is due: its DeliverTime (now if past), else now
// + its Delay.
func deliverTime(nm store.NewMessage, now time.Time) time.Time {
	if nm.DeliverTime.IsZero() {
		return now.Add(us(nm.Delay))
	}
	if t := nm.DeliverTime.Truncate(time.Microsecond); t.After(now) {
		return t
	}
	return now
}

// replace gives m, not claimed since its enqueue or redrive, nm's
// payload, deliver time and priority, and places it anew (one waiting
// behind its group's head stays there). It returns the deliver time.
func (q *queueRec) replace(m *message, nm store.NewMessage, now time.Time) time.Time {
	m.payload, m.deliver, m.prio = append([]byte{}, nm.Payload...), deliverTime(nm, now), nm.Priority
	if m.state != stWaiting {
		q.take(m)
		q.place(m, now, m.deliver)
	}
	return m.deliver
}

// Claim implements store.Queues.
func (s *Store) Claim(_ context.Context, queue string, req store.Claim) (store.Claimed, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return store.Claimed{}, nil
	}
	_, woke := q.upkeep(now, s.deadTTL)
	var out store.Claimed
	deadline := now.Add(us(req.Visibility))
	ready := q.heap(stReady)
	n, rateNext, held := min(ready.Len(), len(req.Tokens)), time.Duration(0), ""
	if req.Reserved { // the partitioned queue's reservations counted the caps
		if q.conf.Paused {
			n, held = 0, "paused"
		}
	} else {
		n, rateNext, held = q.allowed(n, now, q.live(now), q.lastFree(now))
	}
	out.HeldBack = held
	for _, tok := range req.Tokens[:n] {
		if ready.Len() == 0 {
			break
		}
		m := heap.Pop(ready).(*message)
		m.attempt++
		m.receipt = store.MakeReceipt(m.id, m.attempt, tok)
		if m.attempt >= m.maxAttempts {
			q.put(m, stLast, deadline)
		} else {
			q.put(m, stInFlight, deadline)
		}
		out.Messages = append(out.Messages, store.Message{
			ID: m.id, Payload: m.payload, Receipt: m.receipt, Attempt: m.attempt, MaxAttempts: m.maxAttempts,
			EnqueueTime: m.enqueued, DeliverTime: m.deliver, ExpireTime: deadline, Priority: m.prio, Group: m.group,
		})
	}
	out.NextDue = q.nextDue(now)
	if rateNext > 0 && (out.NextDue == 0 || rateNext < out.NextDue) {
		out.NextDue = rateNext
	}
	q.mu.Unlock()
	if woke {
		s.hub.Notify(store.QueueTopic(queue))
	}
	return out, nil
}

// atCap reports whether the queue was at its cap on claims in flight
// before freed claims ended (then a Claim may have been held back by it,
// and the freed slots must wake its waiters). q.mu is held.
func (q *queueRec) atCap(freed int, now time.Time) bool {
	return freed > 0 && q.conf.MaxInFlight > 0 && q.live(now)+freed >= q.conf.MaxInFlight
}

// live counts the queue's live claims. q.mu is held.
func (q *queueRec) live(now time.Time) int {
	return q.heap(stInFlight).Len() - q.heap(stInFlight).countDue(now) + q.heap(stLast).Len() - q.heap(stLast).countDue(now)
}

// lastFree is how long until the first claim on its last attempt ends
// (0: none), which frees a slot but makes nothing ready (nextDue leaves
// it out). q.mu is held.
func (q *queueRec) lastFree(now time.Time) time.Duration {
	if h := q.heap(stLast); h.Len() > 0 && h.top().due.After(now) {
		return h.top().due.Sub(now)
	}
	return 0
}

// allowed is how many of ready messages a Claim may hand out under the
// queue's settings, with live claims that count against MaxInFlight (the
// first of which not told by nextDue ends in freeAt), and takes that many
// of the claim rate's tokens; rateNext is how long until what a setting
// held back may be handed out (the next token, or a claim's end: 0 if
// nextDue tells already), held the setting that held some back. q.mu is
// held and upkeep done.
func (q *queueRec) allowed(ready int, now time.Time, live int, freeAt time.Duration) (n int, rateNext time.Duration, held string) {
	c := q.conf
	if c.Paused {
		if ready > 0 {
			held = "paused"
		}
		return 0, 0, held
	}
	n = ready
	if c.MaxInFlight > 0 {
		if n = max(0, min(n, c.MaxInFlight-live)); n < ready {
			held, rateNext = "max_in_flight", freeAt
		}
	}
	if c.RateLimit > 0 && n > 0 {
		var next float64
		var took int
		took, q.tat, next = store.RateTake(c, q.tat, float64(now.UnixMicro()), n)
		if took < n {
			held = "claim_rate"
			rateNext = time.Duration(next) * time.Microsecond
		}
		n = took
	}
	return n, rateNext, held
}

// claimed returns the message of a live claim. q.mu must be held.
func (q *queueRec) claimed(receipt string, now time.Time) *message {
	id, _, ok := store.ParseReceipt(receipt)
	if !ok {
		return nil
	}
	m := q.msgs[id]
	if m == nil || (m.state != stInFlight && m.state != stLast) || m.receipt != receipt || !now.Before(m.due) {
		return nil
	}
	return m
}

// Ack implements store.Queues.
func (s *Store) Ack(_ context.Context, queue string, receipts []string) ([]bool, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return make([]bool, len(receipts)), nil
	}
	acked := make([]bool, len(receipts))
	woke, freed := false, 0
	for i, r := range receipts {
		m := q.claimed(r, now)
		if m == nil {
			continue
		}
		q.take(m)
		delete(q.msgs, m.id)
		woke = q.advance(m, now) || woke
		acked[i] = true
		freed++
	}
	woke = woke || q.atCap(freed, now)
	q.mu.Unlock()
	if woke {
		s.hub.Notify(store.QueueTopic(queue))
	}
	return acked, nil
}

// Nack implements store.Queues.
func (s *Store) Nack(_ context.Context, queue, receipt string, delay time.Duration) (store.Nacked, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return store.Nacked{}, store.ErrReceiptExpired
	}
	m := q.claimed(receipt, now)
	if m == nil {
		q.mu.Unlock()
		return store.Nacked{}, store.ErrReceiptExpired
	}
	q.take(m)
	m.receipt = ""
	if m.state == stLast {
		q.put(m, stDead, now)
		woke := q.advance(m, now) || q.atCap(1, now)
		q.mu.Unlock()
		if woke {
			s.hub.Notify(store.QueueTopic(queue))
		}
		return store.Nacked{Dead: true}, nil
	}
	m.deliver = now.Add(us(delay))
	deliver := m.deliver // m is the queue's, read under its lock only
	q.place(m, now, now)
	q.mu.Unlock()
	s.hub.Notify(store.QueueTopic(queue))
	return store.Nacked{DeliverTime: deliver}, nil
}

// ExtendClaim implements store.Queues.
func (s *Store) ExtendClaim(_ context.Context, queue, receipt string, visibility time.Duration) (time.Time, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return time.Time{}, store.ErrReceiptExpired
	}
	defer q.mu.Unlock()
	m := q.claimed(receipt, now)
	if m == nil {
		return time.Time{}, store.ErrReceiptExpired
	}
	m.due = now.Add(us(visibility))
	heap.Fix(q.heap(m.state), m.index)
	return m.due, nil
}

// Stats implements store.Queues. It counts by due times, so it is exact
// even when more has come due than upkeep has moved: counting what has come
// due in a heap visits only those entries.
func (s *Store) Stats(_ context.Context, queue string) (store.QueueStats, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return store.QueueStats{}, nil
	}
	defer q.mu.Unlock()
	forgotten := now.Add(-s.deadTTL)
	delayed, inFlight, last, dead := q.heap(stDelayed), q.heap(stInFlight), q.heap(stLast), q.heap(stDead)
	dueDelayed, expired, ended := delayed.countDue(now), inFlight.countDue(now), last.countDue(now)
	return store.QueueStats{
		Ready:    int64(q.heap(stReady).Len() + dueDelayed + expired),
		Delayed:  int64(delayed.Len() - dueDelayed + q.wait),
		InFlight: int64(inFlight.Len() - expired + last.Len() - ended),
		Dead:     int64(dead.Len() - dead.countDue(forgotten) + ended - last.countDue(forgotten)),
		Paused:   q.conf.Paused,
	}, nil
}

// oldestDead returns the oldest dead letter, or claim that ended on its
// last attempt and that upkeep left (more than a batch ended), whichever
// died first; nil if none. Forgotten ones (dead before forgotten) that
// upkeep left go first: deleting them is work owed anyway. q.mu is held.
func (q *queueRec) oldestDead(now, forgotten time.Time) *message {
	var m *message
	for _, st := range []msgState{stDead, stLast} {
		h := q.heap(st)
		for h.Len() > 0 && !h.top().due.After(forgotten) {
			delete(q.msgs, heap.Pop(h).(*message).id)
		}
		if h.Len() == 0 || h.top().due.After(now) {
			continue
		}
		if t := h.top(); m == nil || before(t, m) {
			m = t
		}
	}
	return m
}

// Redrive implements store.Queues.
func (s *Store) Redrive(_ context.Context, queue string, max int) (int, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return 0, nil
	}
	q.upkeep(now, s.deadTTL)
	forgotten := now.Add(-s.deadTTL)
	n := 0
	for ; n < max; n++ {
		m := q.oldestDead(now, forgotten)
		if m == nil {
			break
		}
		q.revive(m, now)
	}
	q.mu.Unlock()
	if n > 0 {
		s.hub.Notify(store.QueueTopic(queue))
	}
	return n, nil
}

// revive makes m, a dead letter (dead, or a claim that ended on its last
// attempt), ready now with its attempts reset and a new place in the
// enqueue order, as if enqueued now.
func (q *queueRec) revive(m *message, now time.Time) {
	q.take(m)
	if m.state == stLast {
		q.advance(m, now) // it was its group's head: the group moves on first
	}
	m.attempt, m.receipt, m.seq, m.enqueued = 0, "", q.seq, now
	q.seq++
	q.join(m, now, now)
}

// isDead reports whether m is a dead letter at now: dead, or a claim that
// ended on its last attempt, and not forgotten.
func (q *queueRec) isDead(m *message, now time.Time, ttl time.Duration) bool {
	switch m.state {
	case stDead:
	case stLast:
		if m.due.After(now) {
			return false
		}
	default:
		return false
	}
	return m.due.After(now.Add(-ttl))
}

// RedriveIDs implements store.Queues.
func (s *Store) RedriveIDs(_ context.Context, queue string, ids []string) (int, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return 0, nil
	}
	_, woke := q.upkeep(now, s.deadTTL)
	n := 0
	for _, id := range ids {
		if m := q.msgs[id]; m != nil && q.isDead(m, now, s.deadTTL) {
			q.revive(m, now)
			n++
		}
	}
	q.mu.Unlock()
	if n > 0 || woke {
		s.hub.Notify(store.QueueTopic(queue))
	}
	return n, nil
}

// deadAfter reports whether m comes after pos in the order of dead letters.
func deadAfter(m *message, pos store.DeadPos) bool {
	if !m.due.Equal(pos.DeadTime) {
		return m.due.After(pos.DeadTime)
	}
	if m.seq != pos.Seq {
		return m.seq > pos.Seq
	}
	return m.id > pos.ID
}

// ListDead implements store.Queues. It walks the dead and ended-claim
// heaps in order from their tops (a frontier of heap nodes), so a page
// costs in the dead letters before it and the page, not in the rest.
func (s *Store) ListDead(_ context.Context, queue string, after store.DeadPos, max, preview int) ([]store.DeadLetter, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return nil, nil
	}
	defer q.mu.Unlock()
	forgotten := now.Add(-s.deadTTL)
	var front frontier
	for _, st := range []msgState{stDead, stLast} {
		if h := q.heap(st); h.Len() > 0 {
			heap.Push(&front, node{h, 0})
		}
	}
	var out []store.DeadLetter
	for front.Len() > 0 && len(out) < max {
		nd := heap.Pop(&front).(node)
		m := nd.h.ms[nd.i]
		if m.state == stLast && m.due.After(now) {
			continue // a live claim, and so are its children
		}
		for _, c := range []int{2*nd.i + 1, 2*nd.i + 2} {
			if c < nd.h.Len() {
				heap.Push(&front, node{nd.h, c})
			}
		}
		if !m.due.After(forgotten) || !deadAfter(m, after) {
			continue
		}
		out = append(out, store.DeadLetter{
			ID: m.id, Preview: append([]byte{}, m.payload[:min(preview, len(m.payload))]...), Size: len(m.payload),
			Attempts: m.attempt, EnqueueTime: m.enqueued, DeadTime: m.due, Priority: m.prio, Group: m.group, Seq: m.seq,
		})
	}
	return out, nil
}

// node is a heap node, for ListDead's walk.
type node struct {
	h *msgHeap
	i int
}

// frontier is a container/heap of heap nodes in the order of dead letters.
type frontier []node

func (f frontier) Len() int           { return len(f) }
func (f frontier) Less(i, j int) bool { return before(f[i].h.ms[f[i].i], f[j].h.ms[f[j].i]) }
func (f frontier) Swap(i, j int)      { f[i], f[j] = f[j], f[i] }
func (f *frontier) Push(x any)        { *f = append(*f, x.(node)) }
func (f *frontier) Pop() any {
	x := (*f)[len(*f)-1]
	*f = (*f)[:len(*f)-1]
	return x
}

// PurgeDead implements store.Queues.
func (s *Store) PurgeDead(_ context.Context, queue string, max int) (int64, int64, error) {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return 0, 0, nil
	}
	_, woke := q.upkeep(now, s.deadTTL)
	forgotten := now.Add(-s.deadTTL)
	n := 0
	for ; n < max; n++ {
		m := q.oldestDead(now, forgotten)
		if m == nil {
			break
		}
		q.take(m)
		if m.state == stLast {
			woke = q.advance(m, now) || woke
		}
		delete(q.msgs, m.id)
	}
	last, dead := q.heap(stLast), q.heap(stDead)
	remaining := dead.Len() - dead.countDue(forgotten) + last.countDue(now) - last.countDue(forgotten)
	q.mu.Unlock()
	if woke {
		s.hub.Notify(store.QueueTopic(queue))
	}
	return int64(n), int64(remaining), nil
}

// sweep does a queue's upkeep for the store's sweep, so that the dead
// letters of a queue nobody uses any more are forgotten too, and forgets
// expired dedup entries, at most sweepBatch. It reports whether there may
// be more to do.
func (q *queueRec) sweep(now time.Time, ttl time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	more, _ := q.upkeep(now, ttl)
	seen, n := 0, 0
	for id, d := range q.dedup {
		if seen++; seen > sweepBatch {
			break
		}
		if !now.Before(d.expire) {
			delete(q.dedup, id)
			n++
		}
	}
	return more || n > sweepBatch/4
}

// before orders messages by due time, then enqueue order.
func before(a, b *message) bool {
	if a.due.Equal(b.due) {
		return a.seq < b.seq
	}
	return a.due.Before(b.due)
}

// msgHeap is a container/heap of messages ordered by before.
type msgHeap struct{ ms []*message }

func (h *msgHeap) Len() int { return len(h.ms) }
func (h *msgHeap) Less(i, j int) bool {
	a, b := h.ms[i], h.ms[j]
	if a.state == stReady && a.prio != b.prio {
		return a.prio > b.prio
	}
	return before(a, b)
}
func (h *msgHeap) Swap(i, j int) {
	h.ms[i], h.ms[j] = h.ms[j], h.ms[i]
	h.ms[i].index, h.ms[j].index = i, j
}
func (h *msgHeap) Push(x any) {
	m := x.(*message)
	m.index = len(h.ms)
	h.ms = append(h.ms, m)
}
func (h *msgHeap) Pop() any {
	m := h.ms[len(h.ms)-1]
	h.ms[len(h.ms)-1] = nil
	h.ms = h.ms[:len(h.ms)-1]
	return m
}
func (h *msgHeap) top() *message { return h.ms[0] }

// countDue counts the messages due by t. A node due after t has no child
// due by t, so the walk visits only the k counted and their children:
// O(k), nothing when upkeep is up to date.
func (h *msgHeap) countDue(t time.Time) int {
	n := 0
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h.ms) || h.ms[i].due.After(t) {
			continue
		}
		n++
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return n
}

// PartitionName implements store.Queues: one process has one shard, so
// the base name.
func (s *Store) PartitionName(queue string, p, k int) string { return store.PartitionBase(queue, p, k) }

// ReserveClaims implements store.Queues.
func (s *Store) ReserveClaims(_ context.Context, queue string, tokens []string, hold time.Duration) (store.Reserved, error) {
	now := s.now()
	q := s.writeQueue(queue)
	defer q.mu.Unlock()
	for t, until := range q.slots {
		if !now.Before(until) {
			delete(q.slots, t)
		}
	}
	n, next, held := q.allowed(len(tokens), now, len(q.slots), 0)
	if q.slots == nil && n > 0 {
		q.slots = map[string]time.Time{}
	}
	for _, t := range tokens[:n] {
		q.slots[t] = now.Add(us(hold))
	}
	if held == "max_in_flight" { // a slot frees at the first reservation's end
		var first time.Time
		for _, until := range q.slots {
			if first.IsZero() || until.Before(first) {
				first = until
			}
		}
		next = first.Sub(now)
	}
	return store.Reserved{N: n, NextDue: next, HeldBack: held}, nil
}

// ReleaseClaims implements store.Queues.
func (s *Store) ReleaseClaims(_ context.Context, queue string, tokens []string, unused bool) error {
	now := s.now()
	q := s.readQueue(queue)
	if q == nil {
		return nil
	}
	live, freed := len(q.slots), 0
	for _, t := range tokens {
		if until, ok := q.slots[t]; ok {
			delete(q.slots, t)
			if now.Before(until) {
				freed++
			}
		}
	}
	if unused && freed > 0 && q.conf.RateLimit > 0 {
		q.tat = store.RateRefund(q.conf, q.tat, float64(now.UnixMicro()), freed)
	}
	wake := freed > 0 && q.conf.MaxInFlight > 0 && live >= q.conf.MaxInFlight
	q.mu.Unlock()
	if wake {
		s.hub.Notify(store.QueueTopic(queue))
	}
	return nil
}

// HoldReservations implements store.Queues.
func (s *Store) HoldReservations(_ context.Context, queue string, tokens []string, hold time.Duration) error {
	now := s.now()
	q := s.writeQueue(queue)
	defer q.mu.Unlock()
	if q.slots == nil {
		q.slots = map[string]time.Time{}
	}
	for _, t := range tokens {
		q.slots[t] = now.Add(us(hold))
	}
	return nil
}

// QueueSettings implements store.Queues.
func (s *Store) QueueSettings(_ context.Context, queue string) (store.QueueSettings, error) {
	q := s.readQueue(queue)
	if q == nil {
		return store.QueueSettings{}, nil
	}
	defer q.mu.Unlock()
	return q.conf, nil
}

// PauseQueue implements store.Queues.
func (s *Store) PauseQueue(_ context.Context, queue string, paused bool) (store.QueueSettings, error) {
	return s.setConf(queue, func(c *store.QueueSettings) { c.Paused = paused }), nil
}

// ConfigureQueue implements store.Queues.
func (s *Store) ConfigureQueue(_ context.Context, queue string, caps store.QueueSettings) (store.QueueSettings, error) {
	return s.setConf(queue, func(c *store.QueueSettings) {
		caps.Paused = c.Paused
		*c = caps
	}), nil
}

// setConf changes queue's settings by f and wakes the queue's waiters
// (a resume or a raised cap may let them claim). A new or changed rate
// starts with a full bucket.
func (s *Store) setConf(queue string, f func(*store.QueueSettings)) store.QueueSettings {
	q := s.writeQueue(queue)
	old := q.conf
	f(&q.conf)
	if q.conf.RateLimit != old.RateLimit || q.conf.RatePeriod != old.RatePeriod {
		q.tat = 0
	}
	c := q.conf
	q.mu.Unlock()
	s.hub.Notify(store.QueueTopic(queue))
	return c
}

// Partitionings implements store.Queues.
func (s *Store) Partitionings(_ context.Context, queue string, k int) ([]int, error) {
	s.qm.Lock()
	defer s.qm.Unlock()
	ks := s.parts[queue]
	for _, n := range []int{1, k} {
		if i, found := slices.BinarySearch(ks, n); !found {
			ks = slices.Insert(ks, i, n)
		}
	}
	s.parts[queue] = ks
	return slices.Clone(ks), nil
}
