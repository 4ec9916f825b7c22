package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/redistest"
)

// TestIdleNamesLeaveNoKeys: with redis.idle_name_ttl 1m, 10,000 distinct
// lock names locked and released and 10,000 semaphore names acquired and
// released leave no key at all in Redis (standalone and Cluster) once a
// minute has passed since the last grant, fence counters included; and a
// name used again after its keys are gone gets a fence greater than every
// fence it had. (Before, each name left its fence counter forever: 10,000
// keys, 1.3 MB of Redis memory, for 10,000 names.)
func TestIdleNamesLeaveNoKeys(t *testing.T) {
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			addrs := redistest.Cluster(t)
			if mode == "standalone" {
				addrs = []string{redistest.Standalone(t)}
			}
			prefix := "idle-" + randomHex(t, 8)
			in := startCoordd(t, mode, []string{"--store", "redis"},
				"COORDD_REDIS_ADDRS="+strings.Join(addrs, ","),
				"COORDD_REDIS_MODE="+mode,
				"COORDD_REDIS_KEY_PREFIX="+prefix,
				"COORDD_REDIS_IDLE_NAME_TTL=1m",
			)
			ctx := testContext(t, 5*time.Minute)
			sems := coordv1.NewSemaphoreServiceClient(in.conn)
			const names, workers = 10000, 16
			// The holds' TTL is long enough that no stall of a loaded machine
			// lets one expire between its grant and its release (a release
			// would then answer released=false); what this test is about is
			// the names' keys after idle_name_ttl, which does not depend on it.
			ttl := durationpb.New(10 * time.Second)
			fences := make([]uint64, names) // the highest fence of lock i and semaphore i
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := w; i < names; i += workers {
						l, err := in.locks.Lock(ctx, &coordv1.LockRequest{Name: fmt.Sprint("order:", i), Ttl: ttl})
						if err != nil || !l.GetAcquired() {
							t.Errorf("Lock order:%d = %v, %v", i, l, err)
							return
						}
						if r, err := in.locks.Release(ctx, &coordv1.ReleaseRequest{Name: fmt.Sprint("order:", i), Token: l.GetToken()}); err != nil || !r.GetReleased() {
							t.Errorf("Release order:%d = %v, %v", i, r, err)
							return
						}
						s, err := sems.Acquire(ctx, &coordv1.AcquireRequest{Name: fmt.Sprint("pool:", i), Limit: 3, Ttl: ttl})
						if err != nil || !s.GetAcquired() {
							t.Errorf("Acquire pool:%d = %v, %v", i, s, err)
							return
						}
						if r, err := sems.Release(ctx, &coordv1.SemaphoreServiceReleaseRequest{Name: fmt.Sprint("pool:", i), Token: s.GetToken()}); err != nil || !r.GetReleased() {
							t.Errorf("Release pool:%d = %v, %v", i, r, err)
							return
						}
						fences[i] = max(l.GetFence(), s.GetFence())
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			lastGrant := time.Now()
			keys := func() []string {
				t.Helper()
				var mu sync.Mutex
				var out []string
				scan := func(c *goredis.Client) error {
					iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
					for iter.Next(ctx) {
						if strings.HasPrefix(iter.Val(), prefix+":{v:layout.") {
							continue // the stored layout's version: one key a master, no name's
						}
						mu.Lock()
						out = append(out, iter.Val())
						mu.Unlock()
					}
					return iter.Err()
				}
				var err error
				if mode == "standalone" {
					c := goredis.NewClient(redistest.Options(addrs[0]))
					defer c.Close()
					err = scan(c)
				} else {
					c := goredis.NewClusterClient(redistest.ClusterOptions(addrs))
					defer c.Close()
					err = c.ForEachMaster(ctx, func(_ context.Context, c *goredis.Client) error { return scan(c) })
				}
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			left := keys()
			t.Logf("%d names locked and %d acquired, released: %d keys left at once", names, names, len(left))
			if len(left) < names {
				t.Fatalf("%d keys right after the releases: the fence counters are not there to count on", len(left))
			}
			time.Sleep(time.Until(lastGrant.Add(time.Minute + 2*time.Second)))
			if left := keys(); len(left) > 0 {
				t.Errorf("%d keys left a minute after the last grant, e.g. %v", len(left), left[:min(5, len(left))])
			}
			for i := range 100 {
				l, err := in.locks.Lock(ctx, &coordv1.LockRequest{Name: fmt.Sprint("order:", i), Ttl: ttl})
				if err != nil || !l.GetAcquired() {
					t.Fatalf("Lock order:%d again = %v, %v", i, l, err)
				}
				if l.GetFence() <= fences[i] {
					t.Errorf("order:%d used again after its keys ended: fence %d, want > %d", i, l.GetFence(), fences[i])
				}
			}
		})
	}
}
