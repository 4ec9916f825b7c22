package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// subscriptions keeps, per Redis node, one sharded pub/sub connection
// (SSUBSCRIBE) that carries the channels of every topic with waiters in
// this process whose slot that node serves, and fans their messages out
// through a store.Hub. However many topics are waited on, a process holds
// at most one pub/sub connection per node.
//
// A topic's channel is subscribed once, whatever its number of waiters (the
// hub counts them): the first waiter's Subscribe adds it to its node's
// connection and returns once Redis confirmed it, later ones share it, and
// when the last one leaves it is unsubscribed (SUNSUBSCRIBE). A node's
// connection is dialled when its first channel comes, and closed when it
// has carried none for nodeLinger.
//
// Each node has a goroutine (runNode) that owns its connection: it opens
// it, subscribes every channel the node has, then reads it — messages wake
// their topic's waiters, confirmations mark channels live — and pings it
// when it is quiet. When the connection fails (an error, a ping left
// unanswered, an error reply such as MOVED), it is closed, the cluster's
// slot map reloaded, and a new one opened after a backoff, each channel
// first moved to the node that now serves its slot. A channel confirmed on
// a new connection wakes its waiters, since they may have missed messages
// meanwhile. Redis itself ends a channel's subscription when its slot moves
// away (a failover, a resharding), by pushing "sunsubscribe"; the channel
// then moves to the slot's new master, and wakes its waiters there. No
// connection is dialled to a node whose circuit breaker is open (see
// breakerHook.DialHook): a new topic's Subscribe then fails at once, and
// its waiter polls (internal/waiter).
//
// Concurrency: subscriptions.mu guards every map and every field marked
// "under mu", and is taken before the hub's lock, never after. Each node's
// wmu serializes the decisions to subscribe or unsubscribe a channel with
// the writes that carry them, so that the order of SSUBSCRIBE and
// SUNSUBSCRIBE on the wire is that of the decisions, and the replies can be
// matched to them by counting (subs, unsubs); wmu is taken before mu, and
// may be held across I/O (a dial), so nothing that holds mu waits for it.
// Every goroutine is counted in wg, added under mu while not closed.
type subscriptions struct {
	s   *Store
	hub store.Hub

	mu     sync.Mutex
	topics map[string]*topicSub // by topic: those with waiters
	nodes  map[string]*nodeSub  // by node address ("" for a single Redis)
	closed bool
	done   chan struct{} // closed by close

	wg sync.WaitGroup
}

// topicSub is one generation of a topic's subscription: from its first
// waiter's arrival to its last one's departure.
type topicSub struct {
	topic, channel string
	ready          chan struct{} // closed once first confirmed, or failed
	err            error         // why it failed; set before ready closes

	// under mu:
	node    *nodeSub // the node it is on; nil while it moves
	settled bool     // ready is closed
	live    bool     // confirmed on its node's current connection
	dropped bool     // its last waiter has gone
	timer   *time.Timer
}

