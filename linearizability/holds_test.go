package linearizability

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/internal/store"
)

// The holds of shared locks and semaphores, recorded on each backend
// through store.Holds: 12 clients on three names for a couple of seconds,
// a third of their requests waiting in the queue.

func TestSharedLocksMemory(t *testing.T) {
	testHolds(t, memoryStore(), sharedWorkload(2*time.Second).covering(8*time.Second))
}

func TestSharedLocksRedis(t *testing.T) {
	testHolds(t, standaloneStore(t), sharedWorkload(2*time.Second).covering(8*time.Second))
}

func TestSharedLocksRedisCluster(t *testing.T) {
	testHolds(t, clusterStore(t), sharedWorkload(2*time.Second).covering(8*time.Second))
}

func TestSemaphoreMemory(t *testing.T) {
	testHolds(t, memoryStore(), semaphoreWorkload(2*time.Second).covering(8*time.Second))
}

func TestSemaphoreRedis(t *testing.T) {
	testHolds(t, standaloneStore(t), semaphoreWorkload(2*time.Second).covering(8*time.Second))
}

func TestSemaphoreRedisCluster(t *testing.T) {
	testHolds(t, clusterStore(t), semaphoreWorkload(2*time.Second).covering(8*time.Second))
}

func testHolds(t *testing.T, st store.Store, w holdsWorkload) {
	t.Cleanup(func() { _ = st.Close() })
	checkHolds(t, w, recordHolds(t, st, st, w), porcupine.Ok)
}

// TestSharedBesideExclusiveIsCaught: a store that takes some exclusive
// requests for shared ones (as would an eligibility check that looks only
// for exclusive holders), and hides it from GetHolds, grants shared holds
// beside an exclusive holder and exclusive ones beside shared holders; the
// checker says the history is not linearizable.
func TestSharedBesideExclusiveIsCaught(t *testing.T) {
	st := memoryStore()
	t.Cleanup(func() { _ = st.Close() })
	w := sharedWorkload(time.Second)
	checkHolds(t, w, recordHolds(t, &exclusiveAsShared{Holds: st, fences: map[string]map[uint64]bool{}}, st, w), porcupine.Illegal)
}

// exclusiveAsShared is a broken store: one exclusive lock request in four
// (by its token, so that every try of a waiting request is the same) is
// passed on as a shared one; GetHolds reports those holders as exclusive.
type exclusiveAsShared struct {
	store.Holds
	mu     sync.Mutex
	fences map[string]map[uint64]bool // name → fences of the downgraded grants
}

func (s *exclusiveAsShared) AcquireHold(ctx context.Context, req store.HoldRequest) (store.Grant, error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(req.Token))
	downgraded := req.Kind == store.HoldLock && !req.Shared && h.Sum32()%4 == 0
	if downgraded {
		req.Shared = true
	}
	g, err := s.Holds.AcquireHold(ctx, req)
	if err == nil && g.Acquired && downgraded {
		s.mu.Lock()
		if s.fences[req.Name] == nil {
			s.fences[req.Name] = map[uint64]bool{}
		}
		s.fences[req.Name][g.Fence] = true
		s.mu.Unlock()
	}
	return g, err
}

func (s *exclusiveAsShared) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	info, err := s.Holds.GetHolds(ctx, kind, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range info.Holders {
		if s.fences[name][x.Fence] {
			info.Holders[i].Shared = false
		}
	}
	return info, err
}

// TestSemaphoreOverLimitIsCaught: a store that lets Limit+1 holders in
// (an off-by-one in the limit check), and answers the limit asked for, is
// not linearizable, and the checker says so.
func TestSemaphoreOverLimitIsCaught(t *testing.T) {
	st := memoryStore()
	t.Cleanup(func() { _ = st.Close() })
	w := semaphoreWorkload(time.Second)
	checkHolds(t, w, recordHolds(t, overLimit{st}, st, w), porcupine.Illegal)
}

// overLimit is a broken store: a semaphore request's limit is raised by
// one on the way in, and lowered back in every answer.
type overLimit struct{ store.Holds }

