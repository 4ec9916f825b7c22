package redis

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/store"
)

// batcher gathers the scripts of concurrent operations bound for the same
// Redis node into pipelines: a group commit. A caller that finds no batch in
// flight to its node sends its script at once, alone, so an idle store adds
// no latency; callers that arrive while a batch is in flight queue up, and
// when it returns, everything queued is sent at once (in pipelines of at
// most max scripts, side by side). A script thus waits at most for the batch
// in flight and then its own; each batch is one round trip, whatever its
// size.
//
// A live session's calls (store.Urgent: heartbeats, checks, resumes) go
// ahead: a batch sends them in pipelines of their own, first, beside the
// rest, so that a heartbeat waits for the heartbeats of its batch, not for
// a long pipeline of new work.
//
// Heartbeats linger (withLinger): they have a queue of their own per node,
// and the one that finds it idle waits heartbeatLinger before sending, so
// that the heartbeats arriving meanwhile share its round trip. Heartbeats
// come spread over time, one every TTL/3 per session (3,000 sessions of
// 10 s: 900 a second), so without the wait nearly every one would be a
// round trip of its own, each with its own system calls on coordd and on
// Redis; 10 ms is nothing to a TTL of at least a second, and nothing else
// waits for them.
//
// Traces: the batch has no span of its own. Each caller's store span
// (Store.do) covers its script's wait in the queue and the shared round
// trip, so a caller's span is as long as the caller waited, and spans of
// callers batched together overlap over the one round trip.
//
// A caller whose context ends while its script is still queued withdraws
// it and returns at once: a script is sent only while its caller still
// waits for it. A batch runs on a context of its own, since its scripts
// belong to many callers, which ends at the latest deadline among them
// (and at most the store's timeout after it is sent), so that no caller
// waits for its script longer than its own deadline plus a batch's.
//
// Concurrency: each node's queue has a mutex, the queued items and a busy
// flag. The caller that finds busy clear sets it and sends the queue (its
// own script, and any that came meanwhile); when that returns, if more have
// queued, it starts a drainer goroutine that sends them and repeats until
// the queue is empty, then clears busy. Items are taken from the queue (or
// withdrawn from it) under the mutex only, so a script is either sent once
// or withdrawn, never both. Every other caller waits for its item's done
// channel or its context.
type batcher struct {
	client  redis.UniversalClient
	max     int
	timeout time.Duration
	linger  time.Duration // how long a lingering script waits for others

	mu     sync.Mutex
	queues map[string]*batchQueue // by node address ("" for a single Redis)
	closed bool                   // under mu: no new drainer goroutine

	wg sync.WaitGroup // drainers, added under mu while not closed

	batches, scripts, withdrawn atomic.Int64
}

type batchQueue struct {
	mu      sync.Mutex
	pending []*batchItem
	busy    bool
}

type batchItem struct {
	ctx    context.Context
	cmd    noRetry
	urgent bool          // store.Urgent: sent ahead of the rest
	taken  bool          // under the queue's mu: in a batch (sent, or being sent)
	done   chan struct{} // closed once a taken item's script is done
}

func newBatcher(client redis.UniversalClient, max int, timeout time.Duration) *batcher {
	return &batcher{client: client, max: max, timeout: timeout, linger: heartbeatLinger, queues: make(map[string]*batchQueue)}
}

// heartbeatLinger is how long a heartbeat that finds its queue idle waits
// for others to share its round trip.
const heartbeatLinger = 10 * time.Millisecond

type lingerKey struct{}

// withLinger marks ctx's script as one that may wait for others (see
// batcher).
func withLinger(ctx context.Context) context.Context {
	return context.WithValue(ctx, lingerKey{}, true)
}

