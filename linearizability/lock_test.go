package linearizability

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/redlock"
	"github.com/coordd/coordd/internal/store/storetest"
)

// TestMemory: histories on the embedded memory store are linearizable.
func TestMemory(t *testing.T) {
	h := record(t, serve(t, memoryStore()), defaultWorkload(3*time.Second).covering(10*time.Second))
	checkRecorded(t, h, porcupine.Ok)
}

// TestRedisCluster: histories on the shared Redis Cluster are linearizable.
func TestRedisCluster(t *testing.T) {
	h := record(t, serve(t, clusterStore(t)), defaultWorkload(3*time.Second).covering(10*time.Second))
	checkRecorded(t, h, porcupine.Ok)
}

// TestUnknownOutcomes: with store calls failing at random (before or after
// they reach the store) the answers are UNAVAILABLE, of unknown outcome, and
// the history is still linearizable when those calls may or may not have
// taken effect. This tests the model's handling of unknown outcomes as much
// as the server. On four names, not two: a partition with an unknown
// outcome gets no search hints, and the search grows with the calls in
// flight on one name (on two names a check took up to 5 s in 20 runs).
func TestUnknownOutcomes(t *testing.T) {
	w := defaultWorkload(2 * time.Second).covering(8 * time.Second).synchronous()
	w.names = []string{"lin-a", "lin-b", "lin-c", "lin-d"}
	h := record(t, faultyServer(t), w)
	if h.unknown == 0 {
		t.Fatal("no call had an unknown outcome: the faults did not bite")
	}
	checkRecorded(t, h, porcupine.Ok)
}

// TestOrphansAgree: the model judges a history with orphan Locks
// (state.Orphan) as it judges the same history with their clean-ups as
// operations of their own (unfold), on a history with orphans small enough
// for the latter: not synchronous, so that every call of unknown outcome
// never returns.
func TestOrphansAgree(t *testing.T) {
	w := defaultWorkload(500 * time.Millisecond)
	w.clients = 4
	h := record(t, faultyServer(t), w)
	t.Logf("history: %v", h)
	orphans := 0
	for _, op := range h.ops {
		if op.Input.(input).Orphan {
			orphans++
		}
	}
	if orphans == 0 {
		t.Fatal("no orphan Lock: the faults did not bite")
	}
	t.Logf("%d orphan Locks", orphans)
	check(t, "orphans", model(variant{}), h.ops, porcupine.Ok)
	check(t, "unfolded", model(variant{}), unfold(h.ops), porcupine.Ok)
}

// faultyServer serves the memory store behind storetest.Faulty, which fails
// one store call every 5 ms until the test ends, before or after the store
// applies it: the server's answers are then UNAVAILABLE, of unknown
// outcome.
func faultyServer(t *testing.T) coordv1.LockServiceClient {
	f := storetest.NewFaulty(memoryStore())
	locks := serve(t, f)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		methods := []string{"AcquireHold", "ReleaseHold", "RenewHold", "GetHolds", "LeaveQueue"}
		rng := rand.New(rand.NewPCG(1, 2))
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			// One failure of one method, before or after the store applies it.
			f.Set(methods[rng.IntN(len(methods))], storetest.Fault{Fail: rng.IntN(2) == 0, FailAfter: rng.IntN(2) == 0, Times: 1})
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	return locks
}

// TestBrokenReleaseIsCaught: a server whose Release frees the lock and
// answers released=true whatever the token (as would a release script that
// forgot to compare tokens) is not linearizable, and the checker says so.
func TestBrokenReleaseIsCaught(t *testing.T) {
	h := record(t, serve(t, &tokenBlindRelease{Store: memoryStore(), tokens: map[string]string{}}), defaultWorkload(time.Second))
	checkRecorded(t, h, porcupine.Illegal)
}

// tokenBlindRelease is a broken store: its ReleaseHold releases the lock
// of the latest grant (or hand-off), whatever token it is given, and says
// it did.
type tokenBlindRelease struct {
	store.Store
	mu     sync.Mutex
	tokens map[string]string // name → the token of its latest grant
}

func (s *tokenBlindRelease) latest(name, tok string) {
	s.mu.Lock()
	s.tokens[name] = tok
	s.mu.Unlock()
}

func (s *tokenBlindRelease) AcquireHold(ctx context.Context, req store.HoldRequest) (store.Grant, error) {
	g, err := s.Store.AcquireHold(ctx, req)
	if err == nil && g.Acquired {
		s.latest(req.Name, req.Token)
	}
	return g, err
}

func (s *tokenBlindRelease) ReleaseHold(ctx context.Context, kind store.HoldKind, name, _, instance string) (store.Released, error) {
	s.mu.Lock()
	tok := s.tokens[name]
	s.mu.Unlock()
	rel, err := s.Store.ReleaseHold(ctx, kind, name, tok, instance)
	for _, h := range rel.Handoffs {
		s.latest(name, h.Token)
	}
	rel.Released = err == nil
	return rel, err
}

func (s *tokenBlindRelease) LeaveQueue(ctx context.Context, kind store.HoldKind, name, ticket, token, instance string) ([]store.Handoff, error) {
	hs, err := s.Store.LeaveQueue(ctx, kind, name, ticket, token, instance)
	for _, h := range hs {
		s.latest(name, h.Token)
	}
	return hs, err
}

