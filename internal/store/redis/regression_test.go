package redis

// Regression tests for defects a review found in the Redis store. Each one
// forces the interleaving or the input that exposed its defect — with go-redis
// hooks that run code between two of an operation's scripts, a simulated
// clock, injected failures, or a real failover on a private cluster — and
// checks the behaviour that the fix promises. Each comment says what the old
// code did with the same input.
//
// Tests on the shared instances keep to a random key prefix and delete it when
// they end; destructive ones (a failover, SCRIPT FLUSH, CLIENT PAUSE,
// REPLICAOF) start private servers.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/waiter"
)

// rgHook is a go-redis hook that runs one-shot callbacks at chosen script
// calls, so that a test can put other operations between two steps of one.
// Scripts are told apart by their SHA (an EVALSHA's second argument).
type rgHook struct {
	mu       sync.Mutex
	before   map[string]func() // before the next EVALSHA of the script (not pipelined)
	after    map[string]func() // after it
	pipeline map[string]func() // before the next pipeline that holds an EVALSHA of it
	failPipe map[string]error  // the next pipeline that holds it fails with this, unsent
}

func newRgHook() *rgHook {
	return &rgHook{before: map[string]func(){}, after: map[string]func(){},
		pipeline: map[string]func(){}, failPipe: map[string]error{}}
}

// set arms a callback (or a failure) for the script sc.
func rgSet[V any](h *rgHook, m map[string]V, sc *script, v V) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m[sc.Hash()] = v
}

func rgTake[V any](h *rgHook, m map[string]V, sha string) (V, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := m[sha]
	delete(m, sha)
	return v, ok
}

func rgSHA(cmd goredis.Cmder) string {
	a := cmd.Args()
	if len(a) > 1 && a[0] == "evalsha" {
		sha, _ := a[1].(string)
		return sha
	}
	return ""
}

func (h *rgHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *rgHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		sha := rgSHA(cmd)
		if f, ok := rgTake(h, h.before, sha); ok {
			f()
		}
		err := next(ctx, cmd)
		if f, ok := rgTake(h, h.after, sha); ok {
			f()
		}
		return err
	}
}

func (h *rgHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, c := range cmds {
			if err, ok := rgTake(h, h.failPipe, rgSHA(c)); ok {
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
			if f, ok := rgTake(h, h.pipeline, rgSHA(c)); ok {
				f()
				break
			}
		}
		return next(ctx, cmds)
	}
}

// rgT0 is the simulated clock's start.
var rgT0 = time.Unix(1_800_000_000, 0)

// rgStandalone returns a Store opened (Open) on the Redis at addr as cfg
// says, with rgHook installed, a random key prefix (deleted when the test
// ends) and, if clk is not nil, the simulated clock; and the store's client.
func rgStandalone(t *testing.T, addr string, clk clock.Clock, cfg Config) (*Store, *goredis.Client, *rgHook) {
	t.Helper()
	h := newRgHook()
	cfg.Addrs = []string{addr}
	cfg.Hooks = append(cfg.Hooks, h)
	if cfg.Prefix == "" {
		cfg.Prefix = "rg" + token.New()[:12]
	}
	t.Cleanup(func() { rgDeletePrefix(t, addr, cfg.Prefix) })
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if clk != nil {
		cfg.Clock = clk
	}
	s := openStore(t, cfg)
	return s, s.Client().(*goredis.Client), h
}

// rgDeletePrefix deletes the keys under prefix on the standalone Redis at addr.
func rgDeletePrefix(t *testing.T, addr, prefix string) {
	c := goredis.NewClient(redistest.Options(addr))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		_ = c.Unlink(ctx, iter.Val()).Err()
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleanup of prefix %s: %v", prefix, err)
	}
}

// rgHoldsDue makes the next heartbeat of session id look at its holds
// (session_refresh.lua's due): as if their keys' horizon had come.
func rgHoldsDue(t *testing.T, s *Store, id string) {
	t.Helper()
	if err := s.Client().HDel(context.Background(), s.keys.session(id)[0], "hk").Err(); err != nil {
		t.Fatal(err)
	}
}

func rgSession(t *testing.T, s *Store, ttl time.Duration, max int) string {
	t.Helper()
	sid := "ns:" + token.New()
	if _, err := s.CreateSession(context.Background(), sid, ttl, max, 0); err != nil {
		t.Fatal(err)
	}
	return sid
}

