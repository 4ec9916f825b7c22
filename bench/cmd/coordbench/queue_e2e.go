package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// queue-e2e: enqueue N tiny messages as fast as --concurrency producers
// can, then have --concurrency consumers process them all (coordd and the
// direct scripts: Claim up to --claim-max, Ack each; asynq: a Server with
// Concurrency --concurrency and a handler that does nothing). The figure
// is N over the whole time, both phases.

// e2eTimeout bounds each target's whole run; e2eStall is how long the
// consumers may go without a single ack before the run is given up: longer
// than the visibility timeout, after which a message whose Ack failed is
// delivered again.
const (
	e2eTimeout = 10 * time.Minute
	e2eStall   = queueVisibility + time.Minute
)

// runCount runs op on conc workers until n of them have been attempted,
// and merges what they measured, as runLoop.
func runCount(ctx context.Context, conc, n int, op opFunc, seed uint64) *loopResult {
	var tickets atomic.Int64
	tickets.Store(int64(n))
	return runUntil(ctx, conc, func() bool { return tickets.Add(-1) >= 0 }, op, seed)
}

// runUntil is runLoop with a condition in place of the deadline: each
// worker runs op while more() says so.
func runUntil(ctx context.Context, conc int, more func() bool, op opFunc, seed uint64) *loopResult {
	workers := make([]*worker, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		w := &worker{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && more() {
				t0 := time.Now()
				err := op(ctx, w)
				lat := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					w.errs++
					if w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				w.h.record(lat)
			}
		}()
	}
	wg.Wait()
	r := &loopResult{elapsed: time.Since(start)}
	for _, w := range workers {
		r.h.merge(&w.h)
		r.errs += w.errs
		r.misses += w.misses
		if r.firstErr == nil {
			r.firstErr = w.firstErr
		}
	}
	r.ops = int64(r.h.total)
	return r
}

// e2eTarget is one implementation of the queue-e2e work.
type e2eTarget struct {
	name    string
	pid     int
	enqueue opFunc
	// consume processes every message enqueued (want of them) and returns
	// the ack latencies if it measures them, with the number of claims.
	consume func(ctx context.Context, want int64) (*loopResult, int64, error)
}

// claimAck is the consume phase of coordd and of the direct scripts:
// consumers Claim a batch and Ack each message of it (with ackBatch, all
// of the batch in one Ack) until want are acked. claim returns the batch's
// receipts; ack acks some.
//
// An Ack that fails with UNAVAILABLE may still have happened: its message
// is then gone without being counted. So a consumer whose Claim finds
// nothing asks drained whether the queue is empty (nothing ready, delayed
// or in flight), and that ends the phase too; a message whose Ack did not
// happen is claimed again after its visibility timeout.
func claimAck(ctx context.Context, conc int, want int64, seed uint64, ackBatch bool,
	claim func(ctx context.Context, w *worker) ([]string, error),
	ack func(ctx context.Context, w *worker, receipts []string) error,
	drained func(ctx context.Context) (bool, error),
) (*loopResult, int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var acked, claims atomic.Int64
	var empty atomic.Bool
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	go func() { // the stall watchdog
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if time.Since(time.Unix(0, last.Load())) > e2eStall {
					cancel(fmt.Errorf("queue-e2e: no ack for %v with %d of %d acked", e2eStall, acked.Load(), want))
					return
				}
			}
		}
	}()
	var errs counter
	workers := make([]*worker, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		w := &worker{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && acked.Load() < want {
				receipts, err := claim(ctx, w)
				claims.Add(1)
				if err != nil {
					if ctx.Err() == nil {
						errs.add(err)
					}
					continue
				}
				if len(receipts) == 0 {
					if done, err := drained(ctx); err != nil {
						if ctx.Err() == nil {
							errs.add(err)
						}
					} else if done {
						empty.Store(true)
						cancel(nil)
					}
					continue
				}
				for len(receipts) > 0 {
					n := 1
					if ackBatch {
						n = len(receipts)
					}
					t0 := time.Now()
					err := ack(ctx, w, receipts[:n])
					receipts = receipts[n:]
					if err != nil {
						if ctx.Err() == nil {
							errs.add(err)
						}
						continue
					}
					w.h.record(time.Since(t0))
					last.Store(time.Now().UnixNano())
					if acked.Add(int64(n)) >= want {
						cancel(nil) // done: wake the consumers waiting in Claim
					}
				}
			}
		}()
	}
	wg.Wait()
	r := &loopResult{elapsed: time.Since(start), errs: errs.n.Load(), firstErr: errs.firstErr()}
	for _, w := range workers {
		r.h.merge(&w.h) // one latency per Ack call
	}
	r.ops = min(acked.Load(), want) // messages
	if empty.Load() {
		r.ops = want // all gone: some by an Ack reported as failed
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return r, claims.Load(), err
	}
	return r, claims.Load(), nil
}

