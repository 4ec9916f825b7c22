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
	ready chan struct{} // closed once the subscription is confirmed or failed
	ps    *redis.PubSub
	err   error
}

func (t *subscriptions) init(s *Store) {
	t.s = s
	t.topics = make(map[string]*topicSub)
}

// Subscribe implements store.Subscriber.
func (s *Store) Subscribe(ctx context.Context, topic string) (*store.Subscription, error) {
	t := &s.subs
	t.mu.Lock()
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

// run subscribes to topic's channel, then wakes the topic's waiters on every
// message and every resubscription, until drop closes the subscription.
func (t *subscriptions) run(topic string, ts *topicSub) {
	defer t.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), t.s.timeout+time.Second)
	ts.ps = t.s.client.SSubscribe(ctx, t.s.keys.channel(topic))
	_, ts.err = ts.ps.Receive(ctx) // the confirmation
	cancel()
	close(ts.ready)
	if ts.err != nil {
		return
	}
	for range ts.ps.ChannelWithSubscriptions() {
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
	<-ts.ready
	_ = ts.ps.Close()
}

// close ends every subscription and waits for their goroutines.
func (t *subscriptions) close() {
	t.mu.Lock()
	all := make([]*topicSub, 0, len(t.topics))
	for topic, ts := range t.topics {
		all = append(all, ts)
		delete(t.topics, topic)
	}
	t.mu.Unlock()
	for _, ts := range all {
		<-ts.ready
		_ = ts.ps.Close()
	}
	t.wg.Wait()
}