// TestRegressionLostInFlightIsNotAGrant (review #1): a session-bound
// AcquireLock whose lease ran out between the grant (step 2) and its binding
// to the session (step 3), while someone else took the lock, must not tell its
// caller that it holds the lock.
//
// Forced interleaving (simulated clock; session S of TTL 10 s from T0):
//
//	A step 1 reads S's deadline: T0+10
//	  [hook] clock T0+9; a keepalive extends S to T0+19 (it holds no lock yet)
//	A step 2 grants L to A until T0+10, the deadline it read
//	  [hook] clock T0+11: A's lease is over; B acquires L (plain, 30 s)
//	A step 3 binds L to S, whose deadline T0+19 is later than A's lease
//	A step 4 extends A's lease to T0+19: lock_session answers 0 (L is B's)
//
// The old code ignored step 4's answer and returned Acquired to A as well as
// to B. Now A gets an uncertain outcome (errLostInFlight, wrapping
// store.ErrUnavailable) and S's set no longer lists L.
func TestRegressionLostInFlightIsNotAGrant(t *testing.T) {
	clk := clock.NewFake(rgT0)
	s, _, h := rgStandalone(t, redistest.Standalone(t), clk, Config{})
	ctx := context.Background()
	sid := rgSession(t, s, 10*time.Second, 0)

	var gB store.Grant
	var errB error
	rgSet(h, h.after, sessionDeadline, func() {
		clk.Advance(9 * time.Second)
		if _, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0); err != nil {
			t.Errorf("keepalive between steps 1 and 2: %v", err)
		}
	})
	rgSet(h, h.before, sessionAddHold, func() {
		clk.Advance(2 * time.Second)
		gB, errB = s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L", Token: token.New(), Owner: "B", TTL: 30 * time.Second})
	})
	tokA := token.New()
	gA, errA := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L", Token: tokA, Owner: "A", SessionID: sid})
	if errB != nil || !gB.Acquired {
		t.Fatalf("B's AcquireLock of the expired lock = %+v, %v; want acquired (the interleaving was not forced)", gB, errB)
	}
	if gA.Acquired {
		t.Fatalf("A's session-bound AcquireLock = %+v, %v: A and B were both told they hold ns:L", gA, errA)
	}
	if !errors.Is(errA, store.ErrUnavailable) || !strings.Contains(fmt.Sprint(errA), errLostInFlight.Error()) {
		t.Errorf("A's AcquireLock error = %v; want errLostInFlight (store.ErrUnavailable)", errA)
	}
	info, err := s.GetHolds(ctx, store.HoldLock, "ns:L")
	if err != nil || !info.Held || info.Owner != "B" || info.Fence != gB.Fence {
		t.Errorf("GetLock = %+v, %v; want held by B with fence %d", info, err, gB.Fence)
	}
	// A's entry left S's set: a check does not report a lock S never had.
	st, err := s.CheckSession(ctx, store.SessionRef{ID: sid})
	if err != nil || st.Expired || len(st.Lost) != 0 {
		t.Errorf("CheckSession after the lost acquire = %+v, %v; want live, nothing lost", st, err)
	}
	if ok, _, err := storetest.ReleaseLock(ctx, s, "ns:L", tokA); err != nil || ok {
		t.Errorf("ReleaseLock with A's token = %v, %v; want not released (B holds it)", ok, err)
	}
}

// TestRegressionAcquireNeverShortensLease (review #2): the renewal that a
// session-bound AcquireLock applies in its step 4 only extends a lock, so a
// keepalive that extended it further in the meantime is not undone.
//
// Forced interleaving (simulated clock; session S of TTL 10 s from T0):
//
//	A step 1 reads S's deadline: T0+10
//	  [hook] clock T0+1; keepalive K1 extends S to T0+11 (no lock yet)
//	A step 2 grants L until T0+10; step 3 binds it, S's deadline is T0+11
//	  [hook, before step 4] clock T0+5; keepalive K2 extends S and L to T0+15
//	A step 4 renews L to T0+11, the deadline step 3 saw
//
// The old code set L's deadline to T0+11, so at T0+12 the lock was gone while
// S was live until T0+15 and kept alive: a keepalive then reported it lost.
func TestRegressionAcquireNeverShortensLease(t *testing.T) {
	clk := clock.NewFake(rgT0)
	s, _, h := rgStandalone(t, redistest.Standalone(t), clk, Config{})
	ctx := context.Background()
	sid := rgSession(t, s, 10*time.Second, 0)

	rgSet(h, h.after, sessionDeadline, func() {
		clk.Advance(time.Second)
		if _, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0); err != nil {
			t.Errorf("K1: %v", err)
		}
	})
	var k2 store.SessionState
	var k2err error
	stepFour := false
	rgSet(h, h.before, holdSession, func() {
		stepFour = true
		clk.Advance(4 * time.Second)
		k2, k2err = s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0)
	})
	g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L", Token: token.New(), Owner: "A", SessionID: sid})
	if err != nil || !g.Acquired {
		t.Fatalf("AcquireLock = %+v, %v; want acquired", g, err)
	}
	if !stepFour {
		t.Fatal("step 4 did not run: the interleaving was not forced")
	}
	if want := rgT0.Add(15 * time.Second); k2err != nil || !k2.ExpireTime.Equal(want) || len(k2.Lost) != 0 {
		t.Fatalf("K2 = %+v, %v; want the session until %v, nothing lost", k2, k2err, want)
	}
	clk.Advance(7 * time.Second) // T0+12
	info, err := s.GetHolds(ctx, store.HoldLock, "ns:L")
	if want := rgT0.Add(15 * time.Second); err != nil || !info.Held || !info.ExpireTime.Equal(want) {
		t.Errorf("GetLock at T0+12 = %+v, %v; want held until %v (K2's renewal), not cut back to T0+11", info, err, want)
	}
	st, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0)
	if err != nil || st.Expired || len(st.Lost) != 0 {
		t.Errorf("keepalive at T0+12 = %+v, %v; want live, nothing lost", st, err)
	}
}

// TestRegressionSessionDeadlineNeverShortens (review #3a): a keepalive with a
// shorter TTL, run while a session-bound AcquireLock is between reading the
// session's deadline (step 1) and granting the lock until it (step 2), must
// not leave the lock to outlive its session.
//
// Forced interleaving: session S of TTL 60 s from T0; after step 1 (deadline
// T0+60) a keepalive asks for a TTL of 5 s. The old code moved S's deadline
// back to T0+5 while the lock was granted until T0+60: at T0+6 S was reported
// expired, with L lost, and L was still held. Now a deadline is never
// shortened: S stays until T0+60.
func TestRegressionSessionDeadlineNeverShortens(t *testing.T) {
	clk := clock.NewFake(rgT0)
	s, _, h := rgStandalone(t, redistest.Standalone(t), clk, Config{})
	ctx := context.Background()
	sid := rgSession(t, s, time.Minute, 0)

	var shrunk store.SessionState
	var shrunkErr error
	rgSet(h, h.after, sessionDeadline, func() {
		shrunk, shrunkErr = s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 5*time.Second)
	})
	g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L", Token: token.New(), Owner: "A", SessionID: sid})
	if err != nil || !g.Acquired {
		t.Fatalf("AcquireLock = %+v, %v; want acquired", g, err)
	}
	if want := rgT0.Add(time.Minute); shrunkErr != nil || !shrunk.ExpireTime.Equal(want) {
		t.Errorf("keepalive with a 5 s TTL = %+v, %v; want the later deadline %v kept", shrunk, shrunkErr, want)
	}
	clk.Advance(6 * time.Second)
	st, stErr := s.CheckSession(ctx, store.SessionRef{ID: sid})
	info, err := s.GetHolds(ctx, store.HoldLock, "ns:L")
	if err != nil {
		t.Fatal(err)
	}
	gone := errors.Is(stErr, store.ErrSessionNotFound) || (stErr == nil && st.Expired)
	if info.Held && gone {
		t.Fatalf("at T0+6 the session is over (%+v, %v) but its lock is held: %+v", st, stErr, info)
	}
	if stErr != nil || st.Expired || !info.Held || info.ExpireTime.After(st.ExpireTime) {
		t.Errorf("at T0+6: CheckSession = %+v, %v; GetLock = %+v; want both live, the lock no later than its session", st, stErr, info)
	}
}