// runQueueE2E runs the direct scripts, asynq, then coordd.
func (b *bench) runQueueE2E(ctx context.Context) {
	const scenario = "queue-e2e"
	conc := b.cfg.Concurrency
	var targets []e2eTarget
	if b.rdb != nil {
		q := scope(directNS, "cb-e2e-"+b.runID)
		qk := b.keys.queue(q)
		targets = append(targets, e2eTarget{
			name: tDirect,
			enqueue: func(ctx context.Context, w *worker) error {
				return b.lua.queueEnqueue.Run(ctx, b.rdb, qk, b.enqueueArgs(q)...).Err()
			},
			consume: func(ctx context.Context, want int64) (*loopResult, int64, error) {
				vis := queueVisibility.Microseconds()
				return claimAck(ctx, conc, want, b.seed, b.cfg.AckBatch,
					func(ctx context.Context, w *worker) ([]string, error) {
						a := b.queueArgs(q, vis)
						for range b.cfg.ClaimMax {
							a = append(a, newToken())
						}
						r, err := b.lua.queueClaim.Run(ctx, b.rdb, qk, a...).Slice()
						if err != nil {
							return nil, err
						}
						var receipts []string
						for i, n := b.lua.claimHead, b.lua.claimFields(); i+n <= len(r); i += n {
							rc, _ := r[i+2].(string)
							receipts = append(receipts, rc)
						}
						if len(receipts) == 0 {
							time.Sleep(time.Millisecond) // no long poll: the library way polls
						}
						return receipts, nil
					},
					func(ctx context.Context, w *worker, receipts []string) error {
						a := b.queueArgs(q)
						for _, rc := range receipts {
							a = append(a, rc)
						}
						v, err := b.lua.queueAck.Run(ctx, b.rdb, qk, a...).Result()
						if err != nil {
							return err
						}
						return checkAcked(v, len(receipts))
					},
					func(ctx context.Context) (bool, error) {
						n, err := b.lua.queueStats.Run(ctx, b.rdb, qk, b.queueArgs(q)...).Int64Slice()
						if err != nil || len(n) < 3 {
							return false, err
						}
						return n[0]+n[1]+n[2] == 0, nil
					})
			},
		})
		aq := "cb-e2e-" + b.runID
		b.usedAsynqQueues = append(b.usedAsynqQueues, aq)
		ac := asynq.NewClientFromRedisClient(b.rdb)
		targets = append(targets, e2eTarget{
			name: tAsynq,
			enqueue: func(ctx context.Context, w *worker) error {
				_, err := ac.EnqueueContext(ctx, asynq.NewTask("cb", payload), asynq.Queue(aq))
				return err
			},
			consume: func(ctx context.Context, want int64) (*loopResult, int64, error) {
				return b.asynqConsume(ctx, aq, want)
			},
		})
	}
	cq := "cb-e2e-" + b.runID
	b.usedQueues = append(b.usedQueues, cq)
	targets = append(targets, b.coorddE2E(cq))
	if b.cfg.QueueMaxInFlight > 0 {
		// The same on a capped queue: every Claim counts the queue's live
		// claims.
		capped := cq + "-capped"
		b.usedQueues = append(b.usedQueues, capped)
		if _, err := b.cl.queues[0].ConfigureQueue(ctx, &coordv1.ConfigureQueueRequest{Queue: capped, MaxInFlight: int32(b.cfg.QueueMaxInFlight)}); err != nil {
			b.add(&Result{Scenario: scenario, Target: tCoorddCapped, Failed: "ConfigureQueue: " + err.Error()})
		} else {
			t := b.coorddE2E(capped)
			t.name = tCoorddCapped
			targets = append(targets, t)
		}
	}
	b.runE2E(ctx, scenario, targets)
}

