package redis

// Atomicity of the hold scripts under concurrency, on real Redis
// (standalone and Cluster): many goroutines at once on one semaphore, one
// lock taken shared and exclusive, and one election, each checking inside
// its critical section that no more hold than may. The store's answers
// alone decide who holds; the counters only watch.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

const (
	atomicWorkers = 64
	atomicRounds  = 3
)

func atomicStores(t *testing.T) map[string]*Store {
	return map[string]*Store{
		"standalone": openStore(t, Config{Addrs: []string{redistest.Standalone(t)}, Prefix: "at" + token.New()[:12], Timeout: 5 * time.Second, PoolSize: 64}),
		"cluster": func() *Store {
			s, _ := clusterStore(t, Config{})
			return s
		}(),
	}
}

// atomicWait tries req until it is granted, keeping its ticket (so that
// the grants go in ticket order), and returns the grant, its Token set to
// the granted request's.
func atomicWait(t *testing.T, st *Store, req store.HoldRequest) store.Grant {
	ctx := context.Background()
	req.Wait = &store.WaitTicket{Ticket: token.New(), Instance: token.New()[:16], Lease: time.Minute}
	for {
		req.Token = token.New()
		g, err := st.AcquireHold(ctx, req)
		if err != nil {
			t.Errorf("AcquireHold: %v", err)
			return g
		}
		if g.Acquired {
			g.Token = req.Token
			return g
		}
		if !g.Queued {
			t.Errorf("not granted and not queued: %+v", g)
			return g
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHoldsAtomicSemaphore: 64 goroutines take permits of one semaphore
// of limit 3, waiting with tickets: never more than 3 live holders, the
// store's Holders count never above the limit, and every goroutine gets
// its permits (the queue never loses a ticket).
func TestHoldsAtomicSemaphore(t *testing.T) {
	for mode, st := range atomicStores(t) {
		t.Run(mode, func(t *testing.T) {
			const limit = 3
			name := "ns:sem" + token.New()[:8]
			var live, most atomic.Int64
			var fences sync.Map
			var wg sync.WaitGroup
			for w := range atomicWorkers {
				wg.Go(func() {
					for range atomicRounds {
						req := store.HoldRequest{Kind: store.HoldSemaphore, Name: name, Owner: "w", TTL: time.Minute, Limit: limit}
						g := atomicWait(t, st, req)
						if !g.Acquired {
							return
						}
						if g.Holders > limit {
							t.Errorf("worker %d: granted with %d holders, limit %d", w, g.Holders, limit)
						}
						if _, dup := fences.LoadOrStore(g.Fence, true); dup {
							t.Errorf("fence %d granted twice", g.Fence)
						}
						n := live.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						if n > limit {
							t.Errorf("%d holders at once, limit %d", n, limit)
						}
						time.Sleep(2 * time.Millisecond) // so that holders overlap
						live.Add(-1)
						if rel, err := st.ReleaseHold(context.Background(), store.HoldSemaphore, name, g.Token, ""); err != nil || !rel.Released {
							t.Errorf("ReleaseHold = %+v, %v", rel, err)
						}
					}
				})
			}
			wg.Wait()
			info, err := st.GetHolds(context.Background(), store.HoldSemaphore, name)
			if err != nil || len(info.Holders) != 0 || info.Waiters != 0 {
				t.Errorf("after: %+v, %v; want no holders, no waiters", info, err)
			}
			t.Logf("at most %d holders at once (limit %d), %d grants", most.Load(), limit, atomicWorkers*atomicRounds)
		})
	}
}

// TestHoldsAtomicSharedLock: 64 goroutines take one lock, a quarter of
// them exclusive, the rest shared (at most 5): never an exclusive holder
// beside anyone, never more than 5 shared holders.
func TestHoldsAtomicSharedLock(t *testing.T) {
	for mode, st := range atomicStores(t) {
		t.Run(mode, func(t *testing.T) {
			const maxShared = 5
			name := "ns:rw" + token.New()[:8]
			var readers, writers atomic.Int64
			var wg sync.WaitGroup
			for w := range atomicWorkers {
				wg.Go(func() {
					exclusive := w%4 == 0
					for range atomicRounds {
						req := store.HoldRequest{Kind: store.HoldLock, Name: name, Owner: "w", TTL: time.Minute,
							Shared: !exclusive, MaxHolders: maxShared}
						g := atomicWait(t, st, req)
						if !g.Acquired {
							return
						}
						if exclusive {
							if writers.Add(1) != 1 || readers.Load() != 0 {
								t.Errorf("an exclusive holder beside others: %d writers, %d readers", writers.Load(), readers.Load())
							}
							writers.Add(-1)
						} else {
							if n := readers.Add(1); n > maxShared || writers.Load() != 0 {
								t.Errorf("%d shared holders (max %d) beside %d writers", n, maxShared, writers.Load())
							}
							readers.Add(-1)
						}
						if rel, err := st.ReleaseHold(context.Background(), store.HoldLock, name, g.Token, ""); err != nil || !rel.Released {
							t.Errorf("ReleaseHold = %+v, %v", rel, err)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestHoldsAtomicElection: 64 sessions campaign at once, again and again,
// each resigning after it is elected: one leader at a time, and the log's
// revisions count every term twice (elected, resigned), in order.
func TestHoldsAtomicElection(t *testing.T) {
	for mode, st := range atomicStores(t) {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			name := "ns:el" + token.New()[:8]
			var leaders atomic.Int64
			var terms atomic.Int64
			var wg sync.WaitGroup
			for range atomicWorkers {
				wg.Go(func() {
					id := store.Scope("ns", token.New())
					if _, err := st.CreateSession(ctx, id, time.Minute, 0, 0); err != nil {
						t.Errorf("CreateSession: %v", err)
						return
					}
					defer st.CloseSession(ctx, store.SessionRef{ID: id})
					wait := &store.WaitTicket{Ticket: token.New(), Instance: token.New()[:16], Lease: time.Minute}
					for range 3 {
						c := store.Campaign{Name: name, Token: token.New(), SessionID: id, Value: []byte("v"), Wait: wait}
						for {
							got, err := st.Campaign(ctx, c)
							if err != nil {
								t.Errorf("Campaign: %v", err)
								return
							}
							if got.Elected {
								break
							}
							c.Token = token.New()
							time.Sleep(time.Millisecond)
						}
						if leaders.Add(1) != 1 {
							t.Errorf("two leaders at once")
						}
						terms.Add(1)
						leaders.Add(-1)
						if rel, err := st.ReleaseHold(ctx, store.HoldElection, name, c.Token, ""); err != nil || !rel.Released {
							t.Errorf("ReleaseHold (resign) = %+v, %v", rel, err)
						}
					}
				})
			}
			wg.Wait()
			log, err := st.ElectionChanges(ctx, name, 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := uint64(2 * terms.Load()); log.Current.Rev != want || log.Current.HasLeader {
				t.Errorf("after %d terms: %+v; want rev %d, no leader", terms.Load(), log.Current, want)
			}
			if n := len(log.Changes); n != store.ElectionLogSize || log.Missed != log.Current.Rev-uint64(n) {
				t.Errorf("log: %d changes, missed %d; want %d, %d", n, log.Missed, store.ElectionLogSize, log.Current.Rev-uint64(n))
			}
			for i, c := range log.Changes {
				if c.Rev != log.Missed+uint64(i)+1 || c.Leader.HasLeader != (c.Rev%2 == 1) {
					t.Fatalf("change %d: %+v; want rev %d, a leader iff odd", i, c, log.Missed+uint64(i)+1)
				}
			}
		})
	}
}

// TestHoldsAtomicPlainLock: 64 goroutines try one lock without waiting,
// three quarters of them exclusive (the solo scripts' path: a plain
// exclusive holder lives in the name's meta), the rest shared (the holder
// keys): never an exclusive holder beside anyone, and each exclusive
// grant's fence above every exclusive one before it.
func TestHoldsAtomicPlainLock(t *testing.T) {
	for mode, st := range atomicStores(t) {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			name := "ns:plain" + token.New()[:8]
			var readers, writers atomic.Int64
			var last uint64 // the last exclusive grant's fence, written by its holder alone
			var wg sync.WaitGroup
			for w := range atomicWorkers {
				wg.Go(func() {
					shared := w%4 == 0
					for got := 0; got < atomicRounds; {
						tok := token.New()
						g, err := st.AcquireHold(ctx, store.HoldRequest{Kind: store.HoldLock, Name: name, Token: tok, Owner: "w", TTL: time.Minute, Shared: shared})
						if err != nil {
							t.Errorf("AcquireHold: %v", err)
							return
						}
						if !g.Acquired {
							time.Sleep(time.Millisecond)
							continue
						}
						got++
						if shared {
							if readers.Add(1); writers.Load() != 0 {
								t.Errorf("a shared holder beside %d exclusive ones", writers.Load())
							}
							readers.Add(-1)
						} else {
							if writers.Add(1) != 1 || readers.Load() != 0 {
								t.Errorf("an exclusive holder beside others: %d exclusive, %d shared", writers.Load(), readers.Load())
							}
							if g.Fence <= last {
								t.Errorf("exclusive fence %d after %d", g.Fence, last)
							}
							last = g.Fence
							writers.Add(-1)
						}
						if rel, err := st.ReleaseHold(ctx, store.HoldLock, name, tok, ""); err != nil || !rel.Released {
							t.Errorf("ReleaseHold = %+v, %v", rel, err)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