// TestRegressionKeepAliveFalseLoss (review #4): a keepalive that listed a
// lock, then found it no longer held by the token it listed, must not report
// it lost when it left the session's set by itself meanwhile: released by its
// token, or released and acquired again by the same session with a new token.
//
// Forced interleaving: between the keepalive's first script (which lists L
// with token t1) and its pipeline of renewals, the hook releases L and, in the
// second case, acquires it again for the session (token t2). The pipeline's
// renewal of (L, t1) answers 0. The old code reported L lost whatever
// the removal of its entries found; now only the entries it removed are lost, and
// (L, t1) was no longer there.
func TestRegressionKeepAliveFalseLoss(t *testing.T) {
	for _, relock := range []bool{false, true} {
		t.Run(map[bool]string{false: "released", true: "relocked"}[relock], func(t *testing.T) {
			clk := clock.NewFake(rgT0)
			s, _, h := rgStandalone(t, redistest.Standalone(t), clk, Config{})
			ctx := context.Background()
			sid := rgSession(t, s, 10*time.Second, 0)
			t1 := token.New()
			if g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L", Token: t1, Owner: "A", SessionID: sid}); err != nil || !g.Acquired {
				t.Fatalf("AcquireLock = %+v, %v", g, err)
			}
			var g2 store.Grant
			forced := false
			rgHoldsDue(t, s, sid)
			rgSet(h, h.pipeline, holdSession, func() {
				forced = true
				if ok, _, err := storetest.ReleaseLock(ctx, s, "ns:L", t1); err != nil || !ok {
					t.Errorf("ReleaseLock = %v, %v", ok, err)
				}
				if relock {
					var err error
					if g2, err = s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L", Token: token.New(), Owner: "A", SessionID: sid}); err != nil || !g2.Acquired {
						t.Errorf("AcquireLock again = %+v, %v", g2, err)
					}
				}
			})
			st, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0)
			if !forced {
				t.Fatal("the keepalive ran no pipeline: the interleaving was not forced")
			}
			if err != nil || len(st.Lost) != 0 {
				t.Fatalf("KeepAliveSession = %+v, %v; want nothing lost (ns:L was released by its token)", st, err)
			}
			info, err := s.GetHolds(ctx, store.HoldLock, "ns:L")
			if err != nil || info.Held != relock || (relock && info.Fence != g2.Fence) {
				t.Errorf("GetLock = %+v, %v; want held=%v (fence %d)", info, err, relock, g2.Fence)
			}
			// The new entry (t2) is intact: the next keepalive renews it.
			if st, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0); err != nil || len(st.Lost) != 0 {
				t.Errorf("next KeepAliveSession = %+v, %v; want nothing lost", st, err)
			}
		})
	}
}

