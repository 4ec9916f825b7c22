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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &lockRun{t: t, ctx: ctx, cc: startCoordd(t, c.Addrs(), waitReplicas), waitReplicas: waitReplicas, res: &fencedResource{}}

	var wg sync.WaitGroup
	for i := range lockClients {
		wg.Go(func() { r.client(i) })
	}
	time.Sleep(1500 * time.Millisecond)
	r.f = killMaster(t, c, lockKey(failoverLock), 1500*time.Millisecond)
	time.Sleep(1500 * time.Millisecond)
	cancel()
	wg.Wait()

	r.staleWrites()
	r.fencesBackwards()
	r.doubleHolders()
	r.grantsByPhase()
	r.report()
	r.check()
}

const failoverLock = "failover-lock"

// lockRun is one lockFailover: its clients, what they recorded, and what
// each phase after the load found, for the report and the checks.
type lockRun struct {
	t            *testing.T
	ctx          context.Context // ends the load
	cc           clients
	waitReplicas int
	res          *fencedResource
	errs         codeCounts
	f            failover

	// The clients' records, under mu.
	mu                                           sync.Mutex
	grants                                       []*grant
	zombieReleased, zombieWrites, zombieRejected int
	answers                                      [][2]time.Time // each Lock answered without an error: sent, answered

	// staleWrites
	accepted                []*grant
	rejected, staleAccepted int
	// fencesBackwards
	byRecv    []*grant // the grants by when their answer was received
	backwards int
	// doubleHolders
	doubles    int
	maxOverlap time.Duration
	// grantsByPhase
	before, outage, promoted, rejoined, noReplica int
	lastBefore, firstAfter                        time.Time
}

// client is lock client i until the load ends: Lock, write to the fenced
// resource, Release.
func (r *lockRun) client(i int) {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	for r.ctx.Err() == nil {
		zombie := rng.IntN(zombieEvery) == 0
		ttl := lockTTL
		if zombie {
			ttl = zombieTTL
		}
		send := time.Now()
		cctx, cancelCall := context.WithTimeout(r.ctx, 5*time.Second)
		g, err := r.cc.locks.Lock(cctx, &coordv1.LockRequest{
			Name: failoverLock, Ttl: durationpb.New(ttl), Wait: durationpb.New(lockWait), Owner: fmt.Sprintf("client-%d", i),
		})
		cancelCall()
		recv := time.Now()
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			// UNAVAILABLE: we may hold the lock without knowing its
			// token; never assume we do. Lock again.
			r.errs.add("Lock", err)
			sleepCtx(r.ctx, time.Duration(10+rng.IntN(20))*time.Millisecond)
			continue
		}
		r.mu.Lock()
		r.answers = append(r.answers, [2]time.Time{send, recv})
		r.mu.Unlock()
		if !g.GetAcquired() {
			continue // waited in vain
		}
		r.useAndRelease(rng, &grant{client: i, fence: g.GetFence(), ttl: ttl, send: send, recv: recv, zombie: zombie}, g.GetToken())
	}
}

