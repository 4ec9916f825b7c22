package redis

// The eviction guard. coordd's safety rests on Redis keeping every key
// until coordd deletes it or its TTL passes: a lock evicted with time left
// is granted to a second holder while the first still holds it; under an
// allkeys-* policy fence counters and queued messages can go too. So no
// command of coordd's reaches a node until that node's maxmemory-policy has
// been read (INFO memory: CONFIG GET is often disabled on hosted Redis) and
// found to be noeviction, unless EvictionOptions.Allow says otherwise.
//
// The same read gives the node's used_memory and maxmemory: a node past
// EvictionOptions.HighWater of its maxmemory is "high" (Store.memoryHigh),
// and the store refuses the writes that only add data to it (store.
// ErrMemoryHigh), so that renewals, releases and acks, which Redis still
// serves up to maxmemory itself, keep working until it is really full.
//
// When a node's policy is read: before the first command sent to it (so a
// replica promoted by a failover, or a node added to the Cluster, is read
// before it serves); again before the next command after any failure to
// reach it, and after a connection to a new address (a reconnect, a
// Sentinel failover: the node may have restarted with another
// configuration); and at least every EvictionOptions.Recheck (a CONFIG SET
// at runtime). The read runs inline, on the path of the command that finds
// the policy due, as one extra round trip; concurrent commands to that node
// wait for it, except when the read is only the periodic one, when they go
// on under the policy read before.
//
// Concurrency: each node's state has a mutex, held only to read or update
// it, never during a round trip; inflight, while a read runs, is closed
// when it ends.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// NoEviction is the only maxmemory-policy under which coordd serves by
// default.
const NoEviction = "noeviction"

// EvictionOptions configures the eviction guard.
type EvictionOptions struct {
	// Allow lets the store use nodes whose maxmemory-policy may evict keys
	// (redis.allow_eviction); GUARANTEES.md says what then breaks. The
	// policies are still read, for EvictingNodes and OnPolicy.
	Allow bool
	// Recheck is how often a node's policy and memory are read again;
	// default 1s.
	Recheck time.Duration
	// HighWater (0 < HighWater <= 1; 0: off) is the share of a node's
	// maxmemory past which it is high; a node without maxmemory never is.
	HighWater float64
	// OnPolicy, if set, is told of each policy read that differs from the
	// one read before on that node (the first read included), e.g. to log
	// it. It runs on the path of a command: it must not block.
	OnPolicy func(node, policy string)
}

// EvictionError is the error of a command refused because its node's
// maxmemory-policy may evict keys. It wraps store.ErrUnavailable: the store
// cannot serve from that node, and nothing was done.
type EvictionError struct {
	Node   string // the node's address
	Policy string // its maxmemory-policy, or why it could not be read
}

func (e *EvictionError) Error() string {
	return fmt.Sprintf("redis node %s has maxmemory-policy %s, under which Redis may evict keys coordd needs "+
		"(a live lock, granted again to a second holder; a fence counter; a queued message), so coordd does not use it: "+
		"set maxmemory-policy %s on it, or redis.allow_eviction: true to accept the risk (GUARANTEES.md)",
		e.Node, e.Policy, NoEviction)
}

func (e *EvictionError) Unwrap() error { return store.ErrUnavailable }

// NodePolicy is one node's maxmemory-policy.
type NodePolicy struct {
	Node   string
	Policy string
}

// evictionGuard holds every node's policy.
type evictionGuard struct {
	opts  EvictionOptions
	mu    sync.Mutex
	nodes map[string]*nodePolicy // by node address ("" for the client of a single Redis)
}

type nodePolicy struct {
	g       *evictionGuard
	mu      sync.Mutex
	addr    string        // the node's address, as last dialed
	policy  string        // as last read; "" before the first read
	mem     memory        // as last read
	checked time.Time     // when it was read
	stale   bool          // a failure or a new address since: read it before the next command
	reading chan struct{} // closed when the read in progress ends; nil if none
}

