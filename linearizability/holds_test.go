package linearizability

import (
	"context"
	"hash/fnv"
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
	checkHolds(t, w, recordHolds(t, st, w), porcupine.Ok)
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
	checkHolds(t, w, recordHolds(t, &exclusiveAsShared{Holds: st, fences: map[string]map[uint64]bool{}}, w), porcupine.Illegal)
}

// exclusiveAsShared is a broken store: one exclusive lock request in four
// (by its token, so that every try of a waiting request is the same) is
// passed on as a shared one; GetHolds reports those holders as exclusive.
type exclusiveAsShared struct {
	store.Holds
	mu     sync.Mutex
	fences map[string]map[uint64]bool // name → fences of the downgraded grants
}

func (s *exclusiveAsShared) AcquireHold(ctx context.Context, req store.AcquireLock) (store.LockGrant, error) {
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

func (s *exclusiveAsShared) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.LockInfo, error) {
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
	checkHolds(t, w, recordHolds(t, overLimit{st}, w), porcupine.Illegal)
}

// overLimit is a broken store: a semaphore request's limit is raised by
// one on the way in, and lowered back in every answer.
type overLimit struct{ store.Holds }

func (s overLimit) AcquireHold(ctx context.Context, req store.AcquireLock) (store.LockGrant, error) {
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

func (s overLimit) GetHolds(ctx context.Context, kind store.HoldKind, name string) (store.LockInfo, error) {
	info, err := s.Holds.GetHolds(ctx, kind, name)
	if kind == store.HoldSemaphore && info.Limit > 0 {
		info.Limit--
	}
	return info, err
}
