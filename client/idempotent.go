package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// IdempotentOptions are Idempotent's options.
type IdempotentOptions struct {
	// ProcessingTTL is how long the work owns the key without an extension
	// (0: coordd's default); Idempotent extends it every third of it while
	// fn runs.
	ProcessingTTL time.Duration
	// ResultTTL is how long the outcome is cached (0: coordd's default).
	ResultTTL time.Duration
}

// Failure is an outcome of fn that Idempotent stores: retryable, the key
// is cleared so that a later call runs fn again; terminal, the failure is
// cached and replayed to every later call.
type Failure struct {
	Message   string
	Retryable bool
}

func (f *Failure) Error() string {
	kind := "terminal"
	if f.Retryable {
		kind = "retryable"
	}
	return fmt.Sprintf("client: %s failure: %s", kind, f.Message)
}

// ErrNotOwner is Idempotent's answer when fn ran but its outcome could not
// be stored: the key's processing lease ran out (extensions failed) and
// another caller may have taken over.
var ErrNotOwner = errors.New("client: the work ran, but its lease on the key ran out before its outcome was stored")

// Idempotent runs fn at most once for key across every caller (once at
// least for as long as its outcome is cached), and gives every caller its
// outcome: the cached result or failure, or fn's. fingerprint identifies
// the request (a hash of its content): a key in use with another
// fingerprint is FAILED_PRECONDITION. While another caller runs fn for
// key, Idempotent waits for its outcome.
//
// fn returns the result to cache, or an error: a *Failure says whether a
// retry may run fn again; any other error is stored as retryable. fn's
// context is cancelled if the key's lease cannot be extended (another
// caller may take over).
func Idempotent(ctx context.Context, cc grpc.ClientConnInterface, key, fingerprint string, opts IdempotentOptions, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	ic := coordv1.NewIdempotencyServiceClient(cc)
	var waits waitCap
	for {
		wait := waits.cap(DefaultMaxWait)
		if dl, ok := ctx.Deadline(); ok {
			wait = max(0, min(wait, time.Until(dl)-callSlack))
		}
		req := &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: fingerprint, Wait: durationpb.New(wait)}
		if opts.ProcessingTTL > 0 {
			req.ProcessingTtl = durationpb.New(opts.ProcessingTTL)
		}
		var resp *coordv1.BeginIdempotentResponse
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			resp, err = ic.BeginIdempotent(ctx, req)
			return err
		})
		if err != nil && ctx.Err() == nil && waits.learn(err, wait) {
			continue
		}
		if err != nil {
			return nil, err
		}
		switch resp.GetOutcome() {
		case coordv1.Outcome_OUTCOME_COMPLETED:
			return resp.GetResult(), nil
		case coordv1.Outcome_OUTCOME_FAILED:
			return nil, &Failure{Message: resp.GetFailure().GetMessage()}
		case coordv1.Outcome_OUTCOME_EXECUTE:
			return execute(ctx, ic, key, fingerprint, resp.GetOwnerToken(), resp.GetExpireTime().AsTime(), opts, fn)
		}
		// In progress elsewhere and the wait ran out: wait again.
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// execute runs fn as the key's owner, extending the lease while it runs,
// and stores its outcome.
func execute(ctx context.Context, ic coordv1.IdempotencyServiceClient, key, fingerprint, token string, expires time.Time, opts IdempotentOptions, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	ttl := opts.ProcessingTTL
	if ttl <= 0 {
		ttl = time.Until(expires) // coordd's default, as granted
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	extended := make(chan struct{})
	go func() {
		defer close(extended)
		for {
			// Extend a third of the lease ahead, until fn returns; give up
			// (and cancel fn) when the lease has run out without one.
			if sleep(fctx, ttl/3) != nil {
				return
			}
			err := retry(fctx, func(ctx context.Context) error {
				cctx, c := context.WithDeadline(ctx, expires)
				defer c()
				resp, err := ic.ExtendIdempotent(cctx, &coordv1.ExtendIdempotentRequest{Key: key, OwnerToken: token, ProcessingTtl: durationpb.New(ttl)})
				if err == nil {
					expires = resp.GetExpireTime().AsTime()
				}
				return err
			})
			if err != nil {
				cancel(fmt.Errorf("%w (extending: %v)", ErrNotOwner, err))
				return
			}
		}
	}()
	result, ferr := fn(fctx)
	lost := context.Cause(fctx)
	cancel(nil)
	<-extended
	if lost != nil && ctx.Err() == nil {
		return nil, lost
	}
	fin := &coordv1.FinishRequest{Key: key, OwnerToken: token}
	if opts.ResultTTL > 0 {
		fin.ResultTtl = durationpb.New(opts.ResultTTL)
	}
	var failure *Failure
	switch {
	case ferr == nil:
		fin.Result = result
	case errors.As(ferr, &failure):
		fin.Failure = &coordv1.Failure{Message: failure.Message, Retryable: failure.Retryable}
	default:
		fin.Failure = &coordv1.Failure{Message: ferr.Error(), Retryable: true}
	}
	// The outcome is stored even if ctx ended meanwhile (a retryable
	// failure frees the key for the next caller now, not at its TTL).
	fctx2, cancel2 := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel2()
	attempts := 0
	err := retry(fctx2, func(ctx context.Context) error {
		attempts++
		_, err := ic.Finish(ctx, fin)
		return err
	})
	if status.Code(err) == codes.FailedPrecondition && attempts > 1 {
		// An earlier attempt may have stored it: read what is stored.
		resp, rerr := ic.BeginIdempotent(fctx2, &coordv1.BeginIdempotentRequest{Key: key, Fingerprint: fingerprint})
		switch {
		case rerr != nil:
			return nil, fmt.Errorf("client: the outcome's store is unknown: %w", rerr)
		case resp.GetOutcome() == coordv1.Outcome_OUTCOME_COMPLETED:
			return resp.GetResult(), nil
		case resp.GetOutcome() == coordv1.Outcome_OUTCOME_FAILED:
			return nil, &Failure{Message: resp.GetFailure().GetMessage()}
		case resp.GetOutcome() == coordv1.Outcome_OUTCOME_EXECUTE:
			// Not stored, and the key is ours again: store it now.
			fin.OwnerToken = resp.GetOwnerToken()
			err = retry(fctx2, func(ctx context.Context) error {
				_, err := ic.Finish(ctx, fin)
				return err
			})
		}
	}
	if status.Code(err) == codes.FailedPrecondition {
		return nil, ErrNotOwner
	}
	if err != nil {
		return nil, err
	}
	return result, ferr
}

// finishTimeout bounds storing an outcome after the caller's context ended.
const finishTimeout = 5 * time.Second
