package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/internal/redistest"
)

// TestOverloadKeepsLiveSessions: a coordd on the Cluster holds 300
// sessions (TTL 10 s) with a session-bound lock each; then 32 callers open more
// sessions as fast as they can for 15 s, far more than limits.max_sessions
// (600) lets in, with limits.shed_store_latency low enough (20 ms) that
// the store's latency may shed too. Every refusal is RESOURCE_EXHAUSTED
// OVERLOADED (none UNAVAILABLE: nothing of the store's failed; an opening
// that the flooder's own 200 ms bound cut short is counted apart), refusals
// did happen, and afterwards every one of the 300 sessions is alive,
// lost nothing, and still holds its lock with the fence it was granted;
// so does every session the flood opened.
func TestOverloadKeepsLiveSessions(t *testing.T) {
	addrs := redistest.Cluster(t)
	in := startCoordd(t, "overload", []string{"--store", "redis"},
		"COORDD_REDIS_ADDRS="+strings.Join(addrs, ","), "COORDD_REDIS_MODE=cluster",
		"COORDD_REDIS_KEY_PREFIX=ovl-"+randomHex(t, 6),
		"COORDD_LIMITS_MAX_SESSIONS=600", "COORDD_LIMITS_SHED_STORE_LATENCY=20ms",
		"COORDD_LIMITS_MAX_STREAMS_PER_CONNECTION=0", "COORDD_LIMITS_MAX_STREAMS_PER_NAMESPACE=0",
	)
	ctx := testContext(t, 3*time.Minute)
	const held, flooders = 300, 32
	type holder struct {
		s     *client.Session
		name  string
		fence uint64
	}
	var mu sync.Mutex
	var holders []holder
	// open opens a session, trying for as long as opening allows, and
	// locks name in it.
	open := func(opening context.Context, name string) error {
		s, err := client.NewSession(opening, in.conn, client.WithTTL(10*time.Second))
		if err != nil {
			return err
		}
		l, err := in.locks.Lock(ctx, &coordv1.LockRequest{Name: name, SessionId: s.ID()})
		if err != nil || !l.GetAcquired() {
			_ = s.Close()
			return fmt.Errorf("Lock %s in a new session = %v, %v", name, l, err)
		}
		mu.Lock()
		holders = append(holders, holder{s, name, l.GetFence()})
		mu.Unlock()
		return nil
	}
	for i := range held {
		if err := open(ctx, fmt.Sprint("held:", i)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, h := range holders {
			_ = h.s.Close()
		}
	})

	var opened, refused, slow atomic.Int64
	var other sync.Map // unexpected errors, by text
	flood, stop := context.WithTimeout(ctx, 15*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for w := range flooders {
		wg.Go(func() {
			for i := 0; flood.Err() == nil; i++ {
				// No retry: the first refusal comes back as the error.
				try, cancel := context.WithTimeout(flood, 200*time.Millisecond)
				err := open(try, fmt.Sprintf("flood:%d:%d", w, i))
				cancel()
				switch {
				case err == nil:
					opened.Add(1)
				case strings.Contains(err.Error(), "OVERLOADED") || strings.Contains(err.Error(), "at capacity"):
					refused.Add(1)
				case status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
					slow.Add(1) // the flooder's bound, not coordd's answer
				case flood.Err() != nil:
				default:
					other.Store(err.Error(), true)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("the flood: %d sessions opened, %d refused OVERLOADED, %d cut short by the flooder's 200ms bound", opened.Load(), refused.Load(), slow.Load())
	other.Range(func(k, _ any) bool {
		t.Errorf("a new session failed other than OVERLOADED: %v", k)
		return true
	})
	if refused.Load() == 0 {
		t.Error("no new session was refused: the flood never reached limits.max_sessions")
	}
	// Two heartbeats' time: a session the overload cost would show now.
	time.Sleep(7 * time.Second)
	lost := 0
	for _, h := range holders {
		select {
		case <-h.s.Done():
			lost++
			t.Errorf("session of %s ended: %v", h.name, h.s.Err())
			continue
		default:
		}
		var info *coordv1.GetLockResponse
		var err error
		for range 5 { // a read the loaded store could not answer in time is asked again
			if info, err = in.locks.GetLock(ctx, &coordv1.GetLockRequest{Name: h.name}); status.Code(err) != codes.Unavailable {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil || !info.GetHeld() || info.GetFence() != h.fence {
			lost++
			t.Errorf("GetLock(%s) after the flood = %v, %v; want held with fence %d", h.name, info, err, h.fence)
		}
	}
	t.Logf("%d sessions with a lock each after the flood (%d before it), %d lost", len(holders), held, lost)
}