// useAndRelease writes to the resource with the grant gr (a zombie first
// pauses past its lease), releases the lock and records the grant.
func (r *lockRun) useAndRelease(rng *rand.Rand, gr *grant, token string) {
	leaseEnd := gr.send.Add(gr.ttl)
	if gr.zombie {
		time.Sleep(zombiePause) // paused, unaware; ignores ctx like a real pause
	} else {
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // work
	}
	gr.writeTime = time.Now()
	gr.wrote = r.res.write(gr)
	relStart := time.Now()
	gr.end = relStart
	if leaseEnd.Before(gr.end) {
		gr.end = leaseEnd
	}
	cctx, cancelCall := context.WithTimeout(context.Background(), 5*time.Second)
	rel, err := r.cc.locks.Release(cctx, &coordv1.ReleaseRequest{Name: failoverLock, Token: token})
	cancelCall()
	if err != nil {
		r.errs.add("Release", err) // the lease ends at its TTL
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grants = append(r.grants, gr)
	if gr.zombie {
		r.zombieWrites++
		if !gr.wrote {
			r.zombieRejected++
		}
		if err == nil && rel.GetReleased() {
			r.zombieReleased++
		}
	}
}

// staleWrites counts the stale writes accepted, by real time rather than
// by fence: a write is stale if the resource had already accepted a write
// of a later holder, one whose Lock was sent after this grant's lease had
// certainly ended (its answer received + its TTL: the store counts the
// lease from when it granted it, before the answer). Only fences that
// follow real time let the resource reject it.
func (r *lockRun) staleWrites() {
	t := r.t
	t.Helper()
	r.res.mu.Lock()
	r.accepted, r.rejected = slices.Clone(r.res.accepted), r.res.rejected
	r.res.mu.Unlock()
	var lastSent *grant // of the writes accepted so far, the one whose Lock was sent last
	for i, g := range r.accepted {
		if lastSent != nil && lastSent.send.After(g.recv.Add(g.ttl)) {
			r.staleAccepted++
			if r.staleAccepted <= 5 {
				t.Errorf("stale write accepted: client %d's write with fence %d (granted %s, lease over by %s) after client %d's write with fence %d (Lock sent %s)",
					g.client, g.fence, g.recv.Format("15:04:05.000000"), g.recv.Add(g.ttl).Format("15:04:05.000000"),
					lastSent.client, lastSent.fence, lastSent.send.Format("15:04:05.000000"))
			}
		}
		if lastSent == nil || g.send.After(lastSent.send) {
			lastSent = g
		}
		if i > 0 && g.fence <= r.accepted[i-1].fence {
			t.Fatalf("the resource accepted fence %d after fence %d", g.fence, r.accepted[i-1].fence) // a bug of the test
		}
	}
}

// fencesBackwards: a Lock sent after another Lock's grant was received (so
// the second grant certainly happened after the first) must get a greater
// fence. Sweep the grants by send time, keeping the greatest fence of those
// received before.
func (r *lockRun) fencesBackwards() {
	t := r.t
	t.Helper()
	bySend := slices.Clone(r.grants)
	slices.SortFunc(bySend, func(a, b *grant) int { return a.send.Compare(b.send) })
	r.byRecv = slices.Clone(r.grants)
	slices.SortFunc(r.byRecv, func(a, b *grant) int { return a.recv.Compare(b.recv) })
	byRecv := r.byRecv
	var maxBefore *grant
	j := 0
	for _, g := range bySend {
		for ; j < len(byRecv) && byRecv[j].recv.Before(g.send); j++ {
			if maxBefore == nil || byRecv[j].fence > maxBefore.fence {
				maxBefore = byRecv[j]
			}
		}
		if maxBefore != nil && g.fence <= maxBefore.fence {
			r.backwards++
			if r.backwards <= 5 {
				t.Errorf("fence went backwards: client %d's Lock sent at %s got fence %d, but client %d's grant received at %s had fence %d",
					g.client, g.send.Format("15:04:05.000000"), g.fence, maxBefore.client, maxBefore.recv.Format("15:04:05.000000"), maxBefore.fence)
			}
		}
	}
}

// doubleHolders counts the grants whose believed leases [recv, end]
// overlap.
func (r *lockRun) doubleHolders() {
	t := r.t
	t.Helper()
	byStart := slices.Clone(r.grants)
	slices.SortFunc(byStart, func(a, b *grant) int { return a.recv.Compare(b.recv) })
	var latest *grant
	for _, g := range byStart {
		if latest != nil && g.recv.Before(latest.end) {
			r.doubles++
			end := latest.end
			if g.end.Before(end) {
				end = g.end
			}
			o := end.Sub(g.recv)
			r.maxOverlap = max(r.maxOverlap, o)
			if r.doubles <= 5 {
				t.Logf("double holder: client %d (fence %d) believed it held until %s; client %d (fence %d) was granted at %s (overlap %v; writes accepted: %v, %v)",
					latest.client, latest.fence, latest.end.Format("15:04:05.000000"), g.client, g.fence, g.recv.Format("15:04:05.000000"), o, latest.wrote, g.wrote)
			}
		}
		if latest == nil || g.end.After(latest.end) {
			latest = g
		}
	}
}

// grantsByPhase counts the grants by phase of the failover, and finds how
// long the lock could not be had.
func (r *lockRun) grantsByPhase() {
	f := r.f
	for _, g := range r.byRecv {
		switch {
		case g.recv.Before(f.killed):
			r.before++
			r.lastBefore = g.recv
		case g.recv.Before(f.promoted):
			r.outage++
		case g.recv.Before(f.restarted):
			r.promoted++
		default:
			r.rejoined++
		}
		if !g.send.Before(f.promoted) && g.recv.Before(f.restarted) {
			r.noReplica++ // asked and granted while the lock's master had no replica
		}
		if !g.send.Before(f.killed) && r.firstAfter.IsZero() {
			r.firstAfter = g.recv // the first grant of a Lock sent after the kill
		}
	}
}

// report logs what the run measured, and its summary line.
func (r *lockRun) report() {
	t, f := r.t, r.f
	t.Helper()
	firstAnswer := "never"
	var first time.Time
	for _, a := range r.answers {
		if !a[0].Before(f.killed) && (first.IsZero() || a[1].Before(first)) {
			first = a[1]
		}
	}
	if !first.IsZero() {
		firstAnswer = fmt.Sprintf("%v after the kill (%v after the promotion)", ms(first.Sub(f.killed)), ms(first.Sub(f.promoted)))
	}
	firstGrant := "never"
	if !r.firstAfter.IsZero() {
		firstGrant = fmt.Sprintf("%v after the kill (%v after the promotion, %v after the old master's restart)",
			ms(r.firstAfter.Sub(f.killed)), ms(r.firstAfter.Sub(f.promoted)), ms(r.firstAfter.Sub(f.restarted)))
	}
	normalRejected := r.rejected - r.zombieRejected

	t.Logf("%v", f)
	t.Logf("grants by phase: %d before the kill, %d until the promotion, %d until the old master's restart, %d after", r.before, r.outage, r.promoted, r.rejoined)
	t.Logf("first Lock sent after the kill and answered without an error: %s; first granted: %s; last grant before the kill %v before it",
		firstAnswer, firstGrant, ms(f.killed.Sub(r.lastBefore)))
	t.Logf("errors: %v", &r.errs)
	report(t, "wait_replicas=%d: grants=%d writes accepted=%d rejected-as-stale=%d (zombie writes %d: %d rejected; in-lease writes rejected %d) "+
		"stale-accepted=%d fences-backwards=%d double-holders=%d (max overlap %v) zombie-releases=%d errors=%d promotion=%v first-grant-after-kill=%v",
		r.waitReplicas, len(r.grants), len(r.accepted), r.rejected, r.zombieWrites, r.zombieRejected, normalRejected,
		r.staleAccepted, r.backwards, r.doubles, r.maxOverlap, r.zombieReleased, r.errs.total(), ms(f.promoted.Sub(f.killed)), ms(r.firstAfter.Sub(f.killed)))
}

// check: the lock was granted after the failover and after the old
// master's rejoin; with wait_replicas, never while its master had no
// replica; no zombie's Release released anything; only the codes a
// failover explains.
func (r *lockRun) check() {
	t := r.t
	t.Helper()
	if len(r.grants) == 0 || r.firstAfter.IsZero() {
		t.Errorf("the lock was never granted after the failover (%d grants in all)", len(r.grants))
	}
	if r.rejoined == 0 {
		t.Errorf("no grant after the old master rejoined")
	}
	if r.waitReplicas > 0 && r.noReplica > 0 {
		t.Errorf("with wait_replicas=%d, %d Locks sent after the promotion were granted before the old master's restart, while the lock's master had no replica",
			r.waitReplicas, r.noReplica)
	}
	if r.zombieReleased > 0 {
		t.Errorf("%d Releases by a client whose lease had run out (paused %v > ttl %v) answered released=true", r.zombieReleased, zombiePause, zombieTTL)
	}
	checkCodes(t, &r.errs)
}
