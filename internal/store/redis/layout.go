package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/hashslot"
	"github.com/coordd/coordd/internal/store"
)

// LayoutVersion is the version of the stored layout this coordd reads and
// writes: which keys an object has, their types, and the records in them
// (holder records, session entries, queue messages, limiter state). A
// coordd of another layout would misread them — a lock's holder taken for
// free, a message lost — so every coordd writes its version under its key
// prefix on every master before its first call (a master that holds none
// gets ours), and a coordd that finds another version there refuses to
// serve from that Redis (LayoutError; at start, Open fails saying so). An
// upgrade across layouts is stop every coordd on the prefix, then start the
// new ones (README: Upgrading). Layouts before version 1 wrote no version:
// a Redis that holds their keys cannot be told from an empty one. Version
// 2: session-bound holds live by their session (a version 1 coordd, which
// renews every hold on every heartbeat and asks no session, would take
// them for expired). Version 3: a lock's plain exclusive holder and every
// name's fence counter live in the name's meta hash (a version 2 coordd
// would take such a lock for free and start its fences over).
const LayoutVersion = 3

// LayoutError refuses every call: a master holds another layout version
// under the store's prefix. It wraps store.ErrUnavailable: the store cannot
// serve, and nothing was done.
type LayoutError struct {
	Key   string // the version's key, on the master that holds it
	Found string // the version it holds
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("redis key %s holds stored layout version %s, and this coordd reads and writes version %d: "+
		"coordds of two layouts must not share a Redis and a key prefix, so this one serves nothing from it; "+
		"stop every coordd using the prefix before starting one of another version (README: Upgrading), or use another redis.key_prefix",
		e.Key, e.Found, LayoutVersion)
}

func (e *LayoutError) Unwrap() error { return store.ErrUnavailable }

// layoutArgs are lua/layout_check.lua's: our version.
type layoutArgs struct {
	Version string `lua:"version"`
}

// layoutGuard checks the layout per master: a call goes to its key's
// master only once that master was found to hold our version. The check
// runs on the path of the first call to the master, with a version key in
// that call's slot (so on its master); calls to the master meanwhile wait
// for it rather than check again. A LayoutError is kept and refuses every
// call from then on. Open checks every master at start.
type layoutGuard struct {
	checked  sync.Map    // master address ("" for a single Redis) → true: read on every call, without mu
	failed   atomic.Bool // err is set
	mu       sync.Mutex
	checking map[string]chan struct{} // closed when the check in flight ends
	keys     map[int]string           // layout keys by slot, as found (layoutIn)
	prefix   string                   // the store's key prefix
	err      error                    // a LayoutError, once found
}

// layout returns nil once the master of key holds our version, the
// LayoutError if a master holds another, or why the check could not be
// made now.
func (s *Store) layout(ctx context.Context, key string) error {
	node := ""
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return fmt.Errorf("%w: finding the master of a key: %v", store.ErrUnavailable, err)
		}
		node = c.Options().Addr
	}
	g := &s.layoutOK
	if _, ok := g.checked.Load(node); ok && !g.failed.Load() {
		return nil
	}
	for {
		g.mu.Lock()
		if _, ok := g.checked.Load(node); ok || g.err != nil {
			err := g.err
			g.mu.Unlock()
			return err
		}
		ch := g.checking[node]
		if ch == nil {
			break // this call checks, with g.mu held
		}
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ch := make(chan struct{})
	if g.checking == nil {
		g.checking = map[string]chan struct{}{}
	}
	g.checking[node] = ch
	lkey := g.keyIn(hashslot.Of(key))
	g.mu.Unlock()
	err := s.checkLayout(ctx, map[string]string{node: lkey})
	g.mu.Lock()
	delete(g.checking, node)
	close(ch)
	g.mu.Unlock()
	return err
}

// keyIn returns the layout key of slot, found once (under mu).
func (g *layoutGuard) keyIn(slot int) string {
	if k, ok := g.keys[slot]; ok {
		return k
	}
	if g.keys == nil {
		g.keys = map[int]string{}
	}
	g.keys[slot] = layoutIn(g.prefix, slot)
	return g.keys[slot]
}

// checkLayout checks the layout key of each master (by address) and notes
// those that hold our version.
func (s *Store) checkLayout(ctx context.Context, keys map[string]string) error {
	var nodes []string
	calls := make([]call, 0, len(keys))
	for node, k := range keys {
		nodes = append(nodes, node)
		calls = append(calls, call{layoutCheck, []string{k}, layoutArgs{strconv.Itoa(LayoutVersion)}})
	}
	g := &s.layoutOK
	var first error
	for i, cmd := range s.evalPipelined(ctx, calls) {
		r, err := replyOf(layoutCheck, cmd)
		if err == nil {
			r.code(codeOK)
			found := r.str(1)
			if err = r.done(); err == nil && found != strconv.Itoa(LayoutVersion) {
				err = &LayoutError{Key: calls[i].keys[0], Found: found}
			}
		}
		g.mu.Lock()
		var lerr *LayoutError
		switch {
		case errors.As(err, &lerr):
			g.err = err
			g.failed.Store(true)
		case err == nil:
			g.checked.Store(nodes[i], true)
		}
		err2 := g.err
		g.mu.Unlock()
		if err2 != nil {
			return err2
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// checkEveryLayout checks every master (CLUSTER SHARDS names them), for
// Open: a LayoutError, or the first other failure (a master that could not
// be checked now is checked before its first call).
func (s *Store) checkEveryLayout(ctx context.Context) error {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return s.checkLayout(ctx, map[string]string{"": layoutIn(s.keys.prefix, 0)})
	}
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		return err
	}
	keys := map[string]string{}
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" || len(sh.Slots) == 0 {
				continue
			}
			host, port := n.Endpoint, n.Port
			if host == "" || host == "?" {
				host = n.IP
			}
			if port == 0 {
				port = n.TLSPort
			}
			// The address as go-redis names the master (MasterForKey); one
			// named otherwise is checked again before its first call.
			keys[net.JoinHostPort(host, strconv.FormatInt(port, 10))] = layoutIn(s.keys.prefix, int(sh.Slots[0].Start))
		}
	}
	if len(keys) == 0 {
		return errors.New("CLUSTER SHARDS names no master with slots")
	}
	return s.checkLayout(ctx, keys)
}

// layoutIn returns the layout key of a slot under prefix: the prefix's
// tag "v:layout.n" with the least n in that slot (about 16,384 tries on
// average: found once per slot, layoutGuard.keyIn).
func layoutIn(prefix string, slot int) string {
	k := keys{prefix: prefix}
	for n := 0; ; n++ {
		key := k.tag("v", "layout."+strconv.Itoa(n))
		if hashslot.Of(key) == slot {
			return key
		}
	}
}