// TestRegressionPubSubSurvivesFailover (review #5): a sharded subscription
// keeps waking its waiters after its slot's master fails over.
//
// Forced input: a private Cluster of 3 masters with a replica each; a waiter
// on queue L; CLUSTER FAILOVER on the replica of L's master. Redis then ends
// the old master's shard subscriptions with a pushed "sunsubscribe", which
// go-redis does not act on. The old code woke the waiters once for that
// message and then listened to nothing: no node had a subscriber, and
// enqueues into L woke no one. Now the store subscribes again on the slot's
// new owner.
func TestRegressionPubSubSurvivesFailover(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	defer rgCloseAdmins()
	s := openStore(t, Config{Addrs: c.Addrs(), Timeout: 2 * time.Second})
	ctx := context.Background()
	name := "ns:L"
	key, channel := s.keys.queue(name)[0], s.keys.channel(store.QueueTopic(name))
	sub, err := s.Subscribe(ctx, store.QueueTopic(name))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// enqueueWakes enqueues into L (whose wake-up a waiting Claim listens
	// for) and reports whether sub woke.
	enqueueWakes := func() bool {
		t.Helper()
		rgDrain(sub)
		var err error
		for range 20 { // the cluster may still be settling after the failover
			if _, err = s.Enqueue(ctx, name, store.NewMessage{ID: token.New(), Payload: []byte("p"), MaxAttempts: 1}); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		select {
		case <-sub.C():
			return true
		case <-time.After(3 * time.Second):
			return false
		}
	}
	if !enqueueWakes() {
		t.Fatal("an enqueue did not wake the waiter before any failover")
	}

	old := c.MasterFor(key)
	oldPort := old.Addr()[strings.LastIndex(old.Addr(), ":")+1:]
	var replica *redistest.Server
	for _, r := range c.Replicas() {
		info, err := rgAdmin(r.Addr()).Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_port:"+oldPort+"\r\n") {
			replica = r
		}
	}
	if replica == nil {
		t.Fatalf("no replica of %s", old.Addr())
	}
	if err := rgAdmin(replica.Addr()).Do(ctx, "cluster", "failover").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.Addr(), err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.MasterFor(key).Addr() != replica.Addr() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not take over from %s", replica.Addr(), old.Addr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.WaitHealthy(20 * time.Second)

	// Some node of the shard must have a subscriber to L's channel again.
	// (Waiting for it first keeps the wake-up that follows a resubscription
	// from passing for the enqueue's.)
	deadline = time.Now().Add(10 * time.Second)
	for n := 0; n == 0; {
		for _, a := range []string{old.Addr(), replica.Addr()} {
			if r, err := rgAdmin(a).Do(ctx, "pubsub", "shardnumsub", channel).Slice(); err == nil && len(r) == 2 {
				k, _ := r[1].(int64)
				n += int(k)
			}
		}
		if n == 0 && time.Now().After(deadline) {
			t.Fatalf("10 s after the failover no node of the shard has a subscriber to %s: its waiters will never be woken", channel)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 2 {
		if !enqueueWakes() {
			t.Fatalf("enqueue %d after the failover did not wake the waiter", i+1)
		}
	}
}

func rgDrain(sub *store.Subscription) {
	for {
		select {
		case <-sub.C():
		default:
			return
		}
	}
}

// rgAdmin returns a client of one node for administrative commands; it is
// closed when the test binary's cleanup runs (see rgAdmins).
func rgAdmin(addr string) *goredis.Client {
	rgAdmins.Lock()
	defer rgAdmins.Unlock()
	if c := rgAdmins.m[addr]; c != nil {
		return c
	}
	o := redistest.Options(addr)
	// Kept from before redistest.Options: two connections and 5s reads, for
	// the slower administrative commands (CLUSTER, DEBUG) of a busy node.
	o.PoolSize, o.ReadTimeout = 2, 5*time.Second
	c := goredis.NewClient(o)
	rgAdmins.m[addr] = c
	return c
}

var rgAdmins = struct {
	sync.Mutex
	m map[string]*goredis.Client
}{m: map[string]*goredis.Client{}}

// rgCloseAdmins closes the admin clients; each test that uses rgAdmin defers
// it, since goleak checks for their goroutines at the end.
func rgCloseAdmins() {
	rgAdmins.Lock()
	defer rgAdmins.Unlock()
	for a, c := range rgAdmins.m {
		_ = c.Close()
		delete(rgAdmins.m, a)
	}
}

// TestRegressionReplicaShortfallIsNotAnOutage (review #6): with
// WaitReplicas set and no replica to acknowledge, a grant is reported
// uncertain (the write happened and a failover could lose it), but the
// master answered: its breaker stays closed, other operations keep working,
// and an acquire that found the lock held (it wrote nothing) is an ordinary
// "not acquired".
//
// Forced input: the shared standalone Redis, which has no replica;
// WaitReplicas 1; breakers that open after 2 failures. The old code set the
// WAIT shortfall as the error of every replicated script, whatever it did, and
// counted it as a failure to reach Redis: a contended acquire failed
// (UNAVAILABLE), and after two grants the breaker opened and refused even
// Allow for a minute.
func TestRegressionReplicaShortfallIsNotAnOutage(t *testing.T) {
	addr := redistest.Standalone(t)
	prefix := "rg" + token.New()[:12]
	t.Cleanup(func() { rgDeletePrefix(t, addr, prefix) })
	s := openStore(t, Config{Addrs: []string{addr}, BreakerFailures: 2, BreakerCooldown: time.Minute, Prefix: prefix,
		Timeout: 2 * time.Second, WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	// The holder, through a store that does not wait for replicas.
	plain, _, _ := rgStandalone(t, addr, nil, Config{Prefix: prefix})
	ctx := context.Background()
	if g, err := plain.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:held", Token: token.New(), Owner: "holder", TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("holder's AcquireLock = %+v, %v", g, err)
	}

	for i := range 3 {
		g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:held", Token: token.New(), Owner: "me", TTL: time.Minute})
		if err != nil || g.Acquired || g.Holder != "holder" {
			t.Fatalf("contended AcquireLock %d = %+v, %v; want not acquired, held by holder, no error", i, g, err)
		}
	}
	for i := range 3 {
		name, tok := fmt.Sprintf("ns:free%d", i), token.New()
		_, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: "me", TTL: time.Minute})
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), errNotReplicated.Error()) {
			t.Fatalf("unreplicated grant %d = %v; want errNotReplicated (store.ErrUnavailable)", i, err)
		}
		if ok, _, err := storetest.ReleaseLock(ctx, s, name, tok); err != nil || !ok {
			t.Fatalf("ReleaseLock of the uncertain grant %d = %v, %v; want released", i, ok, err)
		}
	}
	if n := s.BreakersOpen(); n != 0 {
		t.Errorf("BreakersOpen = %d after replica shortfalls; want 0 (the master answered)", n)
	}
	lim := store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Minute}
	if d, err := s.Allow(ctx, "ns:k", lim, 1, false); err != nil || !d.Allowed {
		t.Errorf("Allow after replica shortfalls = %+v, %v; want allowed", d, err)
	}
}

// TestRegressionBreakerChargesTheFailingNode (review #8): a failure is
// charged to the breaker of the node that failed to answer, not to that of
// the operation's main key.
//
// Forced input: a private Cluster of 3 masters; session S on master A, its
// lock L on master B; B paused (CLIENT PAUSE: it answers nobody but stays in
// the cluster). Each keepalive of S fails, on B. The old code charged those
// failures to A's breaker (S's key), which opened and then refused Allow on A,
// a healthy node. Now B's breaker opens, and A keeps serving.
func TestRegressionBreakerChargesTheFailingNode(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	defer rgCloseAdmins()
	s := openStore(t, Config{Addrs: c.Addrs(), Timeout: 300 * time.Millisecond, BreakerFailures: 2, BreakerCooldown: time.Minute})
	ctx := context.Background()
	lim := store.Limit{Algorithm: store.FixedWindow, Limit: 100, Period: time.Minute}

	sid := "ns:" + token.New()
	a := c.MasterFor(s.keys.session(sid)[0]).Addr()
	var lockName, limitKey string
	for i := 0; lockName == "" || limitKey == ""; i++ {
		n := "ns:" + strconv.Itoa(i)
		if lockName == "" && c.MasterFor(s.keys.hold(store.HoldLock, n)[0]).Addr() != a {
			lockName = n
		}
		if limitKey == "" && c.MasterFor(s.keys.limit(n, lim)[0]).Addr() == a {
			limitKey = n
		}
	}
	b := c.MasterFor(s.keys.hold(store.HoldLock, lockName)[0]).Addr()
	if _, err := s.CreateSession(ctx, sid, time.Minute, 0, 0); err != nil {
		t.Fatal(err)
	}
	if g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: lockName, Token: token.New(), Owner: "a", SessionID: sid}); err != nil || !g.Acquired {
		t.Fatalf("AcquireLock = %+v, %v", g, err)
	}

	rgHoldsDue(t, s, sid) // the keepalives renew the lock: they go to its master
	if err := rgAdmin(b).Do(ctx, "client", "pause", 2000, "all").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE on %s: %v", b, err)
	}
	paused := time.Now()
	for i := range 3 {
		if _, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("keepalive %d with the lock's master paused = %v; want store.ErrUnavailable", i, err)
		}
	}
	if d, err := s.Allow(ctx, limitKey, lim, 1, false); err != nil || !d.Allowed {
		t.Errorf("Allow on the session's healthy master %s = %+v, %v; want allowed (failures were on %s)", a, d, err, b)
	}
	if n := s.BreakersOpen(); n != 1 {
		t.Errorf("BreakersOpen = %d; want 1 (%s's)", n, b)
	}
	time.Sleep(time.Until(paused.Add(2 * time.Second))) // let B's pause end before the cluster goes
}

