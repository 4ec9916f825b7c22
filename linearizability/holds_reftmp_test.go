package linearizability

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func TestRefShared(t *testing.T) {
	w := sharedWorkload(2 * time.Second).covering(8 * time.Second)
	checkHolds(t, w, recordHolds(t, newRefHolds(), w), porcupine.Ok)
}

func TestRefSemaphore(t *testing.T) {
	w := semaphoreWorkload(2 * time.Second).covering(8 * time.Second)
	checkHolds(t, w, recordHolds(t, newRefHolds(), w), porcupine.Ok)
}

func TestRefSharedBroken(t *testing.T) {
	w := sharedWorkload(time.Second)
	checkHolds(t, w, recordHolds(t, &exclusiveAsShared{Holds: newRefHolds(), fences: map[string]map[uint64]bool{}}, w), porcupine.Illegal)
}

func TestRefSemaphoreBroken(t *testing.T) {
	w := semaphoreWorkload(time.Second)
	checkHolds(t, w, recordHolds(t, overLimit{newRefHolds()}, w), porcupine.Illegal)
}
