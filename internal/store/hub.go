package store

import "sync"

// Hub fans wake-ups out to the subscriptions of this process. Backends embed
// one: the memory store notifies it directly, the Redis store from its
// pub/sub messages.
//
// A Subscription's channel has room for one wake-up; further ones while it is
// full are merged, which is all a waiter needs, since it re-checks state.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{}
}

// Subscription receives the wake-ups of one topic.
type Subscription struct {
	c      chan struct{}
	f      func() // set by OnWake: called instead of filling c
	hub    *Hub
	topic  string
	onLast func() // called when the last subscription of the topic closes
	once   sync.Once
}

// C receives a value after each wake-up (merged while unread), until OnWake
// is called.
func (s *Subscription) C() <-chan struct{} { return s.c }

// OnWake makes every later wake-up call f instead of filling C, and calls f
// at once if a wake-up is waiting in C, so that a subscriber needs no
// goroutine of its own to wait. f runs with the hub locked: it must not
// block, nor call the hub (Close). A subscription without a hub (no
// backend wakes it) never calls f.
func (s *Subscription) OnWake(f func()) {
	if s.hub == nil {
		return
	}
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.f = f
	select {
	case <-s.c:
		f()
	default:
	}
}

// Close stops the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.once.Do(func() {
		if s.hub != nil {
			s.hub.remove(s)
		}
	})
}

// Subscribe adds a subscription to topic. first reports whether it is the
// topic's only one (a backend then starts listening); onLast, if not nil, runs
// when the topic's last subscription closes.
func (h *Hub) Subscribe(topic string, onLast func()) (sub *Subscription, first bool) {
	s := &Subscription{c: make(chan struct{}, 1), hub: h, topic: topic, onLast: onLast}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = make(map[string]map[*Subscription]struct{})
	}
	set := h.subs[topic]
	if set == nil {
		set = make(map[*Subscription]struct{})
		h.subs[topic] = set
	}
	set[s] = struct{}{}
	return s, len(set) == 1
}

// Notify wakes every subscription of topic.
func (h *Hub) Notify(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[topic] {
		if s.f != nil {
			s.f()
			continue
		}
		select {
		case s.c <- struct{}{}:
		default:
		}
	}
}

// Topics reports how many topics have subscriptions.
func (h *Hub) Topics() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *Hub) remove(s *Subscription) {
	h.mu.Lock()
	set := h.subs[s.topic]
	delete(set, s)
	last := len(set) == 0
	if last {
		delete(h.subs, s.topic)
	}
	h.mu.Unlock()
	if last && s.onLast != nil {
		s.onLast()
	}
}