// TestRegressionCloseSessionCanBeFinished (review #7): a CloseSession that
// failed after it had begun can be finished by calling it again.
//
// Forced input: the pipeline that releases the session's locks fails, unsent
// (a hook fails it as a broken connection would). The old code had deleted the
// session before that pipeline: the retry answered ErrSessionNotFound and the
// locks stayed held until their deadline. Now the session is only marked
// closing (no keepalive, no new lock), and the retry releases the locks,
// reports them and deletes it.
func TestRegressionCloseSessionCanBeFinished(t *testing.T) {
	clk := clock.NewFake(rgT0)
	s, _, h := rgStandalone(t, redistest.Standalone(t), clk, Config{})
	ctx := context.Background()
	sid := rgSession(t, s, time.Minute, 0)
	names := []string{"ns:L1", "ns:L2"}
	for _, n := range names {
		if g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "a", SessionID: sid}); err != nil || !g.Acquired {
			t.Fatalf("AcquireLock(%s) = %+v, %v", n, g, err)
		}
	}
	rgSet(h, h.failPipe, holdSession, error(errors.New("injected: connection reset by peer")))
	if released, err := s.CloseSession(ctx, store.SessionRef{ID: sid}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("CloseSession with its release pipeline failing = %v, %v; want store.ErrUnavailable", released, err)
	}
	// Half closed: the locks are still held, the session takes nothing new.
	for _, n := range names {
		if info, err := s.GetHolds(ctx, store.HoldLock, n); err != nil || !info.Held {
			t.Fatalf("GetLock(%s) after the failed close = %+v, %v; want held (the release never ran)", n, info, err)
		}
	}
	if _, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L3", Token: token.New(), Owner: "a", SessionID: sid}); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("AcquireLock for a closing session = %v; want store.ErrSessionNotFound", err)
	}

	released, err := storetest.ReleasedNames(s.CloseSession(ctx, store.SessionRef{ID: sid}))
	slices.Sort(released)
	if err != nil || !slices.Equal(released, names) {
		t.Fatalf("CloseSession retried = %v, %v; want %v released", released, err, names)
	}
	for _, n := range names {
		if info, err := s.GetHolds(ctx, store.HoldLock, n); err != nil || info.Held {
			t.Errorf("GetLock(%s) after the retried close = %+v, %v; want not held", n, info, err)
		}
	}
	if _, err := s.CloseSession(ctx, store.SessionRef{ID: sid}); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("CloseSession a third time = %v; want store.ErrSessionNotFound", err)
	}
}

// TestRegressionHalfClosedSessionIsFinished (soak): a close cut short and
// never retried is finished by the session's next keepalive or check.
//
// Forced input: as above, the release pipeline fails after "begin"; then,
// instead of a retried close, a KeepAliveSession (a client resuming its
// stream) and a CheckSession. The old code answered both with
// ErrSessionNotFound and left the session closing: its locks stayed held, and
// their waiters waited, until the session's deadline.
func TestRegressionHalfClosedSessionIsFinished(t *testing.T) {
	for _, op := range []string{"KeepAliveSession", "CheckSession"} {
		t.Run(op, func(t *testing.T) {
			clk := clock.NewFake(rgT0)
			s, _, h := rgStandalone(t, redistest.Standalone(t), clk, Config{})
			ctx := context.Background()
			sid := rgSession(t, s, time.Minute, 0)
			if g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L1", Token: token.New(), Owner: "a", SessionID: sid}); err != nil || !g.Acquired {
				t.Fatalf("AcquireLock = %+v, %v", g, err)
			}
			rgSet(h, h.failPipe, holdSession, error(errors.New("injected: connection reset by peer")))
			if _, err := s.CloseSession(ctx, store.SessionRef{ID: sid}); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("CloseSession with its release pipeline failing = %v; want store.ErrUnavailable", err)
			}
			var err error
			if op == "KeepAliveSession" {
				_, err = s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0)
			} else {
				_, err = s.CheckSession(ctx, store.SessionRef{ID: sid})
			}
			if !errors.Is(err, store.ErrSessionNotFound) {
				t.Fatalf("%s of a half-closed session = %v; want store.ErrSessionNotFound", op, err)
			}
			if info, err := s.GetHolds(ctx, store.HoldLock, "ns:L1"); err != nil || info.Held {
				t.Errorf("GetLock after %s = %+v, %v; want not held (the close finished)", op, info, err)
			}
			if _, err := s.CloseSession(ctx, store.SessionRef{ID: sid}); !errors.Is(err, store.ErrSessionNotFound) {
				t.Errorf("CloseSession after %s = %v; want store.ErrSessionNotFound (already finished)", op, err)
			}
		})
	}
}

