package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// pubsubConns counts the pub/sub connections named name on the node at
// addr (CLIENT LIST TYPE pubsub).
func pubsubConns(t *testing.T, addr, name string) int {
	t.Helper()
	list, err := rgAdmin(addr).ClientList(context.Background()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST on %s: %v", addr, err)
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+name+" ") && strings.Contains(line, " flags=P ") {
			n++
		}
	}
	return n
}

// shardSubscribers is PUBSUB SHARDNUMSUB of channel on the master of its
// slot.
func shardSubscribers(t *testing.T, c goredis.UniversalClient, channel string) int {
	t.Helper()
	ctx := context.Background()
	var r []any
	var err error
	if cc, ok := c.(*goredis.ClusterClient); ok {
		var node *goredis.Client
		if node, err = cc.MasterForKey(ctx, channel); err == nil {
			r, err = node.Do(ctx, "pubsub", "shardnumsub", channel).Slice()
		}
	} else {
		r, err = c.Do(ctx, "pubsub", "shardnumsub", channel).Slice()
	}
	if err != nil || len(r) != 2 {
		t.Fatalf("PUBSUB SHARDNUMSUB %s = %v, %v", channel, r, err)
	}
	n, _ := r[1].(int64)
	return int(n)
}

// woken waits up to 10 s for a wake-up on sub.
func woken(sub *store.Subscription) bool {
	select {
	case <-sub.C():
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// TestRegressionPubSubOneConnectionPerNode: 50 waiters on 50 names open at
// most one pub/sub connection per node, and each is still woken by its own
// channel; two waiters on one name share its channel, which is
// unsubscribed when the last one leaves.
//
// Forced input: a store whose client has a name of its own, so that its
// connections can be told apart in CLIENT LIST; 50 subscriptions to lock
// topics, one of them twice. The old code kept one connection per topic: 50
// pub/sub connections, so that one tenant waiting on many names inside its
// limits could exhaust the nodes' maxclients for everyone.
func TestRegressionPubSubOneConnectionPerNode(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		addr := redistest.Standalone(t)
		name := "ps" + token.New()[:10]
		onePerNode(t, name, []string{addr}, 1)
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := redistest.Cluster(t)
		name := "ps" + token.New()[:10]
		onePerNode(t, name, addrs, 3)
	})
}

func onePerNode(t *testing.T, name string, nodes []string, masters int) {
	defer rgCloseAdmins()
	ctx := context.Background()
	s := openStore(t, Config{Addrs: nodes, ClientName: name, Prefix: "ps" + token.New()[:12], Timeout: 5 * time.Second})
	c := s.Client()
	var err error
	const n = 50
	topics := make([]string, n)
	subs := make([]*store.Subscription, n)
	for i := range topics {
		topics[i] = store.ElectionTopic("ns:L" + strconv.Itoa(i))
		if subs[i], err = s.Subscribe(ctx, topics[i]); err != nil {
			t.Fatalf("Subscribe %d: %v", i, err)
		}
	}
	closeAll := func() {
		for _, sub := range subs {
			sub.Close()
		}
	}
	defer closeAll()
	twin, err := s.Subscribe(ctx, topics[0])
	if err != nil {
		t.Fatal(err)
	}
	defer twin.Close()

	total := 0
	for _, a := range nodes {
		k := pubsubConns(t, a, name)
		if k > 1 {
			t.Errorf("node %s has %d pub/sub connections of this store for %d topics; want at most 1", a, k, n)
		}
		total += k
	}
	t.Logf("%d topics: %d pub/sub connections of this store in all", n, total)
	if total == 0 {
		t.Fatalf("no pub/sub connection named %s found on %v: the count does not see them", name, nodes)
	}
	if total > masters {
		t.Errorf("%d pub/sub connections in all for %d topics; want at most one per master (%d)", total, n, masters)
	}

	publish := func(topic string) {
		t.Helper()
		if err := c.SPublish(ctx, s.keys.channel(topic), "x").Err(); err != nil {
			t.Fatalf("SPUBLISH: %v", err)
		}
	}
	for i, topic := range topics {
		rgDrain(subs[i])
		publish(topic)
		if !woken(subs[i]) {
			t.Fatalf("waiter %d was not woken by its channel", i)
		}
	}
	if !woken(twin) {
		t.Fatal("the second waiter on topic 0 was not woken by its channel")
	}

	// The twin leaves: topic 0 is still subscribed for the first waiter.
	twin.Close()
	rgDrain(subs[0])
	publish(topics[0])
	if !woken(subs[0]) {
		t.Fatal("after the second waiter on topic 0 left, the first one was not woken")
	}
	ch0 := s.keys.channel(topics[0])
	if k := shardSubscribers(t, c, ch0); k != 1 {
		t.Errorf("SHARDNUMSUB of topic 0's channel with one waiter left = %d; want 1", k)
	}

	// The last waiters leave: every channel is unsubscribed.
	closeAll()
	wantUnsubscribed(t, c, s, topics)
}

