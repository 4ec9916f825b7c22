package redis

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

var _ store.NodeHealther = (*Store)(nil)

// nodeProbeTimeout bounds each node's PING in NodeHealth.
const nodeProbeTimeout = 500 * time.Millisecond

// NodeHealth PINGs every node (each master and replica of a Cluster, or the
// one server), each with a short timeout, and reports with it the state of
// the node's circuit breaker. The PINGs go through the breakers' hooks, so
// that an open breaker answers at once and the probe does not count.
func (s *Store) NodeHealth(ctx context.Context) []store.Node {
	var (
		mu    sync.Mutex
		nodes []store.Node
	)
	probe := func(ctx context.Context, c *redis.Client, role string) error {
		ctx, cancel := context.WithTimeout(ctx, nodeProbeTimeout)
		defer cancel()
		start := time.Now()
		err := c.Ping(ctx).Err()
		n := store.Node{Addr: c.Options().Addr, Role: role, Reachable: err == nil}
		if err == nil {
			n.Latency = time.Since(start)
		}
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, n)
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return probe(ctx, n, "master") })
		_ = c.ForEachSlave(ctx, func(ctx context.Context, n *redis.Client) error { return probe(ctx, n, "replica") })
	case *redis.Client:
		_ = probe(ctx, c, "standalone")
	}
	sort.Slice(nodes, func(i, j int) bool {
		if nodes[i].Role != nodes[j].Role {
			return nodes[i].Role < nodes[j].Role // master before replica
		}
		return nodes[i].Addr < nodes[j].Addr
	})
	for i := range nodes {
		addr := nodes[i].Addr
		if _, cluster := s.client.(*redis.ClusterClient); !cluster {
			addr = "" // a single client's breaker is keyed by ""
		}
		nodes[i].Breaker = s.breakers.state(addr)
	}
	return nodes
}
