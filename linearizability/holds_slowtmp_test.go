package linearizability

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/coordd/coordd/internal/store"
)

type slowHolds struct{ *refHolds }

func nap() { time.Sleep(time.Duration(rand.IntN(400)) * time.Microsecond) }

func (s slowHolds) AcquireHold(ctx context.Context, req store.AcquireLock) (store.LockGrant, error) {
	nap()
	defer nap()
	return s.refHolds.AcquireHold(ctx, req)
}
func (s slowHolds) GetHolds(ctx context.Context, k store.HoldKind, n string) (store.LockInfo, error) {
	nap()
	defer nap()
	return s.refHolds.GetHolds(ctx, k, n)
}
func (s slowHolds) ReleaseHold(ctx context.Context, k store.HoldKind, n, tok string) (bool, time.Duration, error) {
	nap()
	defer nap()
	return s.refHolds.ReleaseHold(ctx, k, n, tok)
}

func TestSlowRefShared(t *testing.T) {
	w := sharedWorkload(2 * time.Second).covering(8 * time.Second)
	checkHolds(t, w, recordHolds(t, slowHolds{newRefHolds()}, nil, w), porcupine.Ok)
}
func TestSlowRefSem(t *testing.T) {
	w := semaphoreWorkload(2 * time.Second).covering(8 * time.Second)
	checkHolds(t, w, recordHolds(t, slowHolds{newRefHolds()}, nil, w), porcupine.Ok)
}
func TestSlowRefSemBroken(t *testing.T) {
	w := semaphoreWorkload(time.Second)
	checkHolds(t, w, recordHolds(t, overLimit{slowHolds{newRefHolds()}}, nil, w), porcupine.Illegal)
}
func TestSlowRefSharedBroken(t *testing.T) {
	w := sharedWorkload(time.Second)
	checkHolds(t, w, recordHolds(t, &exclusiveAsShared{Holds: slowHolds{newRefHolds()}, fences: map[string]map[uint64]bool{}}, nil, w), porcupine.Illegal)
}
