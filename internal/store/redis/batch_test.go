package redis

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

func batchStore(t *testing.T, maxBatch int) *Store {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: redistest.Standalone(t), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s, err := New(context.Background(), Options{Client: c, Prefix: "t" + token.New()[:12], MaxBatch: maxBatch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestBatcherAddsNothingForOneCaller: a single caller never waits for a
// batch: every script goes out at once, alone. The latencies with and
// without the batcher are logged side by side.
func TestBatcherAddsNothingForOneCaller(t *testing.T) {
	lim := store.Limit{Algorithm: store.TokenBucket, Limit: 1_000_000, Period: time.Second}
	p50 := func(s *Store) time.Duration {
		var lat []time.Duration
		for i := 0; i < 300; i++ {
			start := time.Now()
			if _, err := s.Allow(context.Background(), "ns:k", lim, 1, false); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[len(lat)/2]
	}
	batched, plain := batchStore(t, 64), batchStore(t, 0)
	with, without := p50(batched), p50(plain)
	if b, n := batched.batch.batches.Load(), batched.batch.scripts.Load(); b != n || n != 300 {
		t.Fatalf("one caller: %d scripts in %d batches, want every script alone (300 in 300)", n, b)
	}
	t.Logf("one caller, Allow p50: %v with the batcher, %v without", with, without)
}

// TestBatcherGathersUnderLoad: concurrent callers share round trips, each
// batch within the bound, and every decision stays exact (a fixed window of
// 1000 admits exactly 1000 of 64 × 40 calls).
func TestBatcherGathersUnderLoad(t *testing.T) {
	s := batchStore(t, 16)
	lim := store.Limit{Algorithm: store.FixedWindow, Limit: 1000, Period: time.Hour}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				d, err := s.Allow(context.Background(), "ns:hot", lim, 1, false)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	b, n := s.batch.batches.Load(), s.batch.scripts.Load()
	t.Logf("64 callers: %d scripts in %d batches (%.1f per round trip)", n, b, float64(n)/float64(b))
	if n != 64*40 || b >= n || float64(n)/float64(b) > 16 {
		t.Fatalf("%d scripts in %d batches: want fewer round trips than scripts, at most 16 per batch", n, b)
	}
	if allowed != 1000 {
		t.Fatalf("admitted %d, want exactly the limit 1000", allowed)
	}
}
