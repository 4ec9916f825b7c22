package e2e

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// TestFenceAcrossInstances takes one lock 200 times, alternately on A and
// B, each time released by the other instance: every fence must be above
// the one before, whichever instance granted it.
func TestFenceAcrossInstances(t *testing.T) {
	const (
		rounds = 200
		name   = "fenced"
	)
	a, b := startPair(t)
	ctx := testContext(t, 30*time.Second)
	pair := [2]*instance{a, b}

	var fence uint64
	for i := range rounds {
		on, other := pair[i%2], pair[(i+1)%2]
		g, err := on.locks.Lock(ctx, &coordv1.LockRequest{Name: name, Ttl: durationpb.New(10 * time.Second), Owner: on.Name})
		if err != nil || !g.GetAcquired() {
			t.Fatalf("round %d: Lock on %s = %v, %v; want acquired", i, on.Name, g, err)
		}
		if g.GetFence() <= fence {
			t.Fatalf("round %d: Lock on %s has fence %d; want above the previous one, %d", i, on.Name, g.GetFence(), fence)
		}
		fence = g.GetFence()
		rel, err := other.locks.Release(ctx, &coordv1.ReleaseRequest{Name: name, Token: g.GetToken()})
		if err != nil || !rel.GetReleased() {
			t.Fatalf("round %d: Release on %s of %s's lock = %v, %v; want released", i, other.Name, on.Name, rel, err)
		}
	}
	t.Logf("%d fences strictly increasing across A and B, last %d", rounds, fence)
}