// TestStaleGetLockIsCaught: a server whose GetLock may answer what it
// answered up to staleFor before (as would one reading a lagging replica) is
// not linearizable, and the checker says so: each answer is right for some
// moment, so only real time, not the order of operations, shows the fault.
// staleFor is long next to a call (even on a loaded machine) so that the
// first stale answers already give the fault away: proving a history
// illegal means searching all of it up to the first contradiction, which
// with 16 clients always in flight is costly if that comes late.
func TestStaleGetLockIsCaught(t *testing.T) {
	st := &staleGetLock{Store: memoryStore(), cache: map[string]staleInfo{}}
	h := record(t, serve(t, st), defaultWorkload(time.Second))
	checkRecorded(t, h, porcupine.Illegal)
}

const staleFor = 300 * time.Millisecond

// staleGetLock is a broken store: its GetLock answers from a cache of the
// answers of the last staleFor.
type staleGetLock struct {
	store.Store
	mu    sync.Mutex
	cache map[string]staleInfo
}

type staleInfo struct {
	info store.HoldInfo
	at   time.Time
}

func (s *staleGetLock) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	s.mu.Lock()
	c, ok := s.cache[name]
	s.mu.Unlock()
	if ok && time.Since(c.at) < staleFor {
		return c.info, nil
	}
	info, err := s.Store.GetHolds(ctx, kind, name)
	if err == nil {
		s.mu.Lock()
		s.cache[name] = staleInfo{info, time.Now()}
		s.mu.Unlock()
	}
	return info, err
}

// TestWrongModelIsCaught: a model that frees the lock on any Release (not
// only the holder's) rejects a correct history recorded on the memory store,
// which the right model accepts. Both check the plain history, without
// hints.
func TestWrongModelIsCaught(t *testing.T) {
	h := record(t, serve(t, memoryStore()), defaultWorkload(time.Second).covering(4*time.Second))
	t.Logf("history: %v", h)
	check(t, "plain", model(variant{}), h.ops, porcupine.Ok)
	check(t, "wrong model", model(variant{releaseFreesAlways: true}), h.ops, porcupine.Illegal)
}

// TestHintsAgree: the model with search hints and the plain model agree on a
// recorded history (see hints_test.go).
func TestHintsAgree(t *testing.T) {
	h := record(t, serve(t, memoryStore()), defaultWorkload(time.Second))
	t.Logf("history: %v", h)
	hinted := withHints(h.ops)
	n := 0
	for _, op := range hinted {
		if op.Input.(input).Hint != (hint{}) {
			n++
		}
	}
	t.Logf("%d of %d operations have a hint", n, len(hinted))
	if n == 0 {
		t.Error("no operation has a hint")
	}
	check(t, "hinted", model(variant{}), hinted, porcupine.Ok)
	check(t, "plain", model(variant{}), h.ops, porcupine.Ok)
}

// checkRecorded checks a recorded history against the model, with search
// hints, wanting want, after checking that the workload did what it is for.
// An Illegal is confirmed without the hints.
func checkRecorded(t *testing.T, h history, want porcupine.CheckResult) {
	t.Helper()
	t.Logf("history: %v", h)
	if len(h.errs) > 0 {
		t.Logf("first errors: %q", h.errs)
	}
	for _, k := range outcomes {
		if h.counts[k] == 0 && want == porcupine.Ok {
			t.Errorf("the workload had no %s outcome", k)
		}
	}
	check(t, "hinted", model(variant{}), withHints(h.ops), want)
	if want == porcupine.Illegal {
		check(t, "plain", model(variant{}), h.ops, want)
	}
}

// redlockStore returns a Redlock store (redis.mode redlock) on 5 private
// standalone masters; tune adjusts its configuration.
func redlockStore(t testing.TB, tune func(*redlock.Config)) store.Store {
	t.Helper()
	var addrs []string
	for range 5 {
		addrs = append(addrs, redistest.StartStandalone(t).Addr())
	}
	cfg := redlock.Config{Addrs: addrs, Timeout: 5 * time.Second, DialTimeout: time.Second, Prefix: "lin", Drift: 2 * time.Millisecond,
		RestartDelay: time.Minute, FenceTTL: time.Hour}
	if tune != nil {
		tune(&cfg)
	}
	st, err := redlock.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRedlock: lock histories in Redlock mode, over 5 independent
// masters, are linearizable, by the hinted model and the plain one. (With
// the fence written in a second round after every grant, the hinted model
// refused histories the plain one accepted, 3 runs of 3, for a cause not
// found; with the fence taken in the grant's own round, 14 runs of 14
// agreed.)
func TestRedlock(t *testing.T) {
	h := record(t, serve(t, redlockStore(t, nil)), defaultWorkload(3*time.Second).covering(10*time.Second))
	checkRecorded(t, h, porcupine.Ok)
	check(t, "plain", model(variant{}), h.ops, porcupine.Ok)
}

// TestRedlockOnHalfIsCaught: a Redlock that grants on N/2 masters (2 of
// 5) instead of a majority hands a name to two clients at once, and the
// checker says so.
func TestRedlockOnHalfIsCaught(t *testing.T) {
	// A second of it: two holders at once come within it, and the plain
	// model's search of a longer broken history ran past its 10 s.
	h := record(t, serve(t, redlockStore(t, func(c *redlock.Config) { c.Quorum = 2 })), defaultWorkload(time.Second))
	checkRecorded(t, h, porcupine.Illegal)
}
