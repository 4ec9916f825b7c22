package failover

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

const (
	lockClients = 32
	lockTTL     = 1500 * time.Millisecond
	lockWait    = time.Second
	// One Lock in zombieEvery is made by a "zombie": a client that takes the
	// lock with a short TTL, pauses (a GC pause, a stalled VM) past its
	// lease and then writes with its old fence, without checking anything.
	// The resource must reject that write if a newer holder has written
	// since.
	zombieEvery = 20
	zombieTTL   = 300 * time.Millisecond
	// zombiePause is how long a zombie pauses: past its TTL.
	zombiePause = zombieTTL + 300*time.Millisecond
)

// fencedResource is the downstream a lock protects: it accepts a write only
// if its fence is greater than every fence it accepted before, and rejects
// it as stale otherwise (UPDATE … WHERE last_fence < $fence).
type fencedResource struct {
	mu       sync.Mutex
	last     uint64
	accepted []*grant // the grants whose writes it accepted, in that order
	rejected int
}

func (r *fencedResource) write(g *grant) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g.fence <= r.last {
		r.rejected++
		return false
	}
	r.last = g.fence
	r.accepted = append(r.accepted, g)
	return true
}

// grant is one acquisition as its client saw it, by the local clock.
type grant struct {
	client     int
	fence      uint64
	ttl        time.Duration
	send, recv time.Time // Lock sent; its answer received
	// end is when the client stops believing it holds the lock: when it
	// sends Release, or when its lease runs out counted from when it sent
	// Lock (the safe bound a client can compute), whichever is first.
	end       time.Time
	zombie    bool
	wrote     bool      // its write was accepted
	storeNow  time.Time // the store's clock at the grant: its expire_time - ttl (TestReplicationLoss)
	writeTime time.Time
}

// TestLockFailover runs 32 clients that loop Lock → write to a fenced
// resource → Release on one lock while the master of the lock's slot is
// killed (SIGKILL), its replica promoted, and the old master started again.
// Zombies (see zombieEvery) write after their lease has run out. It checks
// that the resource never accepted a stale write, that fences never went
// backwards (a Lock sent after another Lock's grant was received got a
// greater fence), and that a zombie's Release after its lease ran out never
// released anything; it reports double holders (grants whose believed
// leases overlap), with asynchronous replication and with wait_replicas=1.
func TestLockFailover(t *testing.T) {
	for _, tc := range []struct {
		name         string
		waitReplicas int
	}{
		{"async", 0},
		{"wait_replicas=1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each on its own cluster; mostly waiting for the failover
			lockFailover(t, tc.waitReplicas)
		})
	}
}