// shardSubscriber opens pub/sub connections: a *redis.Client.
type shardSubscriber interface {
	SSubscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// nodeSub is the pub/sub connection of one node.
type nodeSub struct {
	addr   string
	client shardSubscriber // the node's client (the store's, for a single Redis)
	wmu    sync.Mutex

	// under mu:
	running bool                 // runNode has started
	down    bool                 // between a failed connection and the next attempt
	removed bool                 // runNode has ended: a channel must go to a new nodeSub
	ps      *redis.PubSub        // the current connection, nil while there is none
	chans   map[string]*topicSub // by channel: those it carries (or will, once connected)
	subs    map[string]int       // SSUBSCRIBEs sent on ps and not yet confirmed, by channel
	unsubs  map[string]int       // SUNSUBSCRIBEs sent on ps and not yet confirmed, by channel
	idle    time.Time            // when chans last became empty
}

const (
	// nodePing: a node's connection quiet for this long is pinged, and it
	// is given up if the pong does not come within as long again.
	nodePing = time.Second
	// nodeLinger: how long a node's connection stays open without channels.
	nodeLinger = 30 * time.Second
)

var (
	errNodeDown    = errors.New("the node's pub/sub connection is down")
	errNoPong      = errors.New("the node's pub/sub connection did not answer a ping")
	errStoreClosed = errors.New("the store is closed")
)

func (t *subscriptions) init(s *Store) {
	t.s = s
	t.topics = make(map[string]*topicSub)
	t.nodes = make(map[string]*nodeSub)
	t.done = make(chan struct{})
}

// Subscribe implements store.Subscriber. It returns once Redis has
// confirmed the topic's channel (so that an event after it returns is not
// missed), and fails with store.ErrUnavailable if that cannot be done
// within the store's timeout and a second, or at once if the channel's node
// is known to be down. A topic that none of store's topic functions made
// fails at once, and not as ErrUnavailable: retrying cannot help.
func (s *Store) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	channel, err := s.keys.topicChannel(topic)
	if err != nil {
		return nil, fmt.Errorf("redis Subscribe: %w", err) // a caller's bug: Internal
	}
	t := &s.subs
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("redis Subscribe: %w: %v", store.ErrUnavailable, errStoreClosed)
	}
	var ts *topicSub
	sub, first := t.hub.Subscribe(topic, func() { t.drop(ts) })
	if first {
		ts = &topicSub{topic: topic, channel: channel, ready: make(chan struct{})}
		t.topics[topic] = ts
		ts.timer = time.AfterFunc(s.timeout+time.Second, func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.settle(ts, context.DeadlineExceeded)
		})
		t.wg.Add(1)
		go t.attach(ts, false)
	} else {
		ts = t.topics[topic]
	}
	t.mu.Unlock()
	select {
	case <-ts.ready:
	case <-ctx.Done():
		sub.Close()
		return nil, ctx.Err()
	}
	if ts.err != nil {
		sub.Close()
		return nil, fmt.Errorf("redis Subscribe: %w: %v", store.ErrUnavailable, ts.err)
	}
	return sub, nil
}

// settle closes ts.ready, with err (nil: confirmed), unless it is closed.
// t.mu is held.
func (t *subscriptions) settle(ts *topicSub, err error) {
	if ts.settled {
		return
	}
	ts.settled, ts.err = true, err
	ts.timer.Stop()
	close(ts.ready)
}

// attach puts ts on the node that serves its channel: a new topic's
// (moved false: a failure to find the node fails its Subscribe), or one
// that moves (true: it keeps trying while it has waiters).
func (t *subscriptions) attach(ts *topicSub, moved bool) {
	defer t.wg.Done()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		if cc, ok := t.s.client.(*redis.ClusterClient); ok && moved {
			cc.ReloadState(context.Background())
		}
		n, err := t.nodeFor(ts.channel)
		if err == nil {
			if t.add(n, ts) {
				return
			}
			continue // n ended meanwhile: find its successor
		}
		t.mu.Lock()
		stop := !moved || ts.dropped || t.closed
		t.settle(ts, err)
		t.mu.Unlock()
		if stop {
			return
		}
		select {
		case <-time.After(backoff):
		case <-t.done:
			return
		}
	}
}

// nodeFor returns the nodeSub of the node that serves channel's slot (on a
// Cluster, by go-redis's slot map), created if need be.
func (t *subscriptions) nodeFor(channel string) (*nodeSub, error) {
	addr, client := "", shardSubscriber(t.s.client)
	if cc, ok := t.s.client.(*redis.ClusterClient); ok {
		ctx, cancel := context.WithTimeout(context.Background(), t.s.timeout)
		c, err := cc.MasterForKey(ctx, channel)
		cancel()
		if err != nil {
			return nil, err
		}
		addr, client = c.Options().Addr, c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errStoreClosed
	}
	n := t.nodes[addr]
	if n == nil {
		n = &nodeSub{addr: addr, client: client, chans: make(map[string]*topicSub)}
		t.nodes[addr] = n
	}
	return n, nil
}

// add makes n carry ts's channel: at once if n is connected, at its
// connection if it is about to connect. It fails a new topic at once if n's
// connection is down. It reports false if n has ended (the caller then finds
// its successor).
func (t *subscriptions) add(n *nodeSub, ts *topicSub) bool {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	t.mu.Lock()
	if n.removed {
		t.mu.Unlock()
		return false
	}
	if ts.dropped || t.closed {
		t.mu.Unlock()
		return true
	}
	n.chans[ts.channel] = ts
	ts.node, ts.live = n, false
	ps := n.ps
	switch {
	case !n.running:
		n.running = true
		t.wg.Add(1)
		go t.runNode(n)
		t.mu.Unlock()
		return true // runNode subscribes it
	case ps == nil && n.down:
		// Between two connections: the next one subscribes it; a new
		// topic's waiter does not wait for that, and polls.
		t.settle(ts, errNodeDown)
		t.mu.Unlock()
		return true
	case ps == nil:
		t.mu.Unlock()
		return true // runNode is connecting, and subscribes it
	}
	n.subs[ts.channel]++
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), t.s.timeout)
	defer cancel()
	if err := ps.SSubscribe(ctx, ts.channel); err != nil {
		_ = ps.Close() // runNode sees it, and starts over
	}
	return true
}