func (s overLimit) AcquireHold(ctx context.Context, req store.HoldRequest) (store.Grant, error) {
	if req.Kind != store.HoldSemaphore {
		return s.Holds.AcquireHold(ctx, req)
	}
	req.Limit++
	g, err := s.Holds.AcquireHold(ctx, req)
	if g.Limit > 0 {
		g.Limit--
	}
	return g, err
}

func (s overLimit) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	info, err := s.Holds.GetHolds(ctx, kind, name)
	if kind == store.HoldSemaphore && info.Limit > 0 {
		info.Limit--
	}
	return info, err
}

// TestHoldsUnknownOutcomes: with store calls failing at random (before or
// after they reach the store), of unknown outcome, the history is still
// linearizable when those calls may or may not have taken effect: this
// tests the model's handling of unknown outcomes as much as the store.
func TestHoldsUnknownOutcomes(t *testing.T) {
	for _, w := range []holdsWorkload{sharedWorkload(time.Second).covering(6 * time.Second), semaphoreWorkload(time.Second).covering(6 * time.Second)} {
		t.Run(string(w.kind), func(t *testing.T) {
			st := memoryStore()
			t.Cleanup(func() { _ = st.Close() })
			f := &failing{Holds: st, rng: rand.New(rand.NewPCG(1, 2))}
			h := recordHolds(t, f, st, w)
			if h.unknown == 0 {
				t.Fatal("no call had an unknown outcome: the faults did not bite")
			}
			checkHolds(t, w, h, porcupine.Ok)
		})
	}
}

// failing fails one call in 50 before it reaches the store, and one in 50
// after the store applied it.
type failing struct {
	store.Holds
	mu  sync.Mutex
	rng *rand.Rand
}

var errInjected = errors.New("injected fault")

// fail runs call unless it fails before, and reports whether it fails.
func (f *failing) fail(call func()) bool {
	f.mu.Lock()
	p := f.rng.IntN(100)
	f.mu.Unlock()
	if p < 2 {
		return true
	}
	call()
	return p < 4
}

func (f *failing) AcquireHold(ctx context.Context, req store.HoldRequest) (g store.Grant, err error) {
	if f.fail(func() { g, err = f.Holds.AcquireHold(ctx, req) }) {
		return store.Grant{}, errInjected
	}
	return g, err
}

func (f *failing) ReleaseHold(ctx context.Context, kind store.HoldKind, name, token, instance string) (rel store.Released, err error) {
	if f.fail(func() { rel, err = f.Holds.ReleaseHold(ctx, kind, name, token, instance) }) {
		return store.Released{}, errInjected
	}
	return rel, err
}

func (f *failing) RenewHold(ctx context.Context, kind store.HoldKind, name, token string, ttl time.Duration) (l store.Lease, err error) {
	if f.fail(func() { l, err = f.Holds.RenewHold(ctx, kind, name, token, ttl) }) {
		return store.Lease{}, errInjected
	}
	return l, err
}

func (f *failing) GetHolds(ctx context.Context, kind store.HoldKind, name string) (info store.HoldInfo, err error) {
	if f.fail(func() { info, err = f.Holds.GetHolds(ctx, kind, name) }) {
		return store.HoldInfo{}, errInjected
	}
	return info, err
}

func (f *failing) LeaveQueue(ctx context.Context, kind store.HoldKind, name, ticket, token, instance string) (hs []store.Handoff, err error) {
	if f.fail(func() { hs, err = f.Holds.LeaveQueue(ctx, kind, name, ticket, token, instance) }) {
		return nil, errInjected
	}
	return hs, err
}

// Session-bound holds: clients bind half their requests that do not wait
// to sessions of 500 ms, renewed every 100 ms and now and then dropped, so
// that holds end by their session's expiry, which no coordd sweeps: the
// store applies the liveness rule wherever it reads a hold.

func TestSessionSharedLocksMemory(t *testing.T) {
	testHolds(t, memoryStore(), sharedWorkload(2*time.Second).withSessions(sessionTTL).covering(8*time.Second))
}

func TestSessionSharedLocksRedis(t *testing.T) {
	testHolds(t, standaloneStore(t), sharedWorkload(2*time.Second).withSessions(sessionTTL).covering(8*time.Second))
}

