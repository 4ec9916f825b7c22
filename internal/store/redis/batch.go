package redis

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher gathers the scripts of concurrent operations bound for the same
// Redis node into one pipeline: a group commit. A caller that finds no batch
// in flight to its node sends its script at once, alone, so an idle store
// adds no latency; callers that arrive while a batch is in flight queue up,
// and when it returns, the first of them sends the queue (up to max scripts)
// as the next batch. A caller thus waits at most for the batch in flight and
// then its own; each batch is one round trip, whatever its size.
//
// Concurrency: each node's queue has a mutex and a busy flag. The caller
// that sets busy leads: it takes the batch from the queue's head (its own
// script is there), runs it, then either clears busy (queue empty) or hands
// the lead to the script now at the head, through that caller's turn
// channel. Every other caller just waits on its turn channel, which tells it
// its script is done, or that it leads next. Batches run on a context of
// their own (the store's timeout), since their scripts belong to many
// callers.
type batcher struct {
	client  redis.UniversalClient
	max     int
	timeout time.Duration

	mu     sync.Mutex
	queues map[string]*batchQueue // by node address ("" for a single Redis)

	batches, scripts atomic.Int64
}

type batchQueue struct {
	mu      sync.Mutex
	pending []*batchItem
	busy    bool
}

type batchItem struct {
	cmd  noRetry
	turn chan bool // false: the script is done; true: lead the next batch
}

func newBatcher(client redis.UniversalClient, max int, timeout time.Duration) *batcher {
	return &batcher{client: client, max: max, timeout: timeout, queues: make(map[string]*batchQueue)}
}

// run sends cmd, which touches key, in the next batch to key's node, and
// returns when it is done; its result is in cmd.
func (b *batcher) run(ctx context.Context, key string, cmd noRetry) {
	q := b.queueFor(ctx, key)
	it := &batchItem{cmd: cmd, turn: make(chan bool, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, it)
	lead := !q.busy
	q.busy = true
	q.mu.Unlock()
	if lead || <-it.turn {
		b.flush(q)
	}
}

// flush runs one batch from the head of q, which holds the leader's script,
// and passes the lead on.
func (b *batcher) flush(q *batchQueue) {
	q.mu.Lock()
	n := min(len(q.pending), b.max)
	batch := make([]*batchItem, n)
	copy(batch, q.pending)
	clear(q.pending[:n])
	q.pending = q.pending[n:]
	q.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	if n == 1 {
		_ = b.client.Process(ctx, batch[0].cmd)
	} else {
		pipe := b.client.Pipeline()
		for _, it := range batch {
			_ = pipe.Process(ctx, it.cmd)
		}
		_, _ = pipe.Exec(ctx)
	}
	cancel()
	b.batches.Add(1)
	b.scripts.Add(int64(n))

	q.mu.Lock()
	var next *batchItem
	if len(q.pending) > 0 {
		next = q.pending[0]
	} else {
		q.busy = false
		q.pending = nil // let the backing array go
	}
	q.mu.Unlock()
	for _, it := range batch {
		it.turn <- false
	}
	if next != nil {
		next.turn <- true
	}
}

// queueFor returns the queue of the node that serves key.
func (b *batcher) queueFor(ctx context.Context, key string) *batchQueue {
	node := ""
	if cc, ok := b.client.(*redis.ClusterClient); ok {
		if c, err := cc.MasterForKey(ctx, key); err == nil {
			node = c.Options().Addr
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[node]
	if q == nil {
		q = &batchQueue{}
		b.queues[node] = q
	}
	return q
}
