package redis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// subscriptions keeps one sharded pub/sub subscription (SSUBSCRIBE, on the
// connection go-redis keeps to the channel's shard) per topic that has
// waiters in this process, and fans its messages out through a store.Hub.
//
// Concurrency: mu guards topics and is taken before the hub's own lock,
// never after. The first waiter of a topic creates its topicSub and a
// goroutine that subscribes and then delivers; later waiters wait until the
// subscription is confirmed, so that no waiter returns from Subscribe before
// Redis would deliver to it. The hub calls drop when a topic's last waiter
// leaves; drop closes that generation's subscription, which ends its
// goroutine. A reconnection (go-redis resubscribes by itself) wakes every
// waiter of the topic, since messages may have been lost while it was down.
type subscriptions struct {
	s      *Store
	hub    store.Hub
	mu     sync.Mutex
	topics map[string]*topicSub
	wg     sync.WaitGroup
}

type topicSub struct {
	ready chan struct{} // closed once the first subscription is confirmed or failed
	err   error         // the first subscription's error

	mu     sync.Mutex
	ps     *redis.PubSub
	closed bool
}

func (t *subscriptions) init(s *Store) {
	t.s = s
	t.topics = make(map[string]*topicSub)
}

// Subscribe implements store.Subscriber.
func (s *Store) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	t := &s.subs
	t.mu.Lock()
	if t.topics == nil {
		t.mu.Unlock()
		return nil, fmt.Errorf("redis Subscribe: %w: the store is closed", store.ErrUnavailable)
	}
	var ts *topicSub
	sub, first := t.hub.Subscribe(topic, func() { t.drop(topic, ts) })
	if first {
		ts = &topicSub{ready: make(chan struct{})}
		t.topics[topic] = ts
		t.wg.Add(1)
		go t.run(topic, ts)
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

// subscribe subscribes to channel and waits for the confirmation.
func (t *subscriptions) subscribe(channel string) (*redis.PubSub, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.s.timeout+time.Second)
	defer cancel()
	ps := t.s.client.SSubscribe(ctx, channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, err
	}
	return ps, nil
}

// run subscribes to topic's channel, then wakes the topic's waiters on every
// message and every resubscription, until drop closes the subscription.
//
// Redis ends a shard channel's subscriptions itself when the channel's slot
// moves (a failover, a resharding) by pushing "sunsubscribe"; go-redis only
// resubscribes after a broken connection, so run subscribes again, on the
// slot's new owner, and wakes the waiters, who may have missed a message.
func (t *subscriptions) run(topic string, ts *topicSub) {
	defer t.wg.Done()
	channel := t.s.keys.channel(topic)
	ps, err := t.subscribe(channel)
	ts.mu.Lock()
	ts.ps, ts.err = ps, err
	ts.mu.Unlock()
	close(ts.ready)
	if err != nil {
		return
	}
	for {
		dropped := false
		for msg := range ps.ChannelWithSubscriptions() {
			if sub, ok := msg.(*redis.Subscription); ok && sub.Kind == "sunsubscribe" {
				dropped = true
				break
			}
			t.hub.Notify(topic)
		}
		if !dropped {
			return // closed by drop or close
		}
		_ = ps.Close()
		for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
			if cc, ok := t.s.client.(*redis.ClusterClient); ok {
				cc.ReloadState(context.Background())
			}
			if ps, err = t.subscribe(channel); err == nil {
				break
			}
			ts.mu.Lock()
			closed := ts.closed
			ts.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(backoff)
		}
		ts.mu.Lock()
		if ts.closed {
			ts.mu.Unlock()
			_ = ps.Close()
			return
		}
		ts.ps = ps
		ts.mu.Unlock()
		t.hub.Notify(topic)
	}
}

// drop ends the subscription of one generation of topic, when its last
// waiter has gone.
func (t *subscriptions) drop(topic string, ts *topicSub) {
	t.mu.Lock()
	if t.topics[topic] == ts {
		delete(t.topics, topic)
	}
	t.mu.Unlock()
	ts.close()
}

// close ends the topic's subscription; run then returns.
func (ts *topicSub) close() {
	<-ts.ready
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.closed && ts.ps != nil {
		_ = ts.ps.Close()
	}
	ts.closed = true
}

// close ends every subscription and waits for their goroutines; Subscribe
// fails from then on.
func (t *subscriptions) close() {
	t.mu.Lock()
	all := make([]*topicSub, 0, len(t.topics))
	for _, ts := range t.topics {
		all = append(all, ts)
	}
	t.topics = nil
	t.mu.Unlock()
	for _, ts := range all {
		ts.close()
	}
	t.wg.Wait()
}