// runQueuePartitions runs queue-e2e's coordd target on queue
// partitionedQueue, which coordd's configuration spreads over the
// Cluster's masters (bench/run.sh: queue.partitioned), and reports each
// master's share of the Redis CPU time.
func (b *bench) runQueuePartitions(ctx context.Context) {
	b.usedQueues = append(b.usedQueues, partitionedQueue)
	b.runE2E(ctx, "queue-partitions", []e2eTarget{b.coorddE2E(partitionedQueue)})
}

// partitionedQueue is the queue of queue-partitions, configured in coordd
// with 3 partitions by partitionedConfig.
const partitionedQueue = "cb-parts"

// partitionedConfig is the coordd configuration the scenarios need (the
// partitioned queue, in the default namespace), as `coordbench
// coordd-config` prints it for bench/run.sh, and --coordd-bin passes it.
const partitionedConfig = `queue:
  partitioned:
    - namespace: default
      name: ` + partitionedQueue + `
      partitions: 3
`

// coorddE2E is queue-e2e's coordd target, on queue cq.
func (b *bench) coorddE2E(cq string) e2eTarget {
	conc := b.cfg.Concurrency
	vis, wait := durationpb.New(queueVisibility), durationpb.New(100*time.Millisecond)
	return e2eTarget{
		name: tCoordd, pid: b.cfg.CoorddPID,
		enqueue: func(ctx context.Context, w *worker) error {
			_, err := b.cl.queues[w.id%len(b.cl.queues)].Enqueue(ctx, &coordv1.EnqueueRequest{Queue: cq, Payload: payload})
			return err
		},
		consume: func(ctx context.Context, want int64) (*loopResult, int64, error) {
			return claimAck(ctx, conc, want, b.seed, b.cfg.AckBatch,
				func(ctx context.Context, w *worker) ([]string, error) {
					r, err := b.cl.queues[w.id%len(b.cl.queues)].Claim(ctx, &coordv1.ClaimRequest{
						Queue: cq, MaxMessages: int32(b.cfg.ClaimMax), VisibilityTimeout: vis, Wait: wait})
					if err != nil {
						return nil, err
					}
					receipts := make([]string, 0, len(r.GetMessages()))
					for _, m := range r.GetMessages() {
						receipts = append(receipts, m.GetReceipt())
					}
					return receipts, nil
				},
				func(ctx context.Context, w *worker, receipts []string) error {
					req := &coordv1.AckRequest{Queue: cq}
					if len(receipts) == 1 {
						req.Receipt = receipts[0]
					} else {
						req.Receipts = receipts
					}
					r, err := b.cl.queues[w.id%len(b.cl.queues)].Ack(ctx, req)
					if err == nil && !r.GetAcked() {
						err = errors.New("ack: not acked")
					}
					return err
				},
				func(ctx context.Context) (bool, error) {
					st, err := b.cl.queues[0].Stats(ctx, &coordv1.StatsRequest{Queue: cq})
					if err != nil {
						return false, err
					}
					return st.GetReady()+st.GetDelayed()+st.GetInFlight() == 0, nil
				})
		},
	}
}

// runE2E runs queue-e2e's targets, one after another.
func (b *bench) runE2E(ctx context.Context, scenario string, targets []e2eTarget) {
	n := b.cfg.QueueMsgs
	conc := b.cfg.Concurrency
	for _, t := range targets {
		b.progress("%s/%s: enqueue %d, then consume", scenario, t.name, n)
		tctx, cancel := context.WithTimeout(ctx, e2eTimeout)
		before := b.snapshot(t.pid)
		enq := runCount(tctx, conc, n, t.enqueue, b.seed)
		cons, claims, err := t.consume(tctx, enq.ops)
		after := b.snapshot(t.pid)
		cancel()
		total := enq.elapsed + cons.elapsed
		res := &Result{Scenario: scenario, Target: t.name, Ops: cons.ops, Errors: enq.errs + cons.errs,
			Seconds: total.Seconds(), Unit: "msgs"}
		if total > 0 {
			res.OpsPerSec = float64(cons.ops) / total.Seconds()
		}
		res.setProc(before, after)
		res.Enqueued = enq.ops
		res.Claims = claims
		pe := phaseResult(scenario+"/enqueue", t.name, enq)
		pc := phaseResult(scenario+"/consume", t.name, cons)
		if t.name == tAsynq {
			pc.Latency = nil // the handler's calls are not timed one by one
		}
		res.Phases = []*Result{pe, pc}
		var msgs []string
		if err != nil {
			msgs = append(msgs, err.Error())
			res.Errors++
		}
		if enq.firstErr != nil {
			msgs = append(msgs, "enqueue: "+enq.firstErr.Error())
		}
		if cons.firstErr != nil {
			msgs = append(msgs, "consume: "+cons.firstErr.Error())
		}
		res.FirstError = strings.Join(msgs, "; ")
		if cons.ops < int64(n) && err == nil && res.Errors == 0 {
			res.FirstError = fmt.Sprintf("only %d of %d messages processed", cons.ops, n)
			res.Errors++
		}
		b.add(res)
		if ctx.Err() != nil {
			return
		}
	}
}

