package memory

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// TestEnqueueRacesDrop: an Enqueue into a fresh queue while the sweep
// drops empty queue records is never lost. Before the fix, Enqueue found
// or created the record, let go of the queues map, and only then locked the
// record; the sweep could drop it in between, and the acknowledged message
// went into a record nobody would see again.
func TestEnqueueRacesDrop(t *testing.T) {
	s := New(Options{SweepInterval: time.Hour})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	stop := make(chan struct{})
	var drops atomic.Int64
	var dropper sync.WaitGroup
	dropper.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				s.dropEmptyQueues()
				drops.Add(1)
				runtime.Gosched()
			}
		}
	})
	const workers, each = 4, 5000
	var lost atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				q := fmt.Sprintf("ns:q-%d-%d", w, i)
				if _, err := s.Enqueue(ctx, q, store.NewMessage{ID: fmt.Sprintf("m%d", i), Payload: []byte("x"), MaxAttempts: 1}); err != nil {
					t.Error(err)
					return
				}
				st, err := s.Stats(ctx, q)
				if err != nil {
					t.Error(err)
					return
				}
				if st.Ready != 1 {
					lost.Add(1)
					continue
				}
				// Emptied again, so that the sweep may drop it and the
				// queues map stays small.
				c, err := s.Claim(ctx, q, store.Claim{Tokens: []string{"t"}, Visibility: time.Minute})
				if err != nil || len(c.Messages) != 1 {
					t.Errorf("Claim = %+v, %v", c, err)
					return
				}
				if _, err := s.Ack(ctx, q, []string{c.Messages[0].Receipt}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	dropper.Wait()
	if n := lost.Load(); n > 0 {
		t.Errorf("%d of %d acknowledged messages lost (%d drops ran)", n, workers*each, drops.Load())
	}
}
