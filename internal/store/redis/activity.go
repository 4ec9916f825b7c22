package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// A queue's counts by minute are a hash beside its keys ({q:NAME}:hist,
// lua/queue_activity.lua); a namespace's registry of queue names is a
// sorted set under the tag {qnames} (lua/queue_registry.lua).

// queueActivityArgs are lua/queue_activity.lua's.
type queueActivityArgs struct {
	Minute     int64   `lua:"minute,int"`     // µs
	Horizon    int64   `lua:"horizon,int"`    // µs: older minutes go
	HorizonTTL int64   `lua:"horizonTTL,int"` // µs the hash outlives its last write
	Counts     []int64 `lua:"counts,intrest"` // enqueued, acked, retried, dead
}

// queueRegistryArgs are lua/queue_registry.lua's.
type queueRegistryArgs struct {
	Minute  int64    `lua:"minute,int"`
	Horizon int64    `lua:"horizon,int"`
	TTL     int64    `lua:"ttl,int"`
	Max     int      `lua:"max,int"`
	Names   []string `lua:"names,rest"`
}

func (k keys) queueHist(name string) string { return k.tag("q", name) + ":hist" }
func (k keys) queueNames(ns string) string  { return k.prefix + ":{qnames}:" + ns }

// RecordQueueActivity implements store.QueueActivity: a script per queue
// (each in its own slot) and one on the namespace's registry, pipelined in
// one round trip.
func (s *Store) RecordQueueActivity(ctx context.Context, ns string, minute time.Time, counts map[string]store.QueueCounts) error {
	m := minute.Truncate(time.Minute)
	names := make([]string, 0, len(counts))
	calls := make([]call, 0, len(counts)+1)
	for q, c := range counts {
		names = append(names, q)
		calls = append(calls, call{queueActivity, []string{s.keys.queueHist(store.Scope(ns, q))}, queueActivityArgs{
			Minute: m.UnixMicro(), Horizon: m.Add(-store.ActivityHistory).UnixMicro(), HorizonTTL: (store.ActivityHistory + 2*time.Minute).Microseconds(),
			Counts: []int64{c.Enqueued, c.Acked, c.Retried, c.Dead},
		}})
	}
	key := s.keys.queueNames(ns)
	calls = append(calls, call{queueRegistry, []string{key}, queueRegistryArgs{
		Minute: m.UnixMicro(), Horizon: m.Add(-store.ActivityRegistryTTL).UnixMicro(), TTL: store.ActivityRegistryTTL.Microseconds(),
		Max: store.ActivityRegistry, Names: names,
	}})
	return s.do(ctx, "RecordQueueActivity", key, func(ctx context.Context) error {
		for i, cmd := range s.evalPipelined(ctx, calls) {
			if _, err := codeOf(calls[i].script, cmd, codeOK); err != nil {
				return err
			}
		}
		return nil
	})
}

// QueueHistory implements store.QueueActivity.
func (s *Store) QueueHistory(ctx context.Context, ns, queue string, since time.Time) ([]store.QueueMinute, error) {
	key := s.keys.queueHist(store.Scope(ns, queue))
	var kv map[string]string
	err := s.do(ctx, "QueueHistory", key, func(ctx context.Context) (err error) {
		kv, err = s.client.HGetAll(ctx, key).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	byMinute := map[int64]*store.QueueCounts{}
	var order []int64
	for f, v := range kv {
		ms, kind, ok := strings.Cut(f, "|")
		us, err1 := strconv.ParseInt(ms, 10, 64)
		n, err2 := strconv.ParseInt(v, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: queue history field %q", errCorrupt, f)
		}
		if time.UnixMicro(us).Before(since.Truncate(time.Minute)) {
			continue
		}
		c := byMinute[us]
		if c == nil {
			c = &store.QueueCounts{}
			byMinute[us] = c
			order = append(order, us)
		}
		switch kind {
		case "e":
			c.Enqueued = n
		case "a":
			c.Acked = n
		case "r":
			c.Retried = n
		case "d":
			c.Dead = n
		}
	}
	slices.Sort(order)
	out := make([]store.QueueMinute, len(order))
	for i, us := range order {
		out[i] = store.QueueMinute{Minute: time.UnixMicro(us), QueueCounts: *byMinute[us]}
	}
	return out, nil
}

// ActiveQueues implements store.QueueActivity.
func (s *Store) ActiveQueues(ctx context.Context, ns string) ([]string, error) {
	key := s.keys.queueNames(ns)
	var out []string
	err := s.do(ctx, "ActiveQueues", key, func(ctx context.Context) (err error) {
		out, err = s.client.ZRange(ctx, key, 0, -1).Result()
		return err
	})
	return out, err
}