// drop ends ts when its last waiter has gone: its channel is unsubscribed
// (by another goroutine, since the waiter must not wait for a node's
// connection).
func (t *subscriptions) drop(ts *topicSub) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.topics[ts.topic] == ts {
		delete(t.topics, ts.topic)
	}
	ts.dropped = true
	ts.timer.Stop()
	if ts.node != nil && !t.closed {
		t.wg.Add(1)
		go t.remove(ts.node, ts)
	}
}

// remove unsubscribes ts's channel from n, if n carries it for ts.
func (t *subscriptions) remove(n *nodeSub, ts *topicSub) {
	defer t.wg.Done()
	n.wmu.Lock()
	defer n.wmu.Unlock()
	t.mu.Lock()
	if n.chans[ts.channel] != ts {
		t.mu.Unlock()
		return // moved, or already replaced by the topic's next generation
	}
	delete(n.chans, ts.channel)
	if len(n.chans) == 0 {
		n.idle = time.Now()
	}
	ps := n.ps
	if ps == nil {
		t.mu.Unlock()
		return
	}
	n.unsubs[ts.channel]++
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), t.s.timeout)
	defer cancel()
	if err := ps.SUnsubscribe(ctx, ts.channel); err != nil {
		_ = ps.Close()
	}
}

// runNode owns n's connection, from n's first channel until it has none
// (or the store closes): it connects, reads until the connection fails,
// and starts over after a backoff.
func (t *subscriptions) runNode(n *nodeSub) {
	defer t.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		start := time.Now()
		ps, err := t.connect(n)
		healthy := false
		if err == nil && ps != nil {
			healthy, err = t.receive(n, ps)
		}
		// A connection that served a while starts the backoff over; one
		// that fails soon after each start (a channel Redis keeps refusing)
		// must not make every waiter of the node wake in a tight loop.
		healthy = healthy && time.Since(start) >= nodePing
		if ps != nil {
			_ = ps.Close()
		}
		t.mu.Lock()
		n.ps = nil
		if t.closed || len(n.chans) == 0 {
			n.removed = true
			if t.nodes[n.addr] == n {
				delete(t.nodes, n.addr)
			}
			t.mu.Unlock()
			return
		}
		if err == nil {
			t.mu.Unlock()
			continue // a channel came as the connection idled out
		}
		n.down = true
		for _, ts := range n.chans {
			ts.live = false
			t.settle(ts, err) // a new topic's waiter polls
		}
		t.mu.Unlock()
		if healthy {
			backoff = 50 * time.Millisecond
		}
		if cc, ok := t.s.client.(*redis.ClusterClient); ok {
			cc.ReloadState(context.Background())
		}
		select {
		case <-time.After(backoff):
		case <-t.done:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// connect opens a connection for n and subscribes every channel n carries,
// after moving those whose slot another node now serves. It returns a nil
// connection if n has no channel left.
func (t *subscriptions) connect(n *nodeSub) (*redis.PubSub, error) {
	if cc, ok := t.s.client.(*redis.ClusterClient); ok {
		t.mu.Lock()
		var all []*topicSub
		for _, ts := range n.chans {
			all = append(all, ts)
		}
		t.mu.Unlock()
		for _, ts := range all {
			ctx, cancel := context.WithTimeout(context.Background(), t.s.timeout)
			c, err := cc.MasterForKey(ctx, ts.channel)
			cancel()
			if err == nil && c.Options().Addr != n.addr {
				t.move(n, ts)
			}
		}
	}
	ps := n.client.SSubscribe(context.Background()) // no channel: no I/O yet
	n.wmu.Lock()
	defer n.wmu.Unlock()
	t.mu.Lock()
	if t.closed || len(n.chans) == 0 {
		t.mu.Unlock()
		_ = ps.Close()
		return nil, nil
	}
	n.ps, n.down = ps, false
	n.subs, n.unsubs = make(map[string]int), make(map[string]int)
	channels := make([]string, 0, len(n.chans))
	for ch, ts := range n.chans {
		ts.live = false
		n.subs[ch]++
		channels = append(channels, ch)
	}
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), t.s.timeout)
	defer cancel()
	for _, ch := range channels {
		// One command per channel: the channels of one SSUBSCRIBE must
		// share a slot.
		if err := ps.SSubscribe(ctx, ch); err != nil {
			return ps, err
		}
	}
	return ps, nil
}

