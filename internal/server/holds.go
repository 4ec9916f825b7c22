package server

// What the handlers of every kind of hold (lock, semaphore, election)
// share: their metrics, and the wire's holders.

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/store"
)

// countAcquire records an acquisition of kind in mode in the metrics: a
// new grant (an already-held one is none), and, if it found the name
// taken, that it did, and, if it could wait, how long it waited, granted
// or not.
func countAcquire(m *metrics.Metrics, kind store.HoldKind, mode string, g store.Grant, contended bool, wait time.Duration, start time.Time) {
	if g.AlreadyHeld {
		return
	}
	if g.Acquired {
		m.HoldGranted(string(kind), mode, g.Holders)
	}
	if contended {
		m.HoldContended(string(kind))
		if wait > 0 {
			m.HoldWaited(string(kind), time.Since(start))
		}
	}
}

// holders converts the store's holder descriptions.
func holders(hs []store.HolderInfo) []*coordv1.Holder {
	if len(hs) == 0 {
		return nil
	}
	out := make([]*coordv1.Holder, len(hs))
	for i, h := range hs {
		out[i] = &coordv1.Holder{
			Owner: h.Owner, Fence: h.Fence, Ttl: durationpb.New(h.TTL), Shared: h.Shared, SessionBound: h.SessionBound,
			ExpireTime: timestamp(h.ExpireTime), AcquireTime: timestamp(h.AcquireTime),
		}
	}
	return out
}

// count32 converts a count (never negative, bounded by configuration).
func count32(n int) uint32 {
	if n < 0 {
		return 0
	}
	return uint32(min(n, int(^uint32(0)>>1)))
}