// newEvictionGuard installs the guard on client: on each node of a Cluster
// as go-redis creates it, or on the client of a standalone or Sentinel
// Redis. Install it once per client, before its first command.
func newEvictionGuard(client redis.UniversalClient, opts EvictionOptions) *evictionGuard {
	if opts.Recheck <= 0 {
		opts.Recheck = time.Second
	}
	g := &evictionGuard{opts: opts, nodes: make(map[string]*nodePolicy)}
	switch c := client.(type) {
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) {
			addr := node.Options().Addr
			node.AddHook(guardHook{g.node(addr, addr)})
		})
	case *redis.Client:
		client.AddHook(guardHook{g.node("", c.Options().Addr)})
	default:
		client.AddHook(guardHook{g.node("", "redis")})
	}
	return g
}

func (g *evictionGuard) node(key, addr string) *nodePolicy {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[key]
	if n == nil {
		n = &nodePolicy{g: g, addr: addr}
		g.nodes[key] = n
	}
	return n
}

// evicting reports how many nodes were last read with a policy other than
// noeviction.
func (g *evictionGuard) evicting() int {
	g.mu.Lock()
	nodes := make([]*nodePolicy, 0, len(g.nodes))
	for _, n := range g.nodes {
		nodes = append(nodes, n)
	}
	g.mu.Unlock()
	count := 0
	for _, n := range nodes {
		n.mu.Lock()
		if n.policy != "" && n.policy != NoEviction {
			count++
		}
		n.mu.Unlock()
	}
	return count
}

// unguarded are the commands that pass without the policy known: those
// go-redis sends to open a connection or learn the Cluster's layout, and
// the guard's own INFO, and SCRIPT LOAD. None reads or writes coordd's keys.
var unguarded = map[string]bool{
	"hello": true, "auth": true, "select": true, "client": true, "readonly": true, "readwrite": true,
	"cluster": true, "command": true, "info": true, "ping": true, "quit": true, "script": true,
}

// guardHook is the go-redis hook of one node.
type guardHook struct{ n *nodePolicy }

// DialHook notes the address of each new connection: one to another
// address than before (a Sentinel failover) has its policy read first.
func (h guardHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			h.n.dialed(conn.RemoteAddr().String())
		}
		return conn, err
	}
}

func (h guardHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if unguarded[cmd.Name()] {
			return next(ctx, cmd)
		}
		if err := h.n.admit(ctx, func(info redis.Cmder) error { return next(ctx, info) }); err != nil {
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if err == nil {
			err = cmd.Err()
		}
		h.n.after(err)
		return err
	}
}

func (h guardHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		guarded := false
		for _, c := range cmds {
			guarded = guarded || !unguarded[c.Name()]
		}
		if !guarded {
			return next(ctx, cmds)
		}
		if err := h.n.admit(ctx, func(info redis.Cmder) error { return next(ctx, []redis.Cmder{info}) }); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		err := next(ctx, cmds)
		h.n.after(err)
		return err
	}
}

func (n *nodePolicy) dialed(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr != "" && addr != n.addr {
		n.addr, n.stale = addr, true
	}
}

// after marks the policy stale after a failure to reach the node.
func (n *nodePolicy) after(err error) {
	if err != nil && reachFailure(err) && !errors.Is(err, context.Canceled) {
		n.mu.Lock()
		n.stale = true
		n.mu.Unlock()
	}
}

// admit returns nil if a command may go to the node, reading its policy
// first, with read (INFO memory on the command's own path), when due.
func (n *nodePolicy) admit(ctx context.Context, read func(redis.Cmder) error) error {
	n.mu.Lock()
	for {
		known := n.policy != "" && !n.stale
		if known && time.Since(n.checked) < n.g.opts.Recheck {
			return n.verdictLocked()
		}
		if n.reading == nil {
			break
		}
		if known {
			// Only the periodic read is due, and another command does it.
			return n.verdictLocked()
		}
		ch := n.reading
		n.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		n.mu.Lock()
	}
	ch := make(chan struct{})
	n.reading = ch
	n.mu.Unlock()

	info := redis.NewStringCmd(ctx, "info", "memory")
	err := read(info)
	if err == nil {
		err = info.Err()
	}
	policy, err := parsePolicy(info.Val(), err)
	mem := parseMemory(info.Val())

	n.mu.Lock()
	n.reading = nil
	close(ch)
	if err != nil {
		n.mu.Unlock()
		return err // a failure to reach the node: the next command reads again
	}
	prev := n.policy
	n.policy, n.mem, n.checked, n.stale = policy, mem, time.Now(), false
	addr := n.addr
	n.mu.Unlock()
	if policy != prev && n.g.opts.OnPolicy != nil {
		n.g.opts.OnPolicy(addr, policy)
	}
	n.mu.Lock()
	return n.verdictLocked()
}

