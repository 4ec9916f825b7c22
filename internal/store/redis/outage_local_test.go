package redis_test

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store"
)

// TestOutageLocal runs three coordd instances, each with its own store
// client, on one private standalone Redis, with a policy that fails local
// and ratelimit.expected_instances 3, then stops Redis under them: every
// instance keeps deciding, each at most limit ÷ 3 per window, every answer
// degraded and none refused; once Redis is back, decisions come from its
// state again (not degraded; Redis restarts empty here, so its count starts
// again, shared by every instance).
func TestOutageLocal(t *testing.T) {
	const (
		instances = 3
		limit     = 30
		period    = time.Minute
		share     = limit / instances
		before    = 5 // admitted by the store before the outage
	)
	s := redistest.StartStandalone(t)
	var clients []coordv1.RateLimitServiceClient
	for range instances {
		st := outageStore(t, []string{s.Addr()})
		conn := servertest.Serve(t, st, clock.Real{}, servertest.WithConfig(func(c *server.Config) {
			c.Limiter.ExpectedInstances = instances
			c.Policies = map[string]limiter.Policy{
				"local": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: limit, Period: period}, OnStoreFailure: limiter.FailLocal},
			}
		}))
		clients = append(clients, coordv1.NewRateLimitServiceClient(conn))
	}
	allow := func(c coordv1.RateLimitServiceClient) (*coordv1.AllowResponse, time.Time, error) {
		r, err := c.Allow(rpcCtx(t), &coordv1.AllowRequest{Key: "k", Policy: "local"})
		return r, time.Now(), err
	}
	// The window of an admission, by its end: the deciding clock's now +
	// reset_after, a multiple of the period, where that now lies within
	// the call's few milliseconds before the answer's arrival.
	windowOf := func(r *coordv1.AllowResponse, recv time.Time) time.Time {
		return recv.Add(r.GetResetAfter().AsDuration()).Round(period)
	}

	for i := range before {
		r, _, err := allow(clients[i%instances])
		if err != nil || !r.GetAllowed() || r.GetDegraded() || r.GetRemaining() != int64(limit-1-i) {
			t.Fatalf("Allow #%d before the outage = %v, %v; want allowed by the store, one count for every instance", i, r, err)
		}
	}

	s.Stop()
	type count struct{ admitted, denied int }
	perWindow := make([]map[time.Time]*count, instances) // by instance, then window
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, c := range clients {
		perWindow[i] = map[time.Time]*count{}
		wg.Go(func() {
			for range 4 * share {
				r, recv, err := allow(c)
				if err != nil {
					t.Errorf("instance %d: Allow during the outage: %v (%v), want a local decision", i, status.Code(err), err)
					return
				}
				if !r.GetDegraded() {
					t.Errorf("instance %d: Allow during the outage = %v, want degraded", i, r)
				}
				mu.Lock()
				w := windowOf(r, recv)
				if perWindow[i][w] == nil {
					perWindow[i][w] = &count{}
				}
				if r.GetAllowed() {
					perWindow[i][w].admitted++
				} else {
					perWindow[i][w].denied++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, ws := range perWindow {
		total := 0
		for w, c := range ws {
			t.Logf("instance %d, window %v: %d admitted, %d denied, all degraded", i, w.Format(time.TimeOnly), c.admitted, c.denied)
			if c.admitted > share {
				t.Errorf("instance %d admitted %d in one window during the outage, want at most %d (limit %d ÷ %d instances)", i, c.admitted, share, limit, instances)
			}
			total += c.admitted
		}
		// 4 × share calls, in one window or two: the share at least,
		// starting full (a local mode that closed the gates fails here).
		if total < share {
			t.Errorf("instance %d admitted %d during the outage, want its full share %d: the gates closed", i, total, share)
		}
	}

	s.Start()
	start := time.Now()
	var r *coordv1.AllowResponse
	var recv time.Time
	for {
		var err error
		r, recv, err = allow(clients[0])
		if err == nil && !r.GetDegraded() {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("Allow 20s after Redis came back = %v, %v; want the store's decision", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("decisions from the store again %v after Redis came back", time.Since(start).Round(time.Millisecond))
	// Redis came back empty (it was stopped without saving): the store's
	// count starts again, one count for every instance, while each
	// instance's local share is spent.
	w := windowOf(r, recv)
	for i, c := range append(clients[1:], clients[0]) {
		r, recv, err := allow(c)
		if windowOf(r, recv) != w {
			t.Skip("a window ended while checking the counts after the outage") // rare: a second before a whole minute
		}
		if err != nil || !r.GetAllowed() || r.GetDegraded() || r.GetRemaining() != int64(limit-2-i) {
			t.Errorf("Allow #%d after the outage = %v, %v; want the store's decision, allowed with %d remaining", i, r, err, limit-2-i)
		}
	}
}