// TestRegressionKeepAliveIgnoresIndexFailure (review #9): the namespace
// index that enforces the session cap is bookkeeping; its failure must not
// fail a keepalive, and sessions created without a cap are not indexed.
//
// Forced input: the index key of a capped session's namespace replaced by a
// string, so that the keepalive pipeline's ZADD answers WRONGTYPE. The old
// code failed the keepalive with it (and indexed every session, cap or not).
func TestRegressionKeepAliveIgnoresIndexFailure(t *testing.T) {
	s, c, _ := rgStandalone(t, redistest.Standalone(t), nil, Config{})
	ctx := context.Background()

	free := "free" + strings.ToLower(token.New()[:8])
	if _, err := s.CreateSession(ctx, free+":"+token.New(), time.Minute, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, s.keys.sessionIndex(free)).Result(); err != nil || n != 0 {
		t.Errorf("index of a namespace without a cap exists = %d, %v; want none", n, err)
	}

	ns := "capped" + strings.ToLower(token.New()[:8])
	sid := ns + ":" + token.New()
	if _, err := s.CreateSession(ctx, sid, time.Minute, 5, 0); err != nil {
		t.Fatal(err)
	}
	if g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: ns + ":L", Token: token.New(), Owner: "a", SessionID: sid}); err != nil || !g.Acquired {
		t.Fatalf("AcquireLock = %+v, %v", g, err)
	}
	if err := c.Set(ctx, s.keys.sessionIndex(ns), "not a sorted set", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if st, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0); err != nil || len(st.Lost) != 0 {
		t.Errorf("KeepAliveSession with its index broken = %+v, %v; want renewed, nothing lost", st, err)
	}
}

// TestRegressionPipelineRerunsOnlyNoscript (review #13): when some calls of
// a pipeline meet NOSCRIPT, only those run again, and scripts are loaded on
// replicas too.
//
// Forced input: a private Cluster of 3 masters with a replica each; a session
// with 12 locks spread over the masters; SCRIPT FLUSH on one master that
// serves some of them; then CloseSession, whose "drop" pipeline meets
// NOSCRIPT on that master only. The old code ran the whole pipeline again:
// the drops that had run answered 0 the second time, and CloseSession left
// those locks out of the names it released. It also loaded the scripts on
// masters only, so a promoted replica met NOSCRIPT first thing.
func TestRegressionPipelineRerunsOnlyNoscript(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	defer rgCloseAdmins()
	rgReplicasListed(t, c)
	ctx := context.Background()
	s := openStore(t, Config{Addrs: c.Addrs(), Timeout: 2 * time.Second})

	// New loads the scripts on every node CLUSTER SLOTS lists.
	hashes := make([]string, len(allScripts))
	for i, sc := range allScripts {
		hashes[i] = sc.Hash()
	}
	for _, r := range c.Replicas() {
		have, err := rgAdmin(r.Addr()).ScriptExists(ctx, hashes...).Result()
		if err != nil || slices.Contains(have, false) {
			t.Errorf("replica %s has the scripts: %v, %v; want all (a failover promotes it)", r.Addr(), have, err)
		}
	}

	sid := "ns:" + token.New()
	if _, err := s.CreateSession(ctx, sid, time.Minute, 0, 0); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 12 {
		n := fmt.Sprintf("ns:l%d", i)
		if g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: n, Token: token.New(), Owner: "a", SessionID: sid}); err != nil || !g.Acquired {
			t.Fatalf("AcquireLock(%s) = %+v, %v", n, g, err)
		}
		names = append(names, n)
	}
	victim := c.MasterFor(s.keys.hold(store.HoldLock, names[0])[0]).Addr()
	others := 0
	for _, n := range names {
		if c.MasterFor(s.keys.hold(store.HoldLock, n)[0]).Addr() != victim {
			others++
		}
	}
	if others == 0 {
		t.Fatal("every lock is on one master; the test needs them spread")
	}
	if err := rgAdmin(victim).ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	released, err := storetest.ReleasedNames(s.CloseSession(ctx, store.SessionRef{ID: sid}))
	slices.Sort(released)
	slices.Sort(names)
	if err != nil || !slices.Equal(released, names) {
		t.Errorf("CloseSession with %s's scripts flushed = %v, %v; want all %d released", victim, released, err, len(names))
	}
	for _, n := range names {
		if info, err := s.GetHolds(ctx, store.HoldLock, n); err != nil || info.Held {
			t.Errorf("GetLock(%s) after CloseSession = %+v, %v; want not held", n, info, err)
		}
	}
}