func lockFailover(t *testing.T, waitReplicas int) {
	c := startCluster(t)
	cc := startCoordd(t, c.Addrs(), waitReplicas)
	const name = "failover-lock"

	res := &fencedResource{}
	var errs codeCounts
	var mu sync.Mutex
	var grants []*grant
	var zombieReleased, zombieWrites, zombieRejected int
	var answers [][2]time.Time // each Lock answered without an error: sent, answered
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range lockClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				zombie := rng.IntN(zombieEvery) == 0
				ttl := lockTTL
				if zombie {
					ttl = zombieTTL
				}
				send := time.Now()
				cctx, cancelCall := context.WithTimeout(ctx, 5*time.Second)
				g, err := cc.locks.Lock(cctx, &coordv1.LockRequest{
					Name: name, Ttl: durationpb.New(ttl), Wait: durationpb.New(lockWait), Owner: fmt.Sprintf("client-%d", i),
				})
				cancelCall()
				recv := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					// UNAVAILABLE: we may hold the lock without knowing its
					// token; never assume we do. Lock again.
					errs.add("Lock", err)
					sleepCtx(ctx, time.Duration(10+rng.IntN(20))*time.Millisecond)
					continue
				}
				mu.Lock()
				answers = append(answers, [2]time.Time{send, recv})
				mu.Unlock()
				if !g.GetAcquired() {
					continue // waited in vain
				}
				gr := &grant{client: i, fence: g.GetFence(), ttl: ttl, send: send, recv: recv, zombie: zombie}
				leaseEnd := send.Add(ttl)
				if gr.zombie {
					time.Sleep(zombiePause) // paused, unaware; ignores ctx like a real pause
				} else {
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // work
				}
				gr.writeTime = time.Now()
				gr.wrote = res.write(gr)
				relStart := time.Now()
				gr.end = relStart
				if leaseEnd.Before(gr.end) {
					gr.end = leaseEnd
				}
				cctx, cancelCall = context.WithTimeout(context.Background(), 5*time.Second)
				r, err := cc.locks.Release(cctx, &coordv1.ReleaseRequest{Name: name, Token: g.GetToken()})
				cancelCall()
				if err != nil {
					errs.add("Release", err) // the lease ends at its TTL
				}
				mu.Lock()
				grants = append(grants, gr)
				if gr.zombie {
					zombieWrites++
					if !gr.wrote {
						zombieRejected++
					}
					if err == nil && r.GetReleased() {
						zombieReleased++
					}
				}
				mu.Unlock()
			}
		})
	}

	time.Sleep(1500 * time.Millisecond)
	f := killMaster(t, c, lockKey(name), 1500*time.Millisecond)
	time.Sleep(1500 * time.Millisecond)
	cancel()
	wg.Wait()

	// Stale writes accepted, by real time rather than by fence: a write is
	// stale if the resource had already accepted a write of a later holder,
	// one whose Lock was sent after this grant's lease had certainly ended
	// (its answer received + its TTL: the store counts the lease from when
	// it granted it, before the answer). Only fences that follow real time
	// let the resource reject it.
	res.mu.Lock()
	accepted, rejected := slices.Clone(res.accepted), res.rejected
	res.mu.Unlock()
	staleAccepted := 0
	var lastSent *grant // of the writes accepted so far, the one whose Lock was sent last
	for i, g := range accepted {
		if lastSent != nil && lastSent.send.After(g.recv.Add(g.ttl)) {
			staleAccepted++
			if staleAccepted <= 5 {
				t.Errorf("stale write accepted: client %d's write with fence %d (granted %s, lease over by %s) after client %d's write with fence %d (Lock sent %s)",
					g.client, g.fence, g.recv.Format("15:04:05.000000"), g.recv.Add(g.ttl).Format("15:04:05.000000"),
					lastSent.client, lastSent.fence, lastSent.send.Format("15:04:05.000000"))
			}
		}
		if lastSent == nil || g.send.After(lastSent.send) {
			lastSent = g
		}
		if i > 0 && g.fence <= accepted[i-1].fence {
			t.Fatalf("the resource accepted fence %d after fence %d", g.fence, accepted[i-1].fence) // a bug of the test
		}
	}

	// Fences never go backwards: a Lock sent after another Lock's grant was
	// received (so the second grant certainly happened after the first) must
	// get a greater fence. Sweep the grants by send time, keeping the
	// greatest fence of those received before.
	bySend := slices.Clone(grants)
	slices.SortFunc(bySend, func(a, b *grant) int { return a.send.Compare(b.send) })
	byRecv := slices.Clone(grants)
	slices.SortFunc(byRecv, func(a, b *grant) int { return a.recv.Compare(b.recv) })
	backwards := 0
	var maxBefore *grant
	j := 0
	for _, g := range bySend {
		for ; j < len(byRecv) && byRecv[j].recv.Before(g.send); j++ {
			if maxBefore == nil || byRecv[j].fence > maxBefore.fence {
				maxBefore = byRecv[j]
			}
		}
		if maxBefore != nil && g.fence <= maxBefore.fence {
			backwards++
			if backwards <= 5 {
				t.Errorf("fence went backwards: client %d's Lock sent at %s got fence %d, but client %d's grant received at %s had fence %d",
					g.client, g.send.Format("15:04:05.000000"), g.fence, maxBefore.client, maxBefore.recv.Format("15:04:05.000000"), maxBefore.fence)
			}
		}
	}

	// Double holders: grants whose believed leases [recv, end] overlap.
	byStart := slices.Clone(grants)
	slices.SortFunc(byStart, func(a, b *grant) int { return a.recv.Compare(b.recv) })
	doubles := 0
	var maxOverlap time.Duration
	var latest *grant
	for _, g := range byStart {
		if latest != nil && g.recv.Before(latest.end) {
			doubles++
			end := latest.end
			if g.end.Before(end) {
				end = g.end
			}
			o := end.Sub(g.recv)
			maxOverlap = max(maxOverlap, o)
			if doubles <= 5 {
				t.Logf("double holder: client %d (fence %d) believed it held until %s; client %d (fence %d) was granted at %s (overlap %v; writes accepted: %v, %v)",
					latest.client, latest.fence, latest.end.Format("15:04:05.000000"), g.client, g.fence, g.recv.Format("15:04:05.000000"), o, latest.wrote, g.wrote)
			}
		}
		if latest == nil || g.end.After(latest.end) {
			latest = g
		}
	}

	// Grants by phase, and how long the lock could not be had.
	var before, outage, promoted, rejoined, noReplica int
	var lastBefore, firstAfter time.Time
	for _, g := range byRecv {
		switch {
		case g.recv.Before(f.killed):
			before++
			lastBefore = g.recv
		case g.recv.Before(f.promoted):
			outage++
		case g.recv.Before(f.restarted):
			promoted++
		default:
			rejoined++
		}
		if !g.send.Before(f.promoted) && g.recv.Before(f.restarted) {
			noReplica++ // asked and granted while the lock's master had no replica
		}
		if !g.send.Before(f.killed) && firstAfter.IsZero() {
			firstAfter = g.recv // the first grant of a Lock sent after the kill
		}
	}
	firstAnswer := "never"
	var first time.Time
	for _, a := range answers {
		if !a[0].Before(f.killed) && (first.IsZero() || a[1].Before(first)) {
			first = a[1]
		}
	}
	if !first.IsZero() {
		firstAnswer = fmt.Sprintf("%v after the kill (%v after the promotion)", ms(first.Sub(f.killed)), ms(first.Sub(f.promoted)))
	}
	firstGrant := "never"
	if !firstAfter.IsZero() {
		firstGrant = fmt.Sprintf("%v after the kill (%v after the promotion, %v after the old master's restart)",
			ms(firstAfter.Sub(f.killed)), ms(firstAfter.Sub(f.promoted)), ms(firstAfter.Sub(f.restarted)))
	}
	normalRejected := rejected - zombieRejected

	t.Logf("%v", f)
	t.Logf("grants by phase: %d before the kill, %d until the promotion, %d until the old master's restart, %d after", before, outage, promoted, rejoined)
	t.Logf("first Lock sent after the kill and answered without an error: %s; first granted: %s; last grant before the kill %v before it",
		firstAnswer, firstGrant, ms(f.killed.Sub(lastBefore)))
	t.Logf("errors: %v", &errs)
	report(t, "wait_replicas=%d: grants=%d writes accepted=%d rejected-as-stale=%d (zombie writes %d: %d rejected; in-lease writes rejected %d) "+
		"stale-accepted=%d fences-backwards=%d double-holders=%d (max overlap %v) zombie-releases=%d errors=%d promotion=%v first-grant-after-kill=%v",
		waitReplicas, len(grants), len(accepted), rejected, zombieWrites, zombieRejected, normalRejected,
		staleAccepted, backwards, doubles, maxOverlap, zombieReleased, errs.total(), ms(f.promoted.Sub(f.killed)), ms(firstAfter.Sub(f.killed)))

	if len(grants) == 0 || firstAfter.IsZero() {
		t.Errorf("the lock was never granted after the failover (%d grants in all)", len(grants))
	}
	if rejoined == 0 {
		t.Errorf("no grant after the old master rejoined")
	}
	if waitReplicas > 0 && noReplica > 0 {
		t.Errorf("with wait_replicas=%d, %d Locks sent after the promotion were granted before the old master's restart, while the lock's master had no replica",
			waitReplicas, noReplica)
	}
	if zombieReleased > 0 {
		t.Errorf("%d Releases by a client whose lease had run out (paused %v > ttl %v) answered released=true", zombieReleased, zombiePause, zombieTTL)
	}
	checkCodes(t, &errs)
}
