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
	cc := startCoordd(t, c.Addrs(), waitReplicas)
	const qname = "failover-queue"

	var errs codeCounts
	var (
		mu         sync.Mutex
		deliveries = make([]int32, queueMessages+1) // claims handed to a consumer, by number
		acks       = make([]int32, queueMessages+1) // Acks answered acked=true, by number
		redeliv    int                              // claims with attempt > 1
		claims     int                              // Claim calls answered
		bad        []string                         // payloads that are not a number of ours
	)
	var (
		enqueued, duplicates, dupAfterErr, retried atomic.Int64
		ackExpired, ackGaveUp                      atomic.Int64
	)
	// okAnswers are the Enqueues answered OK: when they were sent and
	// answered, and whether the answer was duplicate=true after an earlier
	// attempt for the same number had failed.
	type okAnswer struct {
		n           int64
		send, recv  time.Time
		dupAfterErr bool
	}
	var okMu sync.Mutex
	var okAnswers []okAnswer

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Producers: each takes the next number and enqueues it until an answer
	// says it is there. UNAVAILABLE means "maybe enqueued": retry with the
	// same dedup_id.
	var next atomic.Int64
	var producers sync.WaitGroup
	for p := range queueProducers {
		producers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), uint64(time.Now().UnixNano())))
			tick := time.NewTicker(produceInterval)
			defer tick.Stop()
			for {
				n := next.Add(1)
				if n > queueMessages {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				num := strconv.FormatInt(n, 10)
				failed := false
				for {
					send := time.Now()
					cctx, cancelCall := context.WithTimeout(ctx, 5*time.Second)
					r, err := cc.queues.Enqueue(cctx, &coordv1.EnqueueRequest{
						Queue: qname, Payload: []byte(num), DedupId: num, MaxAttempts: maxAttempts,
					})
					cancelCall()
					if err == nil {
						enqueued.Add(1)
						if r.GetDuplicate() {
							duplicates.Add(1)
							if failed {
								dupAfterErr.Add(1)
							}
						}
						okMu.Lock()
						okAnswers = append(okAnswers, okAnswer{n: n, send: send, recv: time.Now(), dupAfterErr: failed && r.GetDuplicate()})
						okMu.Unlock()
						break
					}
					if ctx.Err() != nil {
						return
					}
					errs.add("Enqueue", err)
					if !failed {
						failed = true
						retried.Add(1)
					}
					sleepCtx(ctx, time.Duration(20+rng.IntN(20))*time.Millisecond)
				}
			}
		})
	}

	// Consumers: claim, "process" (record the number), ack the batch. An
	// Ack that fails is retried a little; if it still fails the messages
	// come back after their visibility timeout.
	var consumers sync.WaitGroup
	for range queueConsumers {
		consumers.Go(func() {
			for ctx.Err() == nil {
				cctx, cancelCall := context.WithTimeout(ctx, 5*time.Second)
				r, err := cc.queues.Claim(cctx, &coordv1.ClaimRequest{
					Queue: qname, MaxMessages: claimMax, VisibilityTimeout: durationpb.New(visibility), Wait: durationpb.New(claimWait),
				})
				cancelCall()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.add("Claim", err)
					sleepCtx(ctx, 20*time.Millisecond)
					continue
				}
				mu.Lock()
				claims++
				mu.Unlock()
				var receipts []string
				nums := map[string]int{} // receipt → number
				for _, m := range r.GetMessages() {
					n, perr := strconv.Atoi(string(m.GetPayload()))
					mu.Lock()
					if perr != nil || n < 1 || n > queueMessages {
						bad = append(bad, fmt.Sprintf("%q (message %s)", m.GetPayload(), m.GetMessageId()))
						mu.Unlock()
						continue
					}
					deliveries[n]++
					if m.GetAttempt() > 1 {
						redeliv++
					}
					mu.Unlock()
					receipts = append(receipts, m.GetReceipt())
					nums[m.GetReceipt()] = n
				}
				if len(r.GetMessages()) < claimMax {
					// Let messages gather: fewer, fuller claims (and acks).
					sleepCtx(ctx, claimPause)
				}
				if len(receipts) == 0 {
					continue
				}
				// One Ack for the batch. A retry after UNAVAILABLE is safe: a
				// receipt already acked comes back expired.
				for try := 0; ; try++ {
					cctx, cancelCall := context.WithTimeout(context.Background(), 5*time.Second)
					a, err := cc.queues.Ack(cctx, &coordv1.AckRequest{Queue: qname, Receipts: receipts})
					cancelCall()
					if err == nil {
						expired := map[string]bool{}
						for _, e := range a.GetExpiredReceipts() {
							expired[e] = true
						}
						ackExpired.Add(int64(len(expired)))
						mu.Lock()
						for _, rc := range receipts {
							if !expired[rc] {
								acks[nums[rc]]++
							}
						}
						mu.Unlock()
						break
					}
					errs.add("Ack", err)
					if try == 3 || ctx.Err() != nil {
						ackGaveUp.Add(int64(len(receipts))) // they come back after their visibility timeout
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}

	// Kill the queue's master once a quarter is enqueued.
	for end := time.Now().Add(60 * time.Second); enqueued.Load() < killAfter; {
		if time.Now().After(end) {
			t.Fatalf("only %d messages enqueued after 60s", enqueued.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	atKill := enqueued.Load()
	f := killMaster(t, c, queueKey(qname), 2*time.Second)
	atRejoin := enqueued.Load()

	producersDone := make(chan struct{})
	go func() {
		producers.Wait()
		close(producersDone)
	}()
	select {
	case <-producersDone:
	case <-time.After(produceTimeout):
		cancel()
		<-producersDone
		t.Fatalf("producers not done %v after the failover: %d of %d enqueued", produceTimeout, enqueued.Load(), queueMessages)
	}
	produced := time.Now()
	t.Logf("all %d messages enqueued %v after the old master rejoined (%d before the kill, %d by the rejoin)",
		queueMessages, ms(produced.Sub(f.rejoined)), atKill, atRejoin)

	// Drain: until every number is delivered and the queue is empty, or
	// the queue stays empty for two polls (what was not delivered then is
	// lost), or drainTimeout.
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, d := range deliveries[1:] {
			if d > 0 {
				n++
			}
		}
		return n
	}
	var stats *coordv1.StatsResponse
	empty := 0
	for end := time.Now().Add(drainTimeout); ; {
		cctx, cancelCall := context.WithTimeout(ctx, 5*time.Second)
		s, err := cc.queues.Stats(cctx, &coordv1.StatsRequest{Queue: qname})
		cancelCall()
		if err == nil {
			stats = s
			if s.GetReady()+s.GetDelayed()+s.GetInFlight() == 0 {
				empty++
			} else {
				empty = 0
			}
			if empty > 0 && delivered() == queueMessages || empty >= 2 {
				break
			}
		}
		if time.Now().After(end) {
			t.Errorf("queue not drained %v after the last enqueue: stats %v, %d of %d numbers delivered", drainTimeout, stats, delivered(), queueMessages)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	drained := time.Now()
	cancel()
	consumers.Wait()

	mu.Lock()
	var lost, dupDeliveries, unacked, dupAcks int
	var lostSample []int
	for n := 1; n <= queueMessages; n++ {
		if deliveries[n] == 0 {
			lost++
			if len(lostSample) < 20 {
				lostSample = append(lostSample, n)
			}
		}
		dupDeliveries += max(0, int(deliveries[n])-1)
		if acks[n] == 0 {
			unacked++
		}
		dupAcks += max(0, int(acks[n])-1)
	}
	redelivered, badPayloads, claimCalls := redeliv, bad, claims
	mu.Unlock()

	// Enqueues answered OK by phase. Between the promotion and the old
	// master's restart the queue's master has no replica at all (3 masters
	// with 1 replica each: the old master was its only one), so with
	// wait_replicas=1 no Enqueue can be replicated then.
	okMu.Lock()
	var firstOKAfterKill time.Time
	var okNoReplica, dupNoReplica int
	// The loss window: when the lost messages' Enqueues were answered OK,
	// relative to the kill.
	lostFrom, lostTo := time.Duration(0), time.Duration(0)
	lostSeen := false
	for _, a := range okAnswers {
		if deliveries[a.n] == 0 {
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
			okNoReplica++
			if a.dupAfterErr {
				dupNoReplica++
			}
		}
	}
	okMu.Unlock()
	firstOK := "never"
	if !firstOKAfterKill.IsZero() {
		firstOK = ms(firstOKAfterKill.Sub(f.killed)).String()
	}
	t.Logf("%v", f)
	t.Logf("first Enqueue sent after the kill and answered OK: %s after the kill", firstOK)
	t.Logf("Enqueues sent after the promotion and answered OK before the old master's restart (the master had no replica): %d, %d of them duplicate=true after a failed attempt",
		okNoReplica, dupNoReplica)
	t.Logf("enqueue: %d numbers needed a retry (maybe enqueued); %d answers duplicate=true, %d of them after an error for the same number",
		retried.Load(), duplicates.Load(), dupAfterErr.Load())
	t.Logf("consume: %d Claims answered; %d redeliveries (attempt > 1), %d receipts acked expired, %d receipts whose Ack was given up after UNAVAILABLE, %d numbers without a confirmed ack (their Ack's answer was lost or expired)",
		claimCalls, redelivered, ackExpired.Load(), ackGaveUp.Load(), unacked)
	t.Logf("errors: %v", &errs)
	t.Logf("final stats: ready %d, delayed %d, in_flight %d, dead %d; drained %v after the last enqueue",
		stats.GetReady(), stats.GetDelayed(), stats.GetInFlight(), stats.GetDead(), ms(drained.Sub(produced)))
	lossWindow := "none"
	if lostSeen {
		lossWindow = fmt.Sprintf("answered OK from %v to %v after the kill", ms(lostFrom), ms(lostTo))
	}
	if lost > 0 {
		t.Logf("lost numbers (never delivered), first %d: %v; their Enqueues were %s", len(lostSample), lostSample, lossWindow)
	}
	report(t, "wait_replicas=%d: messages=%d lost=%d (loss window: %s) duplicate-deliveries=%d duplicate-acks=%d redeliveries=%d unconfirmed-acks=%d "+
		"enqueue-retries=%d duplicate-enqueues=%d (ok-without-replica=%d) errors=%d final-stats(ready/delayed/in_flight/dead)=%d/%d/%d/%d promotion=%v first-enqueue-after-kill=%s",
		waitReplicas, queueMessages, lost, lossWindow, dupDeliveries, dupAcks, redelivered, unacked, retried.Load(), duplicates.Load(), okNoReplica, errs.total(),
		stats.GetReady(), stats.GetDelayed(), stats.GetInFlight(), stats.GetDead(), ms(f.promoted.Sub(f.killed)), firstOK)

	if len(badPayloads) > 0 {
		t.Errorf("%d messages that were never enqueued were delivered: %v", len(badPayloads), badPayloads[:min(5, len(badPayloads))])
	}
	if stats.GetDead() > 0 {
		t.Errorf("%d dead letters with max_attempts %d: a message was claimed and not acked %d times", stats.GetDead(), maxAttempts, maxAttempts)
	}
	if waitReplicas > 0 {
		if lost > 0 {
			t.Errorf("with wait_replicas=%d, %d of %d messages were never delivered (lost), e.g. %v; want none: an Enqueue answered OK was replicated",
				waitReplicas, lost, queueMessages, lostSample)
		}
		if okNoReplica > 0 {
			// docs/configuration.md, redis.wait_replicas: "an enqueue … wait[s] until that
			// many replicas have [it]; fewer in time is reported UNAVAILABLE".
			t.Errorf("with wait_replicas=%d, %d Enqueues were answered OK while the queue's master had no replica (sent after the promotion, answered before "+
				"the old master, its only possible replica, was started again); %d of them were duplicate=true answers to a retry after UNAVAILABLE. "+
				"Want UNAVAILABLE: an unreplicated message, new or found by its dedup_id, could still be lost",
				waitReplicas, okNoReplica, dupNoReplica)
		}
		if stats.GetReady()+stats.GetDelayed()+stats.GetInFlight()+stats.GetDead() != 0 {
			t.Errorf("with wait_replicas=%d the queue ends with stats %v; want 0/0/0/0 (every message acked)", waitReplicas, stats)
		}
	} else if lost > 0 {
		t.Logf("async replication lost %d of %d acknowledged enqueues in the failover: the loss window (not a failure)", lost, queueMessages)
	}
	checkCodes(t, &errs)
}