// move takes ts off n, whose node no longer serves its channel's slot, and
// puts it on the one that does.
func (t *subscriptions) move(n *nodeSub, ts *topicSub) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.chans[ts.channel] != ts || ts.dropped || t.closed {
		return
	}
	delete(n.chans, ts.channel)
	if len(n.chans) == 0 {
		n.idle = time.Now()
	}
	ts.node, ts.live = nil, false
	t.wg.Add(1)
	go t.attach(ts, true)
}

// receive reads n's connection ps until it fails, or until n has carried no
// channel for nodeLinger (nil error). healthy reports whether it confirmed
// a channel.
func (t *subscriptions) receive(n *nodeSub, ps *redis.PubSub) (healthy bool, err error) {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(context.Background(), nodePing)
		if err != nil {
			var nerr net.Error
			if !errors.As(err, &nerr) || !nerr.Timeout() {
				return healthy, err
			}
			if pinged {
				return healthy, errNoPong
			}
			t.mu.Lock()
			idle := len(n.chans) == 0 && time.Since(n.idle) >= nodeLinger
			closed := t.closed
			t.mu.Unlock()
			if idle || closed {
				return healthy, nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), t.s.timeout)
			err = ps.Ping(ctx)
			cancel()
			if err != nil {
				return healthy, err
			}
			pinged = true
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Message:
			t.mu.Lock()
			ts := n.chans[m.Channel]
			t.mu.Unlock()
			if ts != nil {
				t.hub.Notify(ts.topic)
			}
		case *redis.Subscription:
			if t.confirmed(n, ps, m) {
				healthy = true
			}
		}
	}
}

// confirmed handles Redis's reply to an SSUBSCRIBE or SUNSUBSCRIBE on ps, or
// its own "sunsubscribe" when a channel's slot moved away; it reports
// whether the reply confirmed a subscription.
func (t *subscriptions) confirmed(n *nodeSub, ps *redis.PubSub, m *redis.Subscription) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.ps != ps {
		return false
	}
	ch := m.Channel
	switch m.Kind {
	case "ssubscribe":
		if n.subs[ch]--; n.subs[ch] > 0 {
			return true // the last SSUBSCRIBE sent for ch is still to come
		}
		delete(n.subs, ch)
		ts := n.chans[ch]
		if ts == nil || ts.live {
			return true
		}
		ts.live = true
		if ts.settled {
			// Again, on a new connection or a new node: messages may have
			// been missed meanwhile.
			t.hub.Notify(ts.topic)
		}
		t.settle(ts, nil)
		return true
	case "sunsubscribe":
		if n.unsubs[ch] > 0 {
			if n.unsubs[ch]--; n.unsubs[ch] == 0 {
				delete(n.unsubs, ch)
			}
			return false
		}
		// Redis's own: the slot has moved away from this node.
		ts := n.chans[ch]
		if ts == nil || t.closed {
			return false
		}
		delete(n.chans, ch)
		if len(n.chans) == 0 {
			n.idle = time.Now()
		}
		ts.node, ts.live = nil, false
		t.wg.Add(1)
		go t.attach(ts, true)
	}
	return false
}

// close ends every subscription and waits for the goroutines; Subscribe
// fails from then on.
func (t *subscriptions) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	close(t.done)
	var conns []*redis.PubSub
	for _, n := range t.nodes {
		if n.ps != nil {
			conns = append(conns, n.ps)
		}
	}
	for _, ts := range t.topics {
		t.settle(ts, errStoreClosed)
	}
	t.mu.Unlock()
	for _, ps := range conns {
		_ = ps.Close()
	}
	t.wg.Wait()
}
