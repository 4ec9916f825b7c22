package client

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// Limiter asks coordd's rate limiter for decisions on keys under one limit:
// a policy configured on coordd (ratelimit.policies), or an inline limit.
// It is safe for use by several goroutines.
type Limiter struct {
	rc     coordv1.RateLimitServiceClient
	policy string
	limit  *coordv1.Limit
	// MaxWait is the longest wait one Allow call asks coordd for (0:
	// DefaultMaxWait, or coordd's limits.max_wait if lower); Wait waits
	// longer in several calls.
	MaxWait time.Duration
	waits   waitCap
}

// NewLimiter returns a Limiter under the policy configured on coordd.
func NewLimiter(cc grpc.ClientConnInterface, policy string) *Limiter {
	return &Limiter{rc: coordv1.NewRateLimitServiceClient(cc), policy: policy}
}

// NewInlineLimiter returns a Limiter under an inline limit: limit units a
// period with algorithm (burst: the buckets' capacity; 0 for the default).
func NewInlineLimiter(cc grpc.ClientConnInterface, algorithm coordv1.Algorithm, limit int64, period time.Duration, burst int64) *Limiter {
	return &Limiter{rc: coordv1.NewRateLimitServiceClient(cc), limit: &coordv1.Limit{
		Algorithm: algorithm, Limit: limit, Period: durationpb.New(period), Burst: burst,
	}}
}

// Decision is a rate limiter's answer.
type Decision struct {
	Allowed bool
	// Remaining is the units left (the least of several limits').
	Remaining int64
	// RetryAfter is, denied, how long until the same call succeeds if
	// nothing else consumes.
	RetryAfter time.Duration
	// Degraded: the store was unreachable and the policy fails open.
	Degraded bool
	// DeniedBy names the limit of a multi-limit policy that denied.
	DeniedBy string
}

// Allow consumes cost units (0 or 1: one) of key's limit if the limit
// allows it, and says whether it did. An error (UNAVAILABLE for a
// fail-closed limit with the store unreachable) is not a denial: the call
// may or may not have consumed.
func (l *Limiter) Allow(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.allow(ctx, key, cost, 0)
}

func (l *Limiter) allow(ctx context.Context, key string, cost int64, wait time.Duration) (Decision, error) {
	req := &coordv1.AllowRequest{Key: key, Policy: l.policy, Limit: l.limit, Cost: cost}
	if wait > 0 {
		req.Wait = durationpb.New(wait)
	}
	resp, err := l.rc.Allow(ctx, req)
	if err != nil {
		return Decision{}, err
	}
	return Decision{
		Allowed: resp.GetAllowed(), Remaining: resp.GetRemaining(), RetryAfter: resp.GetRetryAfter().AsDuration(),
		Degraded: resp.GetDegraded(), DeniedBy: resp.GetDeniedBy(),
	}, nil
}

// Wait waits until cost units of key's limit are allowed (and consumes
// them), or ctx ends: coordd waits for each denial's retry_after itself,
// so nothing polls. ctx's error if it ends first: nothing was consumed
// then, unless an error says the outcome is unknown.
func (l *Limiter) Wait(ctx context.Context, key string, cost int64) error {
	maxWait := l.MaxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	for {
		wait := l.waits.cap(maxWait)
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)-callSlack)
			if wait <= 0 {
				return context.DeadlineExceeded
			}
		}
		d, err := l.allow(ctx, key, cost, wait)
		if err != nil && ctx.Err() == nil && l.waits.learn(err, wait) {
			continue
		}
		if err != nil || d.Allowed {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Denied at once: the retry_after lies beyond the wait. Sleep until
		// it if the context lets us; else ask again with what is left.
		if d.RetryAfter > wait {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d.RetryAfter {
				return context.DeadlineExceeded
			}
			if err := sleep(ctx, d.RetryAfter-wait); err != nil {
				return err
			}
		}
	}
}