// run sends cmd, which touches key, in the next batch to key's node, and
// returns when it is done; its result is in cmd. If ctx ends before the
// script was sent, run withdraws it and returns ctx's error: the script was
// not sent, and cmd is left untouched.
func (b *batcher) run(ctx context.Context, key string, cmd noRetry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lingers := b.linger > 0 && ctx.Value(lingerKey{}) != nil
	q := b.queueFor(ctx, key, lingers)
	it := &batchItem{ctx: ctx, cmd: cmd, urgent: store.IsUrgent(ctx), done: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, it)
	lead := !q.busy
	q.busy = true
	q.mu.Unlock()
	if lead && lingers {
		t := time.NewTimer(b.linger)
		select {
		case <-t.C:
		case <-ctx.Done(): // flush sends the others' and drops this one
		}
		t.Stop()
	}
	if lead && b.flush(q) {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			for b.flush(q) { // the store is closing: drain here
			}
		} else {
			b.wg.Add(1)
			b.mu.Unlock()
			go b.drain(q)
		}
	}
	select {
	case <-it.done:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	if !it.taken {
		if i := slices.Index(q.pending, it); i >= 0 {
			q.pending = slices.Delete(q.pending, i, i+1)
			b.withdrawn.Add(1)
		} // else flush found it expired and dropped it
		q.mu.Unlock()
		return ctx.Err()
	}
	q.mu.Unlock()
	<-it.done // in flight: bounded by the batch's deadline
	return nil
}

// drain sends q's batches until its queue is empty.
func (b *batcher) drain(q *batchQueue) {
	defer b.wg.Done()
	for b.flush(q) {
	}
}

// flush sends everything queued on q that its callers still wait for, and
// reports whether more has queued since (the caller must then flush again);
// if not, it has cleared busy.
func (b *batcher) flush(q *batchQueue) (more bool) {
	q.mu.Lock()
	var urgent, rest []*batchItem
	for _, it := range q.pending {
		switch {
		case it.ctx.Err() != nil:
			b.withdrawn.Add(1) // its caller returns by itself, and finds it gone
		case it.urgent:
			it.taken = true
			urgent = append(urgent, it)
		default:
			it.taken = true
			rest = append(rest, it)
		}
	}
	clear(q.pending)
	q.pending = q.pending[:0]
	q.mu.Unlock()

	chunks := slices.Collect(slices.Chunk(urgent, b.max))
	chunks = slices.AppendSeq(chunks, slices.Chunk(rest, b.max))
	if len(chunks) <= 1 {
		for _, c := range chunks {
			b.send(c)
		}
	} else {
		var wg sync.WaitGroup
		for _, chunk := range chunks {
			wg.Go(func() { b.send(chunk) })
		}
		wg.Wait()
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		q.busy = false
		q.pending = nil // let the backing array go
		return false
	}
	return true
}

// send runs one pipeline of scripts and tells their callers. Its context
// ends at the latest of their deadlines, and at most b.timeout from now.
func (b *batcher) send(batch []*batchItem) {
	if len(batch) == 0 {
		return
	}
	deadline := time.Now().Add(b.timeout)
	var latest time.Time
	for _, it := range batch {
		d, ok := it.ctx.Deadline()
		if !ok || d.After(deadline) {
			latest = deadline
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	if len(batch) == 1 {
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
	b.scripts.Add(int64(len(batch)))
	for _, it := range batch {
		close(it.done)
	}
}

// close waits for the drainers.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}

// queueFor returns the queue of the node that serves key: its lingering
// scripts' or the others'.
func (b *batcher) queueFor(ctx context.Context, key string, lingers bool) *batchQueue {
	node := ""
	if cc, ok := b.client.(*redis.ClusterClient); ok {
		if c, err := cc.MasterForKey(ctx, key); err == nil {
			node = c.Options().Addr
		}
	}
	if lingers {
		node += " lingering"
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

// Batcher batches the scripts of concurrent callers to one Redis server
// (see batcher) for a store that has its own client per server: Redlock's
// masters (internal/store/redlock).
type Batcher struct{ b *batcher }

// NewBatcher batches scripts to c's server in pipelines of at most max;
// a batch is given up after timeout.
func NewBatcher(c *redis.Client, max int, timeout time.Duration) *Batcher {
	return &Batcher{newBatcher(c, max, timeout)}
}

// Eval runs the script src, whose SHA1 is hash, in the next batch: as
// EVALSHA, and as EVAL if the server does not have it. go-redis never
// retries it (evalCmd). A caller whose ctx ends before its script was sent
// gets ctx's error, and the script is not sent.
func (b *Batcher) Eval(ctx context.Context, src, hash string, keys []string, args ...any) *redis.Cmd {
	return evalOn(ctx, b.b.client, b.b, src, hash, keys, args)
}

// Close waits for the batches in flight.
func (b *Batcher) Close() { b.b.close() }
