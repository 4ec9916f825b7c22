package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

var errPermitNotReleased = errors.New("release: the permit just granted was not released")

// runSemaphoreContention is semaphore-contention: every caller takes a
// permit of one semaphore (limit --semaphore-limit) in turn, Acquire with
// wait then Release, as lock-contention does with a lock. A coordd without
// SemaphoreService answers Unimplemented: the scenario is then skipped, and
// the report says so.
func (b *bench) runSemaphoreContention(ctx context.Context) {
	const scenario = "semaphore-contention"
	name := "cb:sem:" + b.runID + b.nameTag()
	limit := int32(b.cfg.SemLimit)
	ttl, wait := durationpb.New(contentionTTL), durationpb.New(contentionWait)
	b.contended = true // its keys are deleted by pattern, whatever came of the probe

	// The probe: one Acquire without wait, released at once.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c := b.cl.sems[0]
	g, err := c.Acquire(pctx, &coordv1.AcquireRequest{Name: name, Limit: limit, Ttl: ttl})
	if err == nil && g.GetAcquired() {
		_, err = c.Release(pctx, &coordv1.SemaphoreServiceReleaseRequest{Name: name, Token: g.GetToken()})
	}
	cancel()
	switch {
	case status.Code(err) == codes.Unimplemented:
		b.skip(scenario, "the server answers Unimplemented: no SemaphoreService (a coordd without semaphores): "+status.Convert(err).Message())
		return
	case err != nil && ctx.Err() == nil:
		// Not skipped: measured, so that the errors show in the row.
		b.progress("%s/%s: the probe Acquire failed: %v", scenario, b.targetName(tCoordd), err)
	}
	b.runContention(ctx, scenario, int(limit), contender{
		acquire: func(ctx context.Context, w *worker) (string, bool, error) {
			g, err := b.cl.sems[w.id%len(b.cl.sems)].Acquire(ctx, &coordv1.AcquireRequest{Name: name, Limit: limit, Ttl: ttl, Wait: wait})
			return g.GetToken(), g.GetAcquired(), err
		},
		release: func(ctx context.Context, w *worker, token string) error {
			r, err := b.cl.sems[w.id%len(b.cl.sems)].Release(ctx, &coordv1.SemaphoreServiceReleaseRequest{Name: name, Token: token})
			if err == nil && !r.GetReleased() {
				err = errPermitNotReleased
			}
			return err
		},
	})
}

// skip records that scenario was not run on the current coordd, and why.
func (b *bench) skip(scenario, why string) {
	line := fmt.Sprintf("%s/%s: %s", scenario, b.targetName(tCoordd), why)
	b.report.Skipped = append(b.report.Skipped, line)
	b.progress("skipped %s", line)
}