func phaseResult(scenario, target string, r *loopResult) *Result {
	p := &Result{Scenario: scenario, Target: target, Ops: r.ops, Errors: r.errs, Misses: r.misses, Seconds: r.elapsed.Seconds()}
	if r.elapsed > 0 {
		p.OpsPerSec = float64(r.ops) / r.elapsed.Seconds()
	}
	if r.h.total > 0 {
		l := r.h.summary()
		p.Latency = &l
	}
	if r.firstErr != nil {
		p.FirstError = r.firstErr.Error()
	}
	return p
}

// asynqConsume starts an asynq Server on the queue with Concurrency
// --concurrency and a handler that counts, and returns once want tasks are
// handled and asynq reports none pending or active (its handler's return
// is followed by the task's removal).
func (b *bench) asynqConsume(ctx context.Context, queue string, want int64) (*loopResult, int64, error) {
	var handled atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	srv := asynq.NewServerFromRedisClient(b.rdb, asynq.Config{
		Concurrency: b.cfg.Concurrency,
		Queues:      map[string]int{queue: 1},
		Logger:      quietLogger{},
		LogLevel:    asynq.FatalLevel,
	})
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	start := time.Now()
	err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		if handled.Add(1) >= want {
			once.Do(func() { close(done) })
		}
		return nil
	}))
	if err != nil {
		return &loopResult{}, 0, err
	}
	defer srv.Shutdown()
	r := &loopResult{}
	stall := time.NewTimer(e2eStall)
	defer stall.Stop()
	last := handled.Load()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			return r, 0, ctx.Err()
		case <-stall.C:
			if h := handled.Load(); h == last {
				return r, 0, fmt.Errorf("asynq: no task handled for %v with %d of %d handled", e2eStall, h, want)
			} else {
				last = h
			}
			stall.Reset(e2eStall)
		}
	}
	for {
		qi, err := insp.GetQueueInfo(queue)
		if err != nil {
			return r, 0, err
		}
		if qi.Pending == 0 && qi.Active == 0 {
			break
		}
		if ctx.Err() != nil {
			return r, 0, ctx.Err()
		}
		time.Sleep(2 * time.Millisecond)
	}
	r.elapsed = time.Since(start)
	r.ops = handled.Load()
	return r, 0, nil
}

// quietLogger silences asynq.
type quietLogger struct{}

func (quietLogger) Debug(...any) {}
func (quietLogger) Info(...any)  {}
func (quietLogger) Warn(...any)  {}
func (quietLogger) Error(...any) {}
func (quietLogger) Fatal(...any) {}

// checkAcked checks queue_ack.lua's reply for n receipts: an array of 1 (0:
// the claim was not live) per receipt, or, from scripts before Ack took
// several receipts, one integer for the one receipt.
func checkAcked(v any, n int) error {
	switch r := v.(type) {
	case int64:
		if n != 1 {
			return errors.New("ack: this version of queue_ack.lua takes one receipt: run without --ack-batch")
		}
		if r != 1 {
			return errors.New("ack: claim not live")
		}
		return nil
	case []any:
		if len(r) != n {
			return fmt.Errorf("ack: %d answers for %d receipts", len(r), n)
		}
		for _, x := range r {
			if i, _ := x.(int64); i != 1 {
				return errors.New("ack: claim not live")
			}
		}
		return nil
	}
	return fmt.Errorf("ack: unexpected reply %T", v)
}
