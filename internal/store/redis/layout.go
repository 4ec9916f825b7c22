package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

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
// a Redis that holds their keys cannot be told from an empty one.
const LayoutVersion = 1

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
// master only once that master was found to hold our version (the check
// runs on the call's path, one at a time, with a version key in the
// call's own slot, so on its master); a LayoutError is kept and refuses
// every call from then on. Open checks every master at start.
type layoutGuard struct {
	mu      sync.Mutex
	checked map[string]bool // by master address ("" for a single Redis)
	err     error           // a LayoutError, once found
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
	g.mu.Lock()
	ok, err := g.checked[node], g.err
	g.mu.Unlock()
	if ok || err != nil {
		return err
	}
	return s.checkLayout(ctx, map[string]string{node: s.keys.layoutIn(hashslot.Of(key))})
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
		case err == nil:
			if g.checked == nil {
				g.checked = map[string]bool{}
			}
			g.checked[nodes[i]] = true
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

// checkEveryLayout checks every master (CLUSTER SLOTS names them), for
// Open: a LayoutError, or the first other failure (a master that could not
// be checked now is checked before its first call).
func (s *Store) checkEveryLayout(ctx context.Context) error {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return s.checkLayout(ctx, map[string]string{"": s.keys.layoutIn(0)})
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return err
	}
	keys := map[string]string{}
	for _, sl := range slots {
		if len(sl.Nodes) > 0 && keys[sl.Nodes[0].Addr] == "" {
			keys[sl.Nodes[0].Addr] = s.keys.layoutIn(sl.Start)
		}
	}
	if len(keys) == 0 {
		return errors.New("CLUSTER SLOTS names no master")
	}
	return s.checkLayout(ctx, keys)
}

// layoutIn returns the layout key of a slot: the prefix's tag
// "v:layout.n" with the least n in that slot.
func (k keys) layoutIn(slot int) string {
	for n := 0; ; n++ {
		key := k.tag("v", "layout."+strconv.Itoa(n))
		if hashslot.Of(key) == slot {
			return key
		}
	}
}