// wantUnsubscribed checks that every topic's channel ends up with no
// subscriber, once every waiter has left.
func wantUnsubscribed(t *testing.T, c goredis.UniversalClient, s *Store, topics []string) {
	t.Helper()
	if err := eventually(10*time.Second, func() error {
		for i, topic := range topics {
			if k := shardSubscribers(t, c, s.keys.channel(topic)); k != 0 {
				return fmt.Errorf("topic %d's channel still has %d subscribers", i, k)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("after every waiter left: %v; want each channel unsubscribed", err)
	}
}

// dialCounter counts the connections a client dials, by address.
type dialCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *dialCounter) count(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[addr]
}

func (d *dialCounter) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.mu.Lock()
		d.n[addr]++
		d.mu.Unlock()
		return next(ctx, network, addr)
	}
}
func (d *dialCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (d *dialCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// TestRegressionPubSubNoDialWhileBreakerOpen: while a node's circuit breaker
// is open, a Subscribe for a topic of that node fails at once (its waiter
// polls) without dialling the node.
//
// Forced input: a private Redis (standalone, and one master of a 3-master
// Cluster) frozen with SIGSTOP; breakers that open at the first failure;
// an Allow on the frozen node that times out and opens its breaker; a
// dial-counting hook below the breaker. The old code dialled a pub/sub
// connection for every new topic whatever the breaker said.
func TestRegressionPubSubNoDialWhileBreakerOpen(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartStandalone(t)
		noDialWhileOpen(t, []string{srv.Addr()}, func(string) string { return srv.Addr() })
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3, 0)
		noDialWhileOpen(t, cl.Addrs(), func(key string) string { return cl.MasterFor(key).Addr() })
	})
}

func noDialWhileOpen(t *testing.T, addrs []string, masterFor func(string) string) {
	defer rgCloseAdmins()
	ctx := context.Background()
	// The dial counter is one of Config.Hooks: below the breakers (on a
	// Cluster, below each node's).
	d := &dialCounter{n: map[string]int{}}
	cfg := coorddConfig(addrs, 300*time.Millisecond)
	cfg.BreakerFailures, cfg.BreakerCooldown, cfg.Hooks = 1, time.Minute, []goredis.Hook{d}
	s := openStore(t, cfg)
	c, bs := s.Client(), s.breakers
	lim := store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Minute}
	target := masterFor(s.keys.limit("ns:k", lim)[0])
	var topic string
	for i := 0; topic == ""; i++ {
		if tp := store.ElectionTopic("ns:L" + strconv.Itoa(i)); masterFor(s.keys.channel(tp)) == target {
			topic = tp
		}
	}
	// A topic that works before the freeze, on the same node.
	if _, err := s.Allow(ctx, "ns:k", lim, 1, false); err != nil {
		t.Fatal(err)
	}
	freeze(t, target)
	if _, err := s.Allow(ctx, "ns:k", lim, 1, false); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Allow on the frozen node = %v; want store.ErrUnavailable", err)
	}
	if bs.Open() != 1 {
		t.Fatalf("BreakersOpen = %d after a timeout on the frozen node; want 1", bs.Open())
	}
	addr := target
	if _, ok := c.(*goredis.ClusterClient); !ok {
		addr = c.(*goredis.Client).Options().Addr
	}
	before := d.count(addr)
	sub, err := s.Subscribe(ctx, topic)
	if err == nil {
		sub.Close()
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Subscribe on a node whose breaker is open = %v; want store.ErrUnavailable", err)
	}
	if after := d.count(addr); after != before {
		t.Errorf("Subscribe dialled the node whose breaker is open %d times; want none", after-before)
	}
}