func TestSessionSharedLocksRedisCluster(t *testing.T) {
	testHolds(t, clusterStore(t), sharedWorkload(2*time.Second).withSessions(sessionTTL).covering(8*time.Second))
}

func TestSessionSemaphoreMemory(t *testing.T) {
	testHolds(t, memoryStore(), semaphoreWorkload(2*time.Second).withSessions(sessionTTL).covering(8*time.Second))
}

func TestSessionSemaphoreRedis(t *testing.T) {
	testHolds(t, standaloneStore(t), semaphoreWorkload(2*time.Second).withSessions(sessionTTL).covering(8*time.Second))
}

func TestSessionSemaphoreRedisCluster(t *testing.T) {
	testHolds(t, clusterStore(t), semaphoreWorkload(2*time.Second).withSessions(sessionTTL).covering(8*time.Second))
}

const sessionTTL = 500 * time.Millisecond

// TestHoldsOutlivingSessionsAreCaught: a store that breaks the liveness
// rule, keeping a session-bound hold on a lease of its own (as a store
// would that renewed holds apart from their session and forgot them when
// the session ended), and otherwise describes them as bound, lets holds
// outlive their session; the checker says so.
func TestHoldsOutlivingSessionsAreCaught(t *testing.T) {
	st := memoryStore()
	t.Cleanup(func() { _ = st.Close() })
	w := sharedWorkload(time.Second).withSessions(sessionTTL / 2)
	checkHolds(t, w, recordHolds(t, &outlivesSession{Store: st, bound: map[string]bool{}}, st, w), porcupine.Illegal)
}

// TestLiveSessionsHoldsHiddenAreCaught: a store that reports the holds of
// live sessions as ended (GetHolds leaves out every session-bound holder,
// as would one that took the recorded deadline for the session's) is
// caught.
func TestLiveSessionsHoldsHiddenAreCaught(t *testing.T) {
	st := memoryStore()
	t.Cleanup(func() { _ = st.Close() })
	w := semaphoreWorkload(time.Second).withSessions(sessionTTL / 2)
	checkHolds(t, w, recordHolds(t, hidesBound{st}, st, w), porcupine.Illegal)
}

type outlivesSession struct {
	store.Store
	mu    sync.Mutex
	bound map[string]bool // the tokens and "name/fence"s of the holds it unbound
}

func (s *outlivesSession) AcquireHold(ctx context.Context, req store.HoldRequest) (store.Grant, error) {
	if req.SessionID == "" {
		return s.Store.AcquireHold(ctx, req)
	}
	if st, err := s.Store.CheckSession(ctx, store.SessionRef{ID: req.SessionID}); err != nil || st.Expired {
		return store.Grant{}, store.ErrSessionNotFound
	}
	req.SessionID, req.TTL = "", ttl
	g, err := s.Store.AcquireHold(ctx, req)
	if err == nil && g.Acquired {
		s.mu.Lock()
		s.bound[req.Token], s.bound[fmt.Sprint(req.Name, "/", g.Fence)] = true, true
		s.mu.Unlock()
	}
	return g, err
}

func (s *outlivesSession) RenewHold(ctx context.Context, kind store.HoldKind, name, token string, d time.Duration) (store.Lease, error) {
	s.mu.Lock()
	b := s.bound[token]
	s.mu.Unlock()
	l, err := s.Store.RenewHold(ctx, kind, name, token, d)
	if err == nil && b {
		return store.Lease{}, store.ErrSessionBound
	}
	return l, err
}

func (s *outlivesSession) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	info, err := s.Store.GetHolds(ctx, kind, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range info.Holders {
		if s.bound[fmt.Sprint(name, "/", x.Fence)] {
			info.Holders[i].SessionBound = true
		}
	}
	return info, err
}

type hidesBound struct{ store.Store }

func (s hidesBound) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.HoldInfo, error) {
	info, err := s.Store.GetHolds(ctx, kind, name)
	info.Holders = slices.DeleteFunc(info.Holders, func(x store.HolderInfo) bool { return x.SessionBound })
	info.Held = len(info.Holders) > 0
	if info.Held {
		info.Owner, info.Fence = info.Holders[0].Owner, info.Holders[0].Fence
	}
	return info, err
}
