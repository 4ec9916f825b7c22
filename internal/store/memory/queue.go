package memory

import (
	"container/heap"
	"context"
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
	// due orders the message in its state's heap: delayed, its deliver
	// time; ready, when it became due; claimed, the claim's deadline; dead,
	// when it died.
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
// upkeep takes what has come due from the tops, Claim serves messages in
// the order they became due across the ready, delayed and in-flight heaps,
// and Stats counts by due times.
type queueRec struct {
	mu    sync.Mutex
	seq   uint64
	msgs  map[string]*message
	heaps [stDead + 1]msgHeap // by state
	dedup map[string]dedupRec
}

func (q *queueRec) heap(st msgState) *msgHeap { return &q.heaps[st] }

// put moves m, in no heap, to state st with due time due.
func (q *queueRec) put(m *message, st msgState, due time.Time) {
	m.state, m.due = st, due
	heap.Push(q.heap(st), m)
}

// take removes m from its state's heap.
func (q *queueRec) take(m *message) { heap.Remove(q.heap(m.state), m.index) }

func (s *Store) queue(name string) *queueRec {
	s.qm.Lock()
	defer s.qm.Unlock()
	q := s.queues[name]
	if q == nil {
		q = &queueRec{msgs: make(map[string]*message), dedup: make(map[string]dedupRec)}
		s.queues[name] = q
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

// dropEmptyQueues forgets queues with no messages and no dedup entries.
func (s *Store) dropEmptyQueues() {
	s.qm.Lock()
	defer s.qm.Unlock()
	for name, q := range s.queues {
		q.mu.Lock()
		if len(q.msgs) == 0 && len(q.dedup) == 0 {
			delete(s.queues, name)
		}
		q.mu.Unlock()
	}
}

// upkeep moves or deletes what has ended, at most store.UpkeepBatch of each
// kind: due delayed messages and expired claims with attempts left become
// ready (due at their deliver time, or their claim's deadline), expired
// claims on a last attempt become dead letters, and dead letters older than
// ttl are forgotten. It reports whether a kind had more than a batch.
// Reads do not depend on how far it got.
func (q *queueRec) upkeep(now time.Time, ttl time.Duration) (more bool) {
	for _, st := range []msgState{stDelayed, stInFlight, stLast, stDead} {
		h := q.heap(st)
		limit := now
		if st == stDead {
			limit = now.Add(-ttl)
		}
		n := 0
		for ; n < store.UpkeepBatch && h.Len() > 0 && !h.top().due.After(limit); n++ {
			m := heap.Pop(h).(*message)
			switch st {
			case stDelayed, stInFlight:
				m.receipt = ""
				q.put(m, stReady, m.due)
			case stLast:
				m.receipt = ""
				if m.due.After(now.Add(-ttl)) {
					q.put(m, stDead, m.due)
				} else {
					delete(q.msgs, m.id)
				}
			case stDead:
				delete(q.msgs, m.id)
			}
		}
		more = more || n == store.UpkeepBatch
	}
	return more
}

// nextReady returns the ready message due first: the ready heap's top, or
// a delayed message or an expired claim that upkeep has not moved yet.
func (q *queueRec) nextReady(now time.Time) *message {
	var best *message
	for _, st := range []msgState{stReady, stDelayed, stInFlight} {
		h := q.heap(st)
		if h.Len() == 0 || h.top().due.After(now) {
			continue
		}
		if m := h.top(); best == nil || before(m, best) {
			best = m
		}
	}
	return best
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
	q := s.queue(queue)
	q.mu.Lock()
	q.upkeep(now, s.deadTTL)
	if nm.DedupID != "" {
		if d, ok := q.dedup[nm.DedupID]; ok && now.Before(d.expire) {
			q.mu.Unlock()
			return store.Enqueued{ID: d.id, DeliverTime: d.deliver, Duplicate: true}, nil
		}
	}
	deliver := now.Add(us(nm.Delay))
	if !nm.DeliverTime.IsZero() {
		deliver = nm.DeliverTime.Truncate(time.Microsecond)
		if deliver.Before(now) {
			deliver = now
		}
	}
	m := &message{
		id: nm.ID, payload: append([]byte{}, nm.Payload...), enqueued: now, deliver: deliver,
		maxAttempts: nm.MaxAttempts, seq: q.seq,
	}
	q.seq++
	q.msgs[m.id] = m
	if deliver.After(now) {
		q.put(m, stDelayed, deliver)
	} else {
		q.put(m, stReady, deliver)
	}
	if nm.DedupID != "" {
		q.dedup[nm.DedupID] = dedupRec{id: m.id, deliver: deliver, expire: now.Add(us(nm.DedupWindow))}
	}
	q.mu.Unlock()
	s.hub.Notify(store.QueueTopic(queue))
	return store.Enqueued{ID: m.id, DeliverTime: deliver}, nil
}

// Claim implements store.Queues.
func (s *Store) Claim(_ context.Context, queue string, req store.Claim) (store.Claimed, error) {
	now := s.now()
	q := s.queue(queue)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.upkeep(now, s.deadTTL)
	var out store.Claimed
	deadline := now.Add(us(req.Visibility))
	for _, tok := range req.Tokens {
		m := q.nextReady(now)
		if m == nil {
			break
		}
		q.take(m)
		m.attempt++
		m.receipt = store.MakeReceipt(m.id, m.attempt, tok)
		if m.attempt >= m.maxAttempts {
			q.put(m, stLast, deadline)
		} else {
			q.put(m, stInFlight, deadline)
		}
		out.Messages = append(out.Messages, store.Message{
			ID: m.id, Payload: m.payload, Receipt: m.receipt, Attempt: m.attempt, MaxAttempts: m.maxAttempts,
			EnqueueTime: m.enqueued, DeliverTime: m.deliver, ExpireTime: deadline,
		})
	}
	out.NextDue = q.nextDue(now)
	return out, nil
}

// claimed returns the message of a live claim, after upkeep. q.mu must be
// held.
func (q *queueRec) claimed(receipt string, now time.Time, ttl time.Duration) *message {
	q.upkeep(now, ttl)
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
	q := s.queue(queue)
	q.mu.Lock()
	defer q.mu.Unlock()
	acked := make([]bool, len(receipts))
	for i, r := range receipts {
		m := q.claimed(r, now, s.deadTTL)
		if m == nil {
			continue
		}
		q.take(m)
		delete(q.msgs, m.id)
		acked[i] = true
	}
	return acked, nil
}

// Nack implements store.Queues.
func (s *Store) Nack(_ context.Context, queue, receipt string, delay time.Duration) (store.Nacked, error) {
	now := s.now()
	q := s.queue(queue)
	q.mu.Lock()
	m := q.claimed(receipt, now, s.deadTTL)
	if m == nil {
		q.mu.Unlock()
		return store.Nacked{}, store.ErrReceiptExpired
	}
	q.take(m)
	m.receipt = ""
	if m.state == stLast {
		q.put(m, stDead, now)
		q.mu.Unlock()
		return store.Nacked{Dead: true}, nil
	}
	m.deliver = now.Add(us(delay))
	if m.deliver.After(now) {
		q.put(m, stDelayed, m.deliver)
	} else {
		q.put(m, stReady, m.deliver)
	}
	q.mu.Unlock()
	s.hub.Notify(store.QueueTopic(queue))
	return store.Nacked{DeliverTime: m.deliver}, nil
}

// ExtendClaim implements store.Queues.
func (s *Store) ExtendClaim(_ context.Context, queue, receipt string, visibility time.Duration) (time.Time, error) {
	now := s.now()
	q := s.queue(queue)
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.claimed(receipt, now, s.deadTTL)
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
	q := s.queue(queue)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.upkeep(now, s.deadTTL)
	forgotten := now.Add(-s.deadTTL)
	delayed, inFlight, last, dead := q.heap(stDelayed), q.heap(stInFlight), q.heap(stLast), q.heap(stDead)
	dueDelayed, expired, ended := delayed.countDue(now), inFlight.countDue(now), last.countDue(now)
	return store.QueueStats{
		Ready:    int64(q.heap(stReady).Len() + dueDelayed + expired),
		Delayed:  int64(delayed.Len() - dueDelayed),
		InFlight: int64(inFlight.Len() - expired + last.Len() - ended),
		Dead:     int64(dead.Len() - dead.countDue(forgotten) + ended - last.countDue(forgotten)),
	}, nil
}

// Redrive implements store.Queues.
func (s *Store) Redrive(_ context.Context, queue string, max int) (int, error) {
	now := s.now()
	q := s.queue(queue)
	q.mu.Lock()
	q.upkeep(now, s.deadTTL)
	forgotten := now.Add(-s.deadTTL)
	n := 0
	for ; n < max; n++ {
		// The oldest dead letter, or a claim that ended on its last attempt
		// and that upkeep left (more than a batch ended), whichever died
		// first.
		var m *message
		for _, st := range []msgState{stDead, stLast} {
			h := q.heap(st)
			// Forgotten ones that upkeep left (more than a batch) go first:
			// deleting them is work owed anyway.
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
		if m == nil {
			break
		}
		q.take(m)
		m.attempt, m.receipt, m.seq = 0, "", q.seq
		q.seq++
		q.put(m, stReady, now)
	}
	q.mu.Unlock()
	if n > 0 {
		s.hub.Notify(store.QueueTopic(queue))
	}
	return n, nil
}

// sweep does a queue's upkeep for the store's sweep, so that the dead
// letters of a queue nobody uses any more are forgotten too, and forgets
// expired dedup entries, at most sweepBatch. It reports whether there may
// be more to do.
func (q *queueRec) sweep(now time.Time, ttl time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	more := q.upkeep(now, ttl)
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

func (h *msgHeap) Len() int           { return len(h.ms) }
func (h *msgHeap) Less(i, j int) bool { return before(h.ms[i], h.ms[j]) }
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