// rgReplicasListed writes to every master and waits until every node's
// CLUSTER SLOTS lists every master's replica: Redis 7.0 leaves out a replica
// whose replication offset it has not yet learnt to be non-zero, as in a new
// cluster that has seen no write, and go-redis knows only the nodes it lists.
// A ClusterClient made after it returns knows every replica.
func rgReplicasListed(t *testing.T, c *redistest.ClusterProc) {
	t.Helper()
	ctx := context.Background()
	cc := goredis.NewClusterClient(redistest.ClusterOptions(c.Addrs()))
	defer cc.Close()
	for i := range 64 {
		if err := cc.Set(ctx, "rg:warm:"+strconv.Itoa(i), "x", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, addr := range c.Addrs() {
		for {
			//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's cluster client reads its topology from.
			slots, err := rgAdmin(addr).ClusterSlots(ctx).Result()
			listed := err == nil && len(slots) > 0
			for _, sl := range slots {
				listed = listed && len(sl.Nodes) >= 2
			}
			if listed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CLUSTER SLOTS on %s does not list every replica: %+v, %v", addr, slots, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestRegressionSessionEntryIsReplicated (review #12a): with WaitReplicas,
// the step that binds a lock to its session (session_add_hold) waits for the
// replicas too; if they do not acknowledge it, the acquire is uncertain, and
// the caller's release by token leaves nothing held and nothing in the
// session's set.
//
// Forced input: a private master with one private replica; WaitReplicas 1.
// Between the grant (step 2, acknowledged by the replica) and the binding
// (step 3) a hook detaches the replica (REPLICAOF NO ONE). The old code ran
// step 3 without WAIT and reported the lock acquired although a failover
// could lose its session entry. Then, with no replica at all, a session-bound
// acquire is uncertain at its grant, and its release cleans up.
func TestRegressionSessionEntryIsReplicated(t *testing.T) {
	master, replica := redistest.StartStandalone(t), redistest.StartStandalone(t)
	defer rgCloseAdmins()
	ctx := context.Background()
	mport := master.Addr()[strings.LastIndex(master.Addr(), ":")+1:]
	if err := rgAdmin(replica.Addr()).Do(ctx, "replicaof", "127.0.0.1", mport).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// WAIT counts a replica once its master sees it online (after its
		// first REPLCONF ACK), which is a little after its link is up.
		info, _ := rgAdmin(master.Addr()).Info(ctx, "replication").Result()
		if strings.Contains(info, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not sync: %s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And until a write is acknowledged, so that the control acquire below
	// cannot fail for a replica still settling in.
	for {
		pipe := rgAdmin(master.Addr()).Pipeline()
		pipe.Set(ctx, "rg:warm", "x", time.Minute)
		acked := pipe.Do(ctx, "wait", 1, 500)
		_, _ = pipe.Exec(ctx)
		if n, err := acked.Int(); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica does not acknowledge writes")
		}
	}
	s, c, h := rgStandalone(t, master.Addr(), nil, Config{WaitReplicas: 1, WaitTimeout: 500 * time.Millisecond})
	sid := rgSession(t, s, time.Minute, 0)
	locks := func() int64 {
		n, err := c.HLen(ctx, s.keys.session(sid)[1]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// With the replica attached, a session-bound acquire is certain.
	tok := token.New()
	if g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "ns:L0", Token: tok, Owner: "a", SessionID: sid}); err != nil || !g.Acquired {
		t.Fatalf("AcquireLock with the replica attached = %+v, %v; want acquired", g, err)
	}
	if ok, _, err := storetest.ReleaseLock(ctx, s, "ns:L0", tok); err != nil || !ok {
		t.Fatalf("ReleaseLock = %v, %v", ok, err)
	}

	// Step 3 is a pipeline with WAIT now, a plain EVALSHA in the old code:
	// detach the replica before whichever comes first.
	var detach sync.Once
	detached := false
	detachReplica := func() {
		detach.Do(func() { detached = rgAdmin(replica.Addr()).Do(ctx, "replicaof", "no", "one").Err() == nil })
	}
	rgSet(h, h.pipeline, sessionAddHold, detachReplica)
	rgSet(h, h.before, sessionAddHold, detachReplica)
	for i, name := range []string{"ns:L1", "ns:L2"} { // L1: replica lost at step 3; L2: no replica at all
		tok := token.New()
		g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: "a", SessionID: sid})
		if i == 0 && !detached {
			t.Fatal("the replica was not detached before step 3")
		}
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), errNotReplicated.Error()) {
			t.Fatalf("AcquireLock(%s) unacknowledged by replicas = %+v, %v; want errNotReplicated (store.ErrUnavailable)", name, g, err)
		}
		// The caller releases what the uncertain call may have granted.
		if ok, _, err := storetest.ReleaseLock(ctx, s, name, tok); err != nil || !ok {
			t.Errorf("ReleaseLock(%s) by the uncertain call's token = %v, %v; want released", name, ok, err)
		}
		if info, err := s.GetHolds(ctx, store.HoldLock, name); err != nil || info.Held {
			t.Errorf("GetLock(%s) after the release = %+v, %v; want not held", name, info, err)
		}
		if n := locks(); n != 0 {
			t.Errorf("session's set has %d entries after %s's release; want 0", n, name)
		}
	}
	if st, err := s.CheckSession(ctx, store.SessionRef{ID: sid}); err != nil || len(st.Lost) != 0 {
		t.Errorf("CheckSession = %+v, %v; want nothing lost", st, err)
	}
}

// TestRegressionSubscribeAfterClose: Subscribe on a closed Store is an
// error (the old code handed out a live subscription on the closed store and
// left its goroutine running), and
// a wait on it falls back to re-checking (review #11, partly fixed: the
// waiter polls every PollWithoutWakeups when it cannot subscribe, instead of
// failing).
func TestRegressionSubscribeAfterClose(t *testing.T) {
	s, _, _ := rgStandalone(t, redistest.Standalone(t), nil, Config{})
	ctx := context.Background()
	early, err := s.Subscribe(ctx, store.ElectionTopic("ns:early"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	early.Close() // a waiter leaving after the store closed

	var sub *store.Subscription
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Subscribe after Close panicked: %v", p)
			}
		}()
		sub, err = s.Subscribe(ctx, store.ElectionTopic("ns:L"))
	}()
	if !errors.Is(err, store.ErrUnavailable) || sub != nil {
		if sub != nil {
			sub.Close()
		}
		t.Fatalf("Subscribe after Close = %v, %v; want store.ErrUnavailable", sub, err)
	}

	tries := 0
	start := time.Now()
	err = waiter.Wait(ctx, s, store.ElectionTopic("ns:L"), 10*time.Second, nil, func(context.Context) (bool, time.Duration, error) {
		tries++
		return tries == 2, 0, nil
	})
	if took := time.Since(start); err != nil || tries != 2 || took > waiter.PollWithoutWakeups+2*time.Second {
		t.Errorf("waiter.Wait without wake-ups = %v after %d tries in %v; want done on the second, about %v later", err, tries, took, waiter.PollWithoutWakeups)
	}
}

