package failover

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

const (
	rlLimit   = 100
	rlPeriod  = time.Second
	rlClients = 8
	// rlBound is what a fixed window may admit across a failover: its
	// counter lives on the key's master and is replicated asynchronously, so
	// the master's death can lose it (all of it, if the replica had not
	// received it), and the promoted replica counts the same window again
	// from what it has, possibly 0. One failover per window at most, so at
	// most twice the limit. (With a 1 s window and a failover that takes
	// 4-5 s, the window of the kill has ended before the replica serves, so
	// in practice no window should exceed the limit at all.)
	rlBound = 2 * rlLimit
)

// TestRateLimitFailover hammers one fixed-window limit (100 per second) from
// several clients through the kill of the key's master, its replica's
// promotion and the old master's restart, and counts the admissions of
// each window. The window of an admission is the Redis server's
// floor(now / period), recovered from the answer: the window ends at the
// server's now + reset_after, a multiple of the period, and the server's now
// lies between the call's send and receive times (the Redis nodes run on
// this machine, on the same clock). Every window must stay
// within rlBound (2 × the limit); the maximum is reported.
func TestRateLimitFailover(t *testing.T) {
	c := startCluster(t)
	cc := startCoordd(t, c.Addrs(), 0)
	const key = "failover-limit"
	limit := &coordv1.Limit{Algorithm: coordv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: rlLimit, Period: durationpb.New(rlPeriod)}

	var errs codeCounts
	var mu sync.Mutex
	admitted := map[int64]int{} // window index → admissions
	var calls, denied, misaligned int
	var maxCall time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range rlClients {
		wg.Go(func() {
			for ctx.Err() == nil {
				send := time.Now()
				cctx, cancelCall := context.WithTimeout(ctx, 5*time.Second)
				r, err := cc.limits.Allow(cctx, &coordv1.AllowRequest{Key: key, Limit: limit})
				cancelCall()
				recv := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.add("Allow", err) // inline limits fail closed: UNAVAILABLE
					sleepCtx(ctx, 10*time.Millisecond)
					continue
				}
				mu.Lock()
				calls++
				if !r.GetAllowed() {
					denied++
					mu.Unlock()
					continue
				}
				// The server's now lies in [send, recv], so its window's end,
				// now + reset_after, a multiple of the period, lies in
				// [send + reset_after, recv + reset_after] (give or take a
				// few ms of clock reading): the window is the one whose end
				// is in there, unambiguous while the call took less than a
				// period; else the nearest.
				reset := r.GetResetAfter().AsDuration()
				p := rlPeriod.Microseconds()
				lo := send.Add(reset).UnixMicro() - 5000
				hi := recv.Add(reset).UnixMicro() + 5000
				k := (lo + p - 1) / p // the first multiple of p at or after lo
				var w int64
				if k*p <= hi && (k+1)*p > hi {
					w = k - 1
				} else {
					misaligned++
					w = (hi+p/2)/p - 1
				}
				maxCall = max(maxCall, recv.Sub(send))
				admitted[w]++
				mu.Unlock()
			}
		})
	}

	time.Sleep(2 * time.Second)
	f := killMaster(t, c, limiterKey(key), time.Second)
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	windows := slices.Sorted(maps.Keys(admitted))
	if len(windows) == 0 {
		t.Fatalf("no admission at all (%d calls, errors %v)", calls, &errs)
	}
	maxN, over := 0, 0
	var maxW int64
	var line []string
	p := rlPeriod.Microseconds()
	for w := windows[0]; w <= windows[len(windows)-1]; w++ {
		n := admitted[w]
		if n > maxN {
			maxN, maxW = n, w
		}
		if n > rlLimit {
			over++
		}
		mark := ""
		start := time.UnixMicro(w * p)
		switch {
		case !start.Add(rlPeriod).Before(f.killed) && start.Before(f.promoted):
			mark = "*" // the kill or the outage fell in this window
		case !start.Add(rlPeriod).Before(f.restarted) && start.Before(f.rejoined):
			mark = "r" // the old master's restart fell in this window
		}
		line = append(line, fmt.Sprintf("%d%s", n, mark))
		if n > rlBound {
			t.Errorf("window starting %s admitted %d, over the bound %d (2 × limit %d)", start.Format("15:04:05.000"), n, rlBound, rlLimit)
		}
	}
	t.Logf("%v", f)
	t.Logf("admissions per window (* the kill and the outage, r the old master's restart): %s", strings.Join(line, " "))
	t.Logf("%d calls, %d denied, %d admissions in %d windows; %d admissions not placed in a window for certain (slowest call %v)",
		calls, denied, calls-denied, len(windows), misaligned, ms(maxCall))
	t.Logf("errors: %v", &errs)
	report(t, "fixed window %d/%v: bound per window %d (2 × limit; a failover can lose a window's count); max admitted in a window=%d (window %s) "+
		"windows over the limit=%d windows=%d admissions=%d denied=%d errors=%d promotion=%v",
		rlLimit, rlPeriod, rlBound, maxN, time.UnixMicro(maxW*p).Format("15:04:05"), over, len(windows), calls-denied, denied, errs.total(), ms(f.promoted.Sub(f.killed)))
	checkCodes(t, &errs)
}
