package failover

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/redistest"
)

const (
	queueMessages   = 20000
	queueProducers  = 8
	queueConsumers  = 4
	produceInterval = time.Millisecond  // per producer, at most
	killAfter       = queueMessages / 4 // enqueued before the master is killed
	claimMax        = 50
	visibility      = 2 * time.Second
	claimWait       = 500 * time.Millisecond
	claimPause      = 50 * time.Millisecond // after a claim that was not full
	// maxAttempts is high so that nothing becomes a dead letter: a message
	// whose claims expire during the failover is redelivered, not buried.
	maxAttempts = 100
	// drainTimeout bounds how long the consumers may take, after the last
	// enqueue, to empty the queue.
	drainTimeout = 30 * time.Second
	// produceTimeout bounds how long the producers may take after the
	// failover: generous, for a CPU-starved machine under -race.
	produceTimeout = 3 * time.Minute
)

// TestQueueFailover enqueues 20,000 numbered messages (payload and dedup_id
// the number, so that an Enqueue retried after UNAVAILABLE is idempotent)
// while consumers claim and ack them, through the kill of the queue's master,
// its replica's promotion and the old master's restart. With wait_replicas=1
// no message may be lost and the queue must end empty (every message acked);
// with asynchronous replication the loss is measured and reported: that is
// the loss window of async replication. Duplicates (redeliveries of a
// message already acked) are counted and reported in both.
func TestQueueFailover(t *testing.T) {
	for _, tc := range []struct {
		name         string
		waitReplicas int
	}{
		{"async", 0},
		{"wait_replicas=1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) { queueFailover(t, tc.waitReplicas) })
	}
}

func queueFailover(t *testing.T, waitReplicas int) {
	c := startCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &queueRun{
		t: t, ctx: ctx, cancel: cancel, cc: startCoordd(t, c.Addrs(), waitReplicas), waitReplicas: waitReplicas,
		deliveries: make([]int32, queueMessages+1), acks: make([]int32, queueMessages+1),
	}

	for p := range queueProducers {
		r.producers.Go(func() { r.produce(p) })
	}
	for range queueConsumers {
		r.consumers.Go(r.consume)
	}
	r.failOver(c)
	r.awaitProducers()
	r.drain()
	r.count()
	r.okByPhase()
	r.report()
	r.check()
}

const failoverQueue = "failover-queue"

// queueRun is one queueFailover: its clients, what the producers and
// consumers record, and what each phase after the load found, for the
// report and the checks.
type queueRun struct {
	t            *testing.T
	ctx          context.Context // ends the load
	cancel       context.CancelFunc
	cc           clients
	waitReplicas int
	errs         codeCounts

	// The consumers' records, under mu.
	mu         sync.Mutex
	deliveries []int32  // claims handed to a consumer, by number
	acks       []int32  // Acks answered acked=true, by number
	redeliv    int      // claims with attempt > 1
	claims     int      // Claim calls answered
	bad        []string // payloads that are not a number of ours

	enqueued, duplicates, dupAfterErr, retried atomic.Int64
	ackExpired, ackGaveUp                      atomic.Int64

	// okAnswers, under okMu, are the Enqueues answered OK.
	okMu      sync.Mutex
	okAnswers []okAnswer

	next                 atomic.Int64 // the last number a producer took
	producers, consumers sync.WaitGroup

	// failOver and awaitProducers
	f                failover
	atKill, atRejoin int64 // enqueued by the kill, by the rejoin
	produced         time.Time
	// drain
	stats   *coordv1.StatsResponse
	drained time.Time
	// count
	lost, dupDeliveries, unacked, dupAcks int
	lostSample                            []int
	redelivered, claimCalls               int
	badPayloads                           []string
	// okByPhase
	firstOK                   string // the first Enqueue sent after the kill and answered OK, after the kill
	okNoReplica, dupNoReplica int
	lossWindow                string
}

// okAnswer is an Enqueue answered OK: when it was sent and answered, and
// whether the answer was duplicate=true after an earlier attempt for the
// same number had failed.
type okAnswer struct {
	n           int64
	send, recv  time.Time
	dupAfterErr bool
}

// produce is producer p: it takes the next number and enqueues it until an
// answer says it is there. UNAVAILABLE means "maybe enqueued": retry with
// the same dedup_id.
func (r *queueRun) produce(p int) {
	rng := rand.New(rand.NewPCG(uint64(p), uint64(time.Now().UnixNano())))
	tick := time.NewTicker(produceInterval)
	defer tick.Stop()
	for {
		n := r.next.Add(1)
		if n > queueMessages {
			return
		}
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		if !r.enqueue(rng, n) {
			return
		}
	}
}

// enqueue enqueues number n until it is answered OK; false if the load
// ended first.
func (r *queueRun) enqueue(rng *rand.Rand, n int64) bool {
	ctx := r.ctx
	num := strconv.FormatInt(n, 10)
	failed := false
	for {
		send := time.Now()
		cctx, cancelCall := context.WithTimeout(ctx, 5*time.Second)
		resp, err := r.cc.queues.Enqueue(cctx, &coordv1.EnqueueRequest{
			Queue: failoverQueue, Payload: []byte(num), DedupId: num, MaxAttempts: maxAttempts,
		})
		cancelCall()
		if err == nil {
			r.enqueued.Add(1)
			if resp.GetDuplicate() {
				r.duplicates.Add(1)
				if failed {
					r.dupAfterErr.Add(1)
				}
			}
			r.okMu.Lock()
			r.okAnswers = append(r.okAnswers, okAnswer{n: n, send: send, recv: time.Now(), dupAfterErr: failed && resp.GetDuplicate()})
			r.okMu.Unlock()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		r.errs.add("Enqueue", err)
		if !failed {
			failed = true
			r.retried.Add(1)
		}
		sleepCtx(ctx, time.Duration(20+rng.IntN(20))*time.Millisecond)
	}
}

// consume is a consumer: claim, "process" (record the number), ack the
// batch.
func (r *queueRun) consume() {
	ctx := r.ctx
	for ctx.Err() == nil {
		cctx, cancelCall := context.WithTimeout(ctx, 5*time.Second)
		resp, err := r.cc.queues.Claim(cctx, &coordv1.ClaimRequest{
			Queue: failoverQueue, MaxMessages: claimMax, VisibilityTimeout: durationpb.New(visibility), Wait: durationpb.New(claimWait),
		})
		cancelCall()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.errs.add("Claim", err)
			sleepCtx(ctx, 20*time.Millisecond)
			continue
		}
		r.mu.Lock()
		r.claims++
		r.mu.Unlock()
		var receipts []string
		nums := map[string]int{} // receipt → number
		for _, m := range resp.GetMessages() {
			n, perr := strconv.Atoi(string(m.GetPayload()))
			r.mu.Lock()
			if perr != nil || n < 1 || n > queueMessages {
				r.bad = append(r.bad, fmt.Sprintf("%q (message %s)", m.GetPayload(), m.GetMessageId()))
				r.mu.Unlock()
				continue
			}
			r.deliveries[n]++
			if m.GetAttempt() > 1 {
				r.redeliv++
			}
			r.mu.Unlock()
			receipts = append(receipts, m.GetReceipt())
			nums[m.GetReceipt()] = n
		}
		if len(resp.GetMessages()) < claimMax {
			// Let messages gather: fewer, fuller claims (and acks).
			sleepCtx(ctx, claimPause)
		}
		if len(receipts) == 0 {
			continue
		}
		r.ack(receipts, nums)
	}
}

// ack acks a claimed batch with one Ack, and records the numbers acked. An
// Ack that fails is retried a little; if it still fails the messages come
// back after their visibility timeout. A retry after UNAVAILABLE is safe: a
// receipt already acked comes back expired.
func (r *queueRun) ack(receipts []string, nums map[string]int) {
	for try := 0; ; try++ {
		cctx, cancelCall := context.WithTimeout(context.Background(), 5*time.Second)
		a, err := r.cc.queues.Ack(cctx, &coordv1.AckRequest{Queue: failoverQueue, Receipts: receipts})
		cancelCall()
		if err == nil {
			expired := map[string]bool{}
			for _, e := range a.GetExpiredReceipts() {
				expired[e] = true
			}
			r.ackExpired.Add(int64(len(expired)))
			r.mu.Lock()
			for _, rc := range receipts {
				if !expired[rc] {
					r.acks[nums[rc]]++
				}
			}
			r.mu.Unlock()
			return
		}
		r.errs.add("Ack", err)
		if try == 3 || r.ctx.Err() != nil {
			r.ackGaveUp.Add(int64(len(receipts))) // they come back after their visibility timeout
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failOver kills the queue's master once a quarter is enqueued, and waits
// for its replica's promotion and the old master's return.
func (r *queueRun) failOver(c *redistest.ClusterProc) {
	t := r.t
	t.Helper()
	for end := time.Now().Add(60 * time.Second); r.enqueued.Load() < killAfter; {
		if time.Now().After(end) {
			t.Fatalf("only %d messages enqueued after 60s", r.enqueued.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.atKill = r.enqueued.Load()
	r.f = killMaster(t, c, queueKey(failoverQueue), 2*time.Second)
	r.atRejoin = r.enqueued.Load()
}

// awaitProducers waits, at most produceTimeout, for every number to be
// enqueued.
func (r *queueRun) awaitProducers() {
	t := r.t
	t.Helper()
	producersDone := make(chan struct{})
	go func() {
		r.producers.Wait()
		close(producersDone)
	}()
	select {
	case <-producersDone:
	case <-time.After(produceTimeout):
		r.cancel()
		<-producersDone
		t.Fatalf("producers not done %v after the failover: %d of %d enqueued", produceTimeout, r.enqueued.Load(), queueMessages)
	}
	r.produced = time.Now()
	t.Logf("all %d messages enqueued %v after the old master rejoined (%d before the kill, %d by the rejoin)",
		queueMessages, ms(r.produced.Sub(r.f.rejoined)), r.atKill, r.atRejoin)
}

// delivered is how many numbers were delivered at least once.
func (r *queueRun) delivered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, d := range r.deliveries[1:] {
		if d > 0 {
			n++
		}
	}
	return n
}

// drain waits until every number is delivered and the queue is empty, or
// the queue stays empty for two polls (what was not delivered then is
// lost), or drainTimeout; then it stops the consumers.
func (r *queueRun) drain() {
	t := r.t
	t.Helper()
	empty := 0
	for end := time.Now().Add(drainTimeout); ; {
		cctx, cancelCall := context.WithTimeout(r.ctx, 5*time.Second)
		s, err := r.cc.queues.Stats(cctx, &coordv1.StatsRequest{Queue: failoverQueue})
		cancelCall()
		if err == nil {
			r.stats = s
			if s.GetReady()+s.GetDelayed()+s.GetInFlight() == 0 {
				empty++
			} else {
				empty = 0
			}
			if empty > 0 && r.delivered() == queueMessages || empty >= 2 {
				break
			}
		}
		if time.Now().After(end) {
			t.Errorf("queue not drained %v after the last enqueue: stats %v, %d of %d numbers delivered", drainTimeout, r.stats, r.delivered(), queueMessages)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.drained = time.Now()
	r.cancel()
	r.consumers.Wait()
}

// count counts, by number, the lost messages (never delivered), the
// duplicate deliveries and acks, and the numbers without a confirmed ack.
func (r *queueRun) count() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := 1; n <= queueMessages; n++ {
		if r.deliveries[n] == 0 {
			r.lost++
			if len(r.lostSample) < 20 {
				r.lostSample = append(r.lostSample, n)
			}
		}
		r.dupDeliveries += max(0, int(r.deliveries[n])-1)
		if r.acks[n] == 0 {
			r.unacked++
		}
		r.dupAcks += max(0, int(r.acks[n])-1)
	}
	r.redelivered, r.badPayloads, r.claimCalls = r.redeliv, r.bad, r.claims
}

// okByPhase sorts the Enqueues answered OK by phase. Between the promotion
// and the old master's restart the queue's master has no replica at all (3
// masters with 1 replica each: the old master was its only one), so with
// wait_replicas=1 no Enqueue can be replicated then.
func (r *queueRun) okByPhase() {
	f := r.f
	r.okMu.Lock()
	defer r.okMu.Unlock()
	var firstOKAfterKill time.Time
	// The loss window: when the lost messages' Enqueues were answered OK,
	// relative to the kill.
	lostFrom, lostTo := time.Duration(0), time.Duration(0)
	lostSeen := false
	for _, a := range r.okAnswers {
		if r.deliveries[a.n] == 0 {
			d := a.recv.Sub(f.killed)
			if !lostSeen || d < lostFrom {
				lostFrom = d
			}
			if !lostSeen || d > lostTo {
				lostTo = d
			}
			lostSeen = true
		}
		if !a.send.Before(f.killed) && (firstOKAfterKill.IsZero() || a.recv.Before(firstOKAfterKill)) {
			firstOKAfterKill = a.recv
		}
		if !a.send.Before(f.promoted) && a.recv.Before(f.restarted) {
			r.okNoReplica++
			if a.dupAfterErr {
				r.dupNoReplica++
			}
		}
	}
	r.firstOK = "never"
	if !firstOKAfterKill.IsZero() {
		r.firstOK = ms(firstOKAfterKill.Sub(f.killed)).String()
	}
	r.lossWindow = "none"
	if lostSeen {
		r.lossWindow = fmt.Sprintf("answered OK from %v to %v after the kill", ms(lostFrom), ms(lostTo))
	}
}

// report logs what the run measured, and its summary line.
func (r *queueRun) report() {
	t, f, stats := r.t, r.f, r.stats
	t.Helper()
	t.Logf("%v", f)
	t.Logf("first Enqueue sent after the kill and answered OK: %s after the kill", r.firstOK)
	t.Logf("Enqueues sent after the promotion and answered OK before the old master's restart (the master had no replica): %d, %d of them duplicate=true after a failed attempt",
		r.okNoReplica, r.dupNoReplica)
	t.Logf("enqueue: %d numbers needed a retry (maybe enqueued); %d answers duplicate=true, %d of them after an error for the same number",
		r.retried.Load(), r.duplicates.Load(), r.dupAfterErr.Load())
	t.Logf("consume: %d Claims answered; %d redeliveries (attempt > 1), %d receipts acked expired, %d receipts whose Ack was given up after UNAVAILABLE, %d numbers without a confirmed ack (their Ack's answer was lost or expired)",
		r.claimCalls, r.redelivered, r.ackExpired.Load(), r.ackGaveUp.Load(), r.unacked)
	t.Logf("errors: %v", &r.errs)
	t.Logf("final stats: ready %d, delayed %d, in_flight %d, dead %d; drained %v after the last enqueue",
		stats.GetReady(), stats.GetDelayed(), stats.GetInFlight(), stats.GetDead(), ms(r.drained.Sub(r.produced)))
	if r.lost > 0 {
		t.Logf("lost numbers (never delivered), first %d: %v; their Enqueues were %s", len(r.lostSample), r.lostSample, r.lossWindow)
	}
	report(t, "wait_replicas=%d: messages=%d lost=%d (loss window: %s) duplicate-deliveries=%d duplicate-acks=%d redeliveries=%d unconfirmed-acks=%d "+
		"enqueue-retries=%d duplicate-enqueues=%d (ok-without-replica=%d) errors=%d final-stats(ready/delayed/in_flight/dead)=%d/%d/%d/%d promotion=%v first-enqueue-after-kill=%s",
		r.waitReplicas, queueMessages, r.lost, r.lossWindow, r.dupDeliveries, r.dupAcks, r.redelivered, r.unacked, r.retried.Load(), r.duplicates.Load(), r.okNoReplica, r.errs.total(),
		stats.GetReady(), stats.GetDelayed(), stats.GetInFlight(), stats.GetDead(), ms(f.promoted.Sub(f.killed)), r.firstOK)
}

// check: no message that was never enqueued delivered, no dead letter; with
// wait_replicas, nothing lost, no Enqueue answered OK while the master had
// no replica, and the queue empty; only the codes a failover explains.
func (r *queueRun) check() {
	t, stats, waitReplicas := r.t, r.stats, r.waitReplicas
	t.Helper()
	if len(r.badPayloads) > 0 {
		t.Errorf("%d messages that were never enqueued were delivered: %v", len(r.badPayloads), r.badPayloads[:min(5, len(r.badPayloads))])
	}
	if stats.GetDead() > 0 {
		t.Errorf("%d dead letters with max_attempts %d: a message was claimed and not acked %d times", stats.GetDead(), maxAttempts, maxAttempts)
	}
	if waitReplicas > 0 {
		if r.lost > 0 {
			t.Errorf("with wait_replicas=%d, %d of %d messages were never delivered (lost), e.g. %v; want none: an Enqueue answered OK was replicated",
				waitReplicas, r.lost, queueMessages, r.lostSample)
		}
		if r.okNoReplica > 0 {
			// docs/configuration.md, redis.wait_replicas: "an enqueue … wait[s] until that
			// many replicas have [it]; fewer in time is reported UNAVAILABLE".
			t.Errorf("with wait_replicas=%d, %d Enqueues were answered OK while the queue's master had no replica (sent after the promotion, answered before "+
				"the old master, its only possible replica, was started again); %d of them were duplicate=true answers to a retry after UNAVAILABLE. "+
				"Want UNAVAILABLE: an unreplicated message, new or found by its dedup_id, could still be lost",
				waitReplicas, r.okNoReplica, r.dupNoReplica)
		}
		if stats.GetReady()+stats.GetDelayed()+stats.GetInFlight()+stats.GetDead() != 0 {
			t.Errorf("with wait_replicas=%d the queue ends with stats %v; want 0/0/0/0 (every message acked)", waitReplicas, stats)
		}
	} else if r.lost > 0 {
		t.Logf("async replication lost %d of %d acknowledged enqueues in the failover: the loss window (not a failure)", r.lost, queueMessages)
	}
	checkCodes(t, &r.errs)
}