// verdictLocked unlocks n and says whether its policy lets coordd use it.
func (n *nodePolicy) verdictLocked() error {
	policy, addr := n.policy, n.addr
	n.mu.Unlock()
	if policy == NoEviction || n.g.opts.Allow {
		return nil
	}
	return &EvictionError{Node: addr, Policy: policy}
}

// parsePolicy reads maxmemory_policy from the reply to INFO memory. A node
// that answers with an error (INFO renamed away, denied by an ACL) or
// without the field has an unknown policy, which is not noeviction; a
// failure to reach it is returned.
func parsePolicy(info string, err error) (string, error) {
	if err != nil {
		if reachFailure(err) {
			return "", err
		}
		return "unknown (INFO memory: " + err.Error() + ")", nil
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok && v != "" {
			return v, nil
		}
	}
	return "unknown (INFO memory has no maxmemory_policy)", nil
}

// memory is a node's used_memory and maxmemory (bytes; 0: none), as
// INFO memory last gave them.
type memory struct{ used, max int64 }

// high reports whether used is past share of max.
func (m memory) high(share float64) bool {
	return share > 0 && m.max > 0 && float64(m.used) >= share*float64(m.max)
}

// parseMemory reads used_memory and maxmemory from the reply to INFO
// memory; a field it lacks reads as 0 (never high).
func parseMemory(info string) memory {
	var m memory
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "used_memory":
			m.used = n
		case "maxmemory":
			m.max = n
		}
	}
	return m
}

// memoryHigh reports whether the master that serves key was last read
// past the high-water mark. A node not read yet is not high: the guard
// reads it before the first command reaches it, and the next call knows.
func (s *Store) memoryHigh(ctx context.Context, key string) bool {
	share := s.eviction.opts.HighWater
	if share <= 0 {
		return false
	}
	var n *nodePolicy
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return false // the command's own path reports the failure
		}
		n = s.eviction.find(node.Options().Addr)
	default:
		n = s.eviction.find("")
	}
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mem.high(share)
}

// find returns the state of node key, nil if the guard has none.
func (g *evictionGuard) find(key string) *nodePolicy {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[key]
}

// CheckEviction reads the maxmemory-policy of every master now (the
// Redis of a standalone or Sentinel client), records it for the guard, and
// returns it, sorted by node. An error means some master could not be
// read; the guard then reads each before its first command.
func (s *Store) CheckEviction(ctx context.Context) ([]NodePolicy, error) {
	var mu sync.Mutex
	var out []NodePolicy
	read := func(ctx context.Context, key string, c *redis.Client) error {
		raw, err := c.Info(ctx, "memory").Result()
		policy, err := parsePolicy(raw, err)
		if err != nil {
			return err
		}
		n := s.eviction.node(key, c.Options().Addr)
		n.mu.Lock()
		prev, addr := n.policy, n.addr
		n.policy, n.mem, n.checked, n.stale = policy, parseMemory(raw), time.Now(), false
		n.mu.Unlock()
		if policy != prev && s.eviction.opts.OnPolicy != nil {
			s.eviction.opts.OnPolicy(addr, policy)
		}
		mu.Lock()
		out = append(out, NodePolicy{Node: addr, Policy: policy})
		mu.Unlock()
		return nil
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return read(ctx, node.Options().Addr, node)
		})
	case *redis.Client:
		err = read(ctx, "", c)
	default:
		err = fmt.Errorf("redis: cannot read the eviction policy through a %T", s.client)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, err
}

// EvictingNodes reports how many nodes were last read with a
// maxmemory-policy other than noeviction.
func (s *Store) EvictingNodes() int { return s.eviction.evicting() }