// TestPubSubWakesAfterReconnect: when a node's pub/sub connection is lost
// and comes back (a restarted Redis, a restarted Cluster master that keeps
// its slots), every waiter of its channels is woken once it is subscribed
// again (it may have missed a message meanwhile), and later messages reach
// it.
func TestPubSubWakesAfterReconnect(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartStandalone(t)
		wakesAfterReconnect(t, []string{srv.Addr()}, func(string) *redistest.Server { return srv }, nil)
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3, 0)
		wakesAfterReconnect(t, c.Addrs(), c.MasterFor, func() { c.WaitHealthy(20 * time.Second) })
	})
}

func wakesAfterReconnect(t *testing.T, addrs []string, masterFor func(string) *redistest.Server, healthy func()) {
	defer rgCloseAdmins()
	ctx := context.Background()
	s := openStore(t, coorddConfig(addrs, time.Second))
	c := s.Client()
	// Three topics of one node.
	node := masterFor(s.keys.channel(store.ElectionTopic("ns:L0")))
	var topics []string
	for i := 0; len(topics) < 3; i++ {
		if tp := store.ElectionTopic("ns:L" + strconv.Itoa(i)); masterFor(s.keys.channel(tp)) == node {
			topics = append(topics, tp)
		}
	}
	var subs []*store.Subscription
	for _, tp := range topics {
		sub, err := s.Subscribe(ctx, tp)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs = append(subs, sub)
	}
	node.Kill()
	node.Start()
	if healthy != nil {
		healthy()
	}
	for i, sub := range subs {
		if !woken(sub) {
			t.Fatalf("waiter %d was not woken after the reconnection", i)
		}
	}
	for i, sub := range subs {
		if err := eventually(10*time.Second, func() error {
			rgDrain(sub)
			if err := c.SPublish(ctx, s.keys.channel(topics[i]), "x").Err(); err != nil {
				return err
			}
			select {
			case <-sub.C():
				return nil
			case <-time.After(time.Second):
				return errors.New("a message did not wake it")
			}
		}); err != nil {
			t.Fatalf("waiter %d after the reconnection: %v", i, err)
		}
	}
}

// TestPubSubFrozenNodeRecovers: a node that stops answering (SIGSTOP) is
// noticed by the ping of its quiet pub/sub connection, and once it answers
// again its waiters are subscribed again and woken.
func TestPubSubFrozenNodeRecovers(t *testing.T) {
	defer rgCloseAdmins()
	srv := redistest.StartStandalone(t)
	ctx := context.Background()
	s := openStore(t, coorddConfig([]string{srv.Addr()}, 300*time.Millisecond))
	c := s.Client()
	topic := store.ElectionTopic("ns:L")
	sub, err := s.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	resume := freeze(t, srv.Addr())
	time.Sleep(3 * nodePing) // the ping goes unanswered; reconnections fail
	resume()
	if !woken(sub) {
		t.Fatal("the waiter was not woken once the frozen node answered again")
	}
	if err := eventually(10*time.Second, func() error {
		rgDrain(sub)
		if err := c.SPublish(ctx, s.keys.channel(topic), "x").Err(); err != nil {
			return err
		}
		select {
		case <-sub.C():
			return nil
		case <-time.After(time.Second):
			return errors.New("a message did not wake the waiter")
		}
	}); err != nil {
		t.Fatalf("after the node answered again: %v", err)
	}
}

// TestPubSubChurn: waiters come and go on a few topics from many
// goroutines; every waiter present is woken by its topic's message, and
// once all have gone no channel is subscribed.
func TestPubSubChurn(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		churn(t, []string{redistest.Standalone(t)})
	})
	t.Run("cluster", func(t *testing.T) {
		churn(t, redistest.Cluster(t))
	})
}

func churn(t *testing.T, addrs []string) {
	ctx := context.Background()
	s := openStore(t, Config{Addrs: addrs, Prefix: "ps" + token.New()[:12], Timeout: 5 * time.Second})
	c := s.Client()
	topics := make([]string, 6)
	for i := range topics {
		topics[i] = store.ElectionTopic("ns:C" + strconv.Itoa(i))
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				topic := topics[(g+i)%len(topics)]
				sub, err := s.Subscribe(ctx, topic)
				if err != nil {
					t.Errorf("Subscribe: %v", err)
					return
				}
				if i%4 == 0 {
					rgDrain(sub)
					if err := c.SPublish(ctx, s.keys.channel(topic), "x").Err(); err != nil {
						t.Error(err)
					} else if !woken(sub) {
						t.Errorf("a waiter on %s was not woken by its message", topic)
					}
				}
				sub.Close()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	wantUnsubscribed(t, c, s, topics)
}
