package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
	"github.com/coordd/coordd/internal/token"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		c := clock.NewFake(time.Unix(1_800_000_000, 0))
		s := memory.New(memory.Options{Clock: c, IdleNameTTL: 10 * time.Minute})
		t.Cleanup(func() { _ = s.Close() })
		return storetest.Harness{Store: s, Clock: c, IdleNameTTL: 10 * time.Minute,
			Residue: func(horizon time.Duration, names ...string) ([]string, error) { return s.Keeps(horizon, names...), nil }}
	})
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestIdleQueueIsForgotten: the sweep forgets the dead letters, claims
// that ended on their last attempt and dedup entries of a queue nobody
// touches again, once their lifetimes end, and then the queue itself.
func TestIdleQueueIsForgotten(t *testing.T) {
	c := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := memory.New(memory.Options{Clock: c, SweepInterval: 5 * time.Millisecond, DeadLetterTTL: time.Hour})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	for i := range store.UpkeepBatch + 10 { // more than one upkeep's batch
		_, err := s.Enqueue(ctx, "q", store.NewMessage{ID: token.New(), MaxAttempts: 1, DedupID: fmt.Sprint(i), DedupWindow: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
	}
	cl, err := s.Claim(ctx, "q", store.Claim{Tokens: []string{token.New()}, Visibility: time.Minute})
	if err != nil || len(cl.Messages) != 1 {
		t.Fatalf("Claim = %+v, %v", cl, err)
	}
	if _, err := s.Nack(ctx, "q", cl.Messages[0].Receipt, 0); err != nil { // dead at once
		t.Fatal(err)
	}
	req := store.Claim{Visibility: time.Second}
	for range store.UpkeepBatch + 9 {
		req.Tokens = append(req.Tokens, token.New()) // last attempts, dead in 1s
	}
	if cl, err := s.Claim(ctx, "q", req); err != nil || len(cl.Messages) != len(req.Tokens) {
		t.Fatalf("Claim = %d messages, %v", len(cl.Messages), err)
	}
	c.Advance(time.Second + time.Hour - time.Microsecond)
	// The sweeps forget the dedup entries and the first dead letter, not
	// the others yet.
	waitLen(t, s, store.UpkeepBatch+9)
	c.Advance(time.Microsecond)
	waitLen(t, s, 0)
}

// waitLen waits until the store holds want records, and fails if it holds
// fewer or still more 10s later.
func waitLen(t *testing.T, s *memory.Store, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := s.Len()
		if n == want {
			return
		}
		if n < want || time.Now().After(deadline) {
			t.Fatalf("Len = %d, want %d", n, want)
		}
	}
}