// TestSessionIndexExpiresWithItsSessions: a namespace's session index (kept
// for session.max_per_namespace) lives as long as its latest session's
// score (its deadline, plus up to 3 ttl once a refresh touched it), so the
// index of a namespace that went idle does not stay in Redis forever.
// (Before, the index had no TTL.)
func TestSessionIndexExpiresWithItsSessions(t *testing.T) {
	s, c, _ := rgStandalone(t, redistest.Standalone(t), nil, Config{})
	ctx := context.Background()
	ns := "idle" + strings.ToLower(token.New()[:8])
	sid := ns + ":" + token.New()
	if _, err := s.CreateSession(ctx, sid, 10*time.Second, 5, 0); err != nil {
		t.Fatal(err)
	}
	idx := s.keys.sessionIndex(ns)
	if ttl, err := c.PTTL(ctx, idx).Result(); err != nil || ttl <= 0 || ttl > 11*time.Second {
		t.Fatalf("the index's TTL after admitting a 10s session = %v, %v; want at most its deadline", ttl, err)
	}
	if _, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.PTTL(ctx, idx).Result(); err != nil || ttl <= 3*time.Minute || ttl > 4*time.Minute+time.Second {
		t.Fatalf("the index's TTL after renewing the session to 1m = %v, %v; want about 4m (1m and 3 ttl)", ttl, err)
	}
}

// TestSessionIndexTouchedRarely: a session's heartbeats go to its
// namespace's index (one hot key for the whole namespace) about once in
// six, and its score there never falls below its deadline, so that an
// admission never takes it for ended while it lives.
func TestSessionIndexTouchedRarely(t *testing.T) {
	clk := clock.NewFake(rgT0)
	s, c, _ := rgStandalone(t, redistest.Standalone(t), clk, Config{})
	ctx := context.Background()
	ns := "touch" + strings.ToLower(token.New()[:8])
	sid := ns + ":" + token.New()
	const ttl = 9 * time.Second
	if _, err := s.CreateSession(ctx, sid, ttl, 5, 0); err != nil {
		t.Fatal(err)
	}
	idx := s.keys.sessionIndex(ns)
	touches, last := 0, c.ZScore(ctx, idx, sid).Val()
	const beats = 30
	for range beats {
		clk.Advance(ttl / 3)
		st, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0)
		if err != nil {
			t.Fatal(err)
		}
		score := c.ZScore(ctx, idx, sid).Val()
		if score != last {
			touches++
			last = score
		}
		if dl := float64(st.ExpireTime.UnixMicro()); score < dl {
			t.Fatalf("index score %v below the session's deadline %v", score, dl)
		}
	}
	if touches < beats/7 || touches > beats/5+1 {
		t.Errorf("%d heartbeats touched the index %d times; want about one in six", beats, touches)
	}
}

// TestHeartbeatsRarelyMoveTTLs: a session's keys and its lock's keep a TTL
// past what they need (the session's deadline plus its grace; the hold's
// deadline plus its lock-delay, none here) after every heartbeat, while most
// heartbeats set no TTL at all (their needs, rounded up to prelude.lua's
// expiryStep, stay within a step). Each key's absolute expiry
// (PEXPIRETIME) is turned back into the simulated clock's time through the
// offset of the call that last changed it.
func TestHeartbeatsRarelyMoveTTLs(t *testing.T) {
	clk := clock.NewFake(time.Now())
	addr := redistest.StartStandalone(t).Addr()
	s, c, _ := rgStandalone(t, addr, clk, Config{})
	ctx := context.Background()
	const ttl = 9 * time.Second
	sid := "ttl:" + token.New()
	if _, err := s.CreateSession(ctx, sid, ttl, 0, 0); err != nil {
		t.Fatal(err)
	}
	g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: "n", Token: token.New(), Owner: "o", SessionID: sid})
	if err != nil || !g.Acquired {
		t.Fatalf("AcquireLock = %+v, %v", g, err)
	}
	sessionKeys := s.keys.session(sid)
	hk := s.keys.hold(store.HoldLock, "n")
	holdKeys := []string{hk[0], hk[1], hk[2], hk[7]} // holders, by deadline, by session, meta
	slack := time.Hour.Milliseconds() + 1            // timeArgs' slack, and prelude.lua's millisecond
	expiry := map[string]int64{}                     // PEXPIRETIME last seen
	setAt := map[string]time.Duration{}              // simulated minus real time when it was set
	check := func(beat int, dl time.Time) {
		t.Helper()
		offset := time.Until(clk.Now())
		for _, k := range append(append([]string{}, sessionKeys[:2]...), holdKeys...) {
			ms, err := c.PExpireTime(ctx, k).Result()
			if err != nil || ms <= 0 {
				t.Fatalf("beat %d: PEXPIRETIME %s = %v, %v", beat, k, ms, err)
			}
			if ms.Milliseconds() != expiry[k] {
				expiry[k], setAt[k] = ms.Milliseconds(), offset
			}
			until := time.UnixMilli(expiry[k] - slack).Add(setAt[k])
			need := dl.Add(store.SessionGrace)
			if slices.Contains(holdKeys, k) {
				need = dl
			}
			if until.Before(need.Add(-time.Second)) { // a second for the offsets' own error
				t.Fatalf("beat %d: %s lasts until %v, %v short of what it needs", beat, k, until, need.Sub(until))
			}
		}
	}
	check(0, g.ExpireTime)
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const beats = 30
	for i := range beats {
		clk.Advance(ttl / 3)
		st, err := s.KeepAliveSession(ctx, store.SessionRef{ID: sid}, 0)
		if err != nil || st.Expired || len(st.Lost) > 0 {
			t.Fatalf("beat %d: KeepAliveSession = %+v, %v", i+1, st, err)
		}
		check(i+1, st.ExpireTime)
	}
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	if m := regexp.MustCompile(`cmdstat_pexpire:calls=(\d+)`).FindStringSubmatch(stats); m != nil {
		calls, _ = strconv.Atoi(m[1])
	}
	// 30 beats of 3 s cross a 30 s step 3 times: 3 session keys and 3 hold
	// keys then (6 a crossing; once per key per beat would be 180).
	if calls == 0 || calls > 4*6 {
		t.Errorf("%d heartbeats ran PEXPIRE %d times; want a few crossings of a step (at most %d)", beats, calls, 4*6)
	}
}
