package linearizability

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func TestRefShared(t *testing.T) {
	w := sharedWorkload(2 * time.Second).covering(8 * time.Second)
	checkHolds(t, w, recordHolds(t, newRefHolds(), nil, w), porcupine.Ok)
}

func TestRefSemaphore(t *testing.T) {
	w := semaphoreWorkload(2 * time.Second).covering(8 * time.Second)
	checkHolds(t, w, recordHolds(t, newRefHolds(), nil, w), porcupine.Ok)
}

func TestRefSharedBroken(t *testing.T) {
	w := sharedWorkload(time.Second)
	checkHolds(t, w, recordHolds(t, &exclusiveAsShared{Holds: newRefHolds(), fences: map[string]map[uint64]bool{}}, nil, w), porcupine.Illegal)
}

func TestRefSemaphoreBroken(t *testing.T) {
	w := semaphoreWorkload(time.Second)
	checkHolds(t, w, recordHolds(t, overLimit{newRefHolds()}, nil, w), porcupine.Illegal)
}

func TestRefUnknown(t *testing.T) {
	for _, w := range []holdsWorkload{sharedWorkload(time.Second).covering(6 * time.Second), semaphoreWorkload(time.Second).covering(6 * time.Second)} {
		t.Run(string(w.kind), func(t *testing.T) {
			f := &failing{Holds: newRefHolds(), rng: rand.New(rand.NewPCG(1, 2))}
			h := recordHolds(t, f, nil, w)
			checkHolds(t, w, h, porcupine.Ok)
		})
	}
}
