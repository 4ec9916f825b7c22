package redis

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
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
// On a Cluster a batch goes straight to its node's client, not through the
// ClusterClient, which would route each script again and start a goroutine
// per node. A script the node answers it did not run (MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN, LOADING: the slot moved or is not served) is sent
// again through the ClusterClient, which follows the redirection and
// reloads the slots; a batch that failed otherwise (its outcome unknown)
// makes the ClusterClient reload them too, so that the next batches go to
// the node that serves the slot now.
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
	ctx   context.Context
	cmd   noRetry
	node  *redis.Client // the client of the node it is bound for; nil: b.client
	taken bool          // under the queue's mu: in a batch (sent, or being sent)
	done  chan struct{} // closed once a taken item's script is done
}

func newBatcher(client redis.UniversalClient, max int, timeout time.Duration) *batcher {
	return &batcher{client: client, max: max, timeout: timeout, queues: make(map[string]*batchQueue)}
}

// run sends cmd, which touches key, in the next batch to key's node, and
// returns when it is done; its result is in cmd. If ctx ends before the
// script was sent, run withdraws it and returns ctx's error: the script was
// not sent, and cmd is left untouched.
func (b *batcher) run(ctx context.Context, key string, cmd noRetry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q, node := b.queueFor(ctx, key)
	it := &batchItem{ctx: ctx, cmd: cmd, node: node, done: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, it)
	lead := !q.busy
	q.busy = true
	q.mu.Unlock()
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
	var batch []*batchItem
	for _, it := range q.pending {
		if it.ctx.Err() == nil {
			it.taken = true
			batch = append(batch, it)
		} else {
			b.withdrawn.Add(1) // its caller returns by itself, and finds it gone
		}
	}
	clear(q.pending)
	q.pending = q.pending[:0]
	q.mu.Unlock()

	if len(batch) <= b.max {
		b.send(batch)
	} else {
		var wg sync.WaitGroup
		for chunk := range slices.Chunk(batch, b.max) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.send(chunk)
			}()
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
	var client redis.UniversalClient = b.client
	if n := batch[0].node; n != nil {
		client = n // every item of a queue is bound for its node
	}
	if len(batch) == 1 {
		_ = client.Process(ctx, batch[0].cmd)
	} else {
		pipe := client.Pipeline()
		for _, it := range batch {
			_ = pipe.Process(ctx, it.cmd)
		}
		_, _ = pipe.Exec(ctx)
	}
	if client != b.client {
		b.reroute(ctx, batch)
	}
	cancel()
	b.batches.Add(1)
	b.scripts.Add(int64(len(batch)))
	for _, it := range batch {
		close(it.done)
	}
}

// reroute sends again, through the ClusterClient, the scripts of a batch
// sent to a node client that the node did not run (see batcher), and has
// the ClusterClient reload the slots if any failed with an unknown outcome.
func (b *batcher) reroute(ctx context.Context, batch []*batchItem) {
	reload := false
	for _, it := range batch {
		err := it.cmd.Err()
		switch {
		case err == nil:
		case notRun(err):
			again := redis.NewCmd(ctx, it.cmd.Args()...)
			again.SetFirstKeyPos(3)
			_ = b.client.Process(ctx, noRetry{again})
			it.cmd.SetVal(again.Val())
			it.cmd.SetErr(again.Err())
		case !isReply(err):
			reload = true
		}
	}
	if cc, ok := b.client.(*redis.ClusterClient); ok && reload {
		cc.ReloadState(ctx)
	}
}

// notRun reports whether err is a node's answer that it did not run the
// command, because it does not serve its slot (now).
func notRun(err error) bool {
	if _, moved := redis.IsMovedError(err); moved {
		return true
	}
	if _, ask := redis.IsAskError(err); ask {
		return true
	}
	return redis.IsTryAgainError(err) || redis.IsClusterDownError(err) || redis.IsLoadingError(err)
}

// isReply reports whether err is an error reply of Redis (the command was
// answered), not a failure to send it or to read its answer.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// close waits for the drainers.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}

// queueFor returns the queue of the node that serves key, and that node's
// client (nil: not a Cluster, or its node is not known).
func (b *batcher) queueFor(ctx context.Context, key string) (*batchQueue, *redis.Client) {
	addr := ""
	var node *redis.Client
	if cc, ok := b.client.(*redis.ClusterClient); ok {
		if c, err := cc.MasterForKey(ctx, key); err == nil {
			addr, node = c.Options().Addr, c
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[addr]
	if q == nil {
		q = &batchQueue{}
		b.queues[addr] = q
	}
	return q, node
}
