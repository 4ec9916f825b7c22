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
	stInFlight
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
	deadline    time.Time // in flight: the claim's deadline
	index       int       // position in the delayed or in-flight heap
	seq         uint64
}

type dedupRec struct {
	id      string
	deliver time.Time
	expire  time.Time
}

// queueRec is one queue. Ready and dead messages are FIFOs; delayed and
// in-flight messages are min-heaps by due time, so upkeep takes the due ones
// from the top.
type queueRec struct {
	mu       sync.Mutex
	seq      uint64 // enqueue order, to break ties between equal due times
	msgs     map[string]*message
	ready    fifo
	dead     fifo
	delayed  msgHeap // by deliver
	inFlight msgHeap // by deadline
	dedup    map[string]dedupRec
}

func (s *Store) queue(name string) *queueRec {
	s.qm.Lock()
	defer s.qm.Unlock()
	q := s.queues[name]
	if q == nil {
		q = &queueRec{
			msgs:     make(map[string]*message),
			dedup:    make(map[string]dedupRec),
			delayed:  msgHeap{due: func(m *message) time.Time { return m.deliver }},
			inFlight: msgHeap{due: func(m *message) time.Time { return m.deadline }},
		}
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

// upkeep makes due delayed messages ready and returns expired claims to ready
// or to the dead letters, at most store.UpkeepBatch in all.
func (q *queueRec) upkeep(now time.Time) {
	for n := 0; n < store.UpkeepBatch; n++ {
		switch {
		case q.delayed.Len() > 0 && !now.Before(q.delayed.top().deliver):
			m := heap.Pop(&q.delayed).(*message)
			m.state = stReady
			q.ready.push(m)
		case q.inFlight.Len() > 0 && !now.Before(q.inFlight.top().deadline):
			m := heap.Pop(&q.inFlight).(*message)
			m.receipt = ""
			if m.attempt >= m.maxAttempts {
				m.state = stDead
				q.dead.push(m)
			} else {
				m.state = stReady
				q.ready.push(m)
			}
		default:
			return
		}
	}
}

// nextDue is how long until the next delayed message is due or the next
// claim expires; 0 if neither exists.
func (q *queueRec) nextDue(now time.Time) time.Duration {
	var due time.Time
	if q.delayed.Len() > 0 {
		due = q.delayed.top().deliver
	}
	if q.inFlight.Len() > 0 && (due.IsZero() || q.inFlight.top().deadline.Before(due)) {
		due = q.inFlight.top().deadline
	}
	if due.IsZero() {
		return 0
	}
	return max(due.Sub(now), time.Microsecond)
}

// Enqueue implements store.Queues.
func (s *Store) Enqueue(_ context.Context, queue string, nm store.NewMessage) (store.Enqueued, error) {
	now := s.now()
	q := s.queue(queue)
	q.mu.Lock()
	q.upkeep(now)
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
		m.state = stDelayed
		heap.Push(&q.delayed, m)
	} else {
		m.state = stReady
		q.ready.push(m)
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
	q.upkeep(now)
	var out store.Claimed
	deadline := now.Add(us(req.Visibility))
	for _, tok := range req.Tokens {
		m := q.ready.pop()
		if m == nil {
			break
		}
		m.attempt++
		m.state = stInFlight
		m.receipt = store.MakeReceipt(m.id, m.attempt, tok)
		m.deadline = deadline
		heap.Push(&q.inFlight, m)
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
func (q *queueRec) claimed(receipt string, now time.Time) *message {
	q.upkeep(now)
	id, _, ok := store.ParseReceipt(receipt)
	if !ok {
		return nil
	}
	m := q.msgs[id]
	if m == nil || m.state != stInFlight || m.receipt != receipt || !now.Before(m.deadline) {
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
		m := q.claimed(r, now)
		if m == nil {
			continue
		}
		heap.Remove(&q.inFlight, m.index)
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
	m := q.claimed(receipt, now)
	if m == nil {
		q.mu.Unlock()
		return store.Nacked{}, store.ErrReceiptExpired
	}
	heap.Remove(&q.inFlight, m.index)
	m.receipt = ""
	if m.attempt >= m.maxAttempts {
		m.state = stDead
		q.dead.push(m)
		q.mu.Unlock()
		return store.Nacked{Dead: true}, nil
	}
	m.deliver = now.Add(us(delay))
	if m.deliver.After(now) {
		m.state = stDelayed
		heap.Push(&q.delayed, m)
	} else {
		m.state = stReady
		q.ready.push(m)
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
	m := q.claimed(receipt, now)
	if m == nil {
		return time.Time{}, store.ErrReceiptExpired
	}
	m.deadline = now.Add(us(visibility))
	heap.Fix(&q.inFlight, m.index)
	return m.deadline, nil
}

// Stats implements store.Queues.
func (s *Store) Stats(_ context.Context, queue string) (store.QueueStats, error) {
	now := s.now()
	q := s.queue(queue)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.upkeep(now)
	return store.QueueStats{
		Ready: int64(q.ready.len()), Delayed: int64(q.delayed.Len()),
		InFlight: int64(q.inFlight.Len()), Dead: int64(q.dead.len()),
	}, nil
}

// Redrive implements store.Queues.
func (s *Store) Redrive(_ context.Context, queue string, max int) (int, error) {
	now := s.now()
	q := s.queue(queue)
	q.mu.Lock()
	q.upkeep(now)
	n := 0
	for ; n < max; n++ {
		m := q.dead.pop()
		if m == nil {
			break
		}
		m.attempt = 0
		m.state = stReady
		q.ready.push(m)
	}
	q.mu.Unlock()
	if n > 0 {
		s.hub.Notify(store.QueueTopic(queue))
	}
	return n, nil
}

// sweepDedup forgets expired dedup entries, at most sweepBatch. q.mu must be
// held.
func (q *queueRec) sweepDedup(now time.Time) {
	seen := 0
	for id, d := range q.dedup {
		if seen++; seen > sweepBatch {
			return
		}
		if !now.Before(d.expire) {
			delete(q.dedup, id)
		}
	}
}

// fifo is a queue of messages.
type fifo struct {
	items []*message
	head  int
}

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) push(m *message) { f.items = append(f.items, m) }

func (f *fifo) pop() *message {
	if f.len() == 0 {
		return nil
	}
	m := f.items[f.head]
	f.items[f.head] = nil
	f.head++
	if f.head >= 64 && f.head*2 >= len(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	return m
}

// msgHeap is a container/heap of messages ordered by due.
type msgHeap struct {
	ms  []*message
	due func(*message) time.Time
}

func (h *msgHeap) Len() int { return len(h.ms) }
func (h *msgHeap) Less(i, j int) bool {
	a, b := h.due(h.ms[i]), h.due(h.ms[j])
	if a.Equal(b) {
		return h.ms[i].seq < h.ms[j].seq
	}
	return a.Before(b)
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
