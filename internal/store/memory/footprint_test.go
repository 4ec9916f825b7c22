package memory

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
)

// TestExpiredSessionKeepsOnlyItsReports: once an expired session's locks
// are reported, the session record kept for store.SessionGrace holds the
// reports, not its emptied lock map (a Go map keeps its table when emptied).
func TestExpiredSessionKeepsOnlyItsReports(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := New(Options{Clock: c, SweepInterval: time.Hour})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	const id = "ns/sess"
	if _, err := s.CreateSession(ctx, id, time.Second, 0, 0); err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
	for _, name := range names {
		g, err := s.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: "t-" + name, Owner: "o", TTL: time.Second, SessionID: id})
		if err != nil || !g.Acquired {
			t.Fatalf("AcquireLock(%s) = %+v, %v", name, g, err)
		}
	}
	c.Advance(2 * time.Second)
	st, err := s.CheckSession(ctx, store.SessionRef{ID: id, Stream: 1})
	if err != nil || !st.Expired || len(st.Lost) != len(names) {
		t.Fatalf("CheckSession = %+v, %v; want expired with %d lost locks", st, err, len(names))
	}
	s.lk.Lock()
	r, locks := s.sessions[id], len(s.holds)
	s.lk.Unlock()
	if r == nil {
		t.Fatal("the expired session is forgotten within its grace")
	}
	if r.holds != nil {
		t.Errorf("the expired session keeps its lock map (%d entries): only its reports are needed", len(r.holds))
	}
	if locks != 0 {
		t.Errorf("%d lock records left after the session's locks were reported", locks)
	}
	// A second check repeats the reports (at least once) from what is kept.
	if st, err := s.CheckSession(ctx, store.SessionRef{ID: id, Stream: 1}); err != nil || !st.Expired || len(st.Lost) != len(names) {
		t.Fatalf("second CheckSession = %+v, %v", st, err)
	}
}
