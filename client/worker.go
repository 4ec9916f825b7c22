package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// Message is a claimed queue message, as a Worker's handler gets it.
type Message struct {
	ID      string
	Payload []byte
	// Attempt counts the deliveries of this message, this one included.
	Attempt     int32
	MaxAttempts int32
	Priority    int32
	Group       string
	EnqueueTime time.Time
}

// Retry is a handler's error that asks for another attempt after Delay
// (0: coordd's backoff). Any other error is retried with coordd's backoff
// too; a message that has had its max attempts goes to the dead letters.
type Retry struct {
	Delay time.Duration
	Err   error
}

func (r *Retry) Error() string { return fmt.Sprintf("client: retry in %v: %v", r.Delay, r.Err) }
func (r *Retry) Unwrap() error { return r.Err }

// WorkerOptions are a Worker's options.
type WorkerOptions struct {
	// Concurrency is how many messages are handled at once (0: 1).
	Concurrency int
	// Visibility is each claim's visibility timeout (0: 30s): how long a
	// message is hidden from other consumers without an extension. The
	// Worker extends it every third of it while the handler runs.
	Visibility time.Duration
	// OnError, if set, hears of the errors the Worker goes on after: a
	// failed Claim, Ack, Nack or Extend (never the handler's own errors).
	OnError func(error)
}

// Worker consumes a queue (at least once): it claims messages, runs the
// handler on each (Concurrency at a time), extends the claim while the
// handler runs, and acks the message when the handler returns nil, or nacks
// it (another attempt later) when it returns an error. A message whose claim
// could not be extended may be delivered to another consumer meanwhile:
// handlers must be idempotent (see Idempotent).
type Worker struct {
	qc      coordv1.QueueServiceClient
	queue   string
	handler func(ctx context.Context, m Message) error
	opts    WorkerOptions
	waits   waitCap
}

// NewWorker returns a Worker of queue that runs handler on each message.
func NewWorker(cc grpc.ClientConnInterface, queue string, handler func(ctx context.Context, m Message) error, opts WorkerOptions) *Worker {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	if opts.Visibility <= 0 {
		opts.Visibility = 30 * time.Second
	}
	return &Worker{qc: coordv1.NewQueueServiceClient(cc), queue: queue, handler: handler, opts: opts}
}

// Run consumes the queue until ctx ends, then stops gracefully: it claims
// nothing more, lets the handlers that run finish (their context is not
// cancelled: it ends only if their claim is lost), acks or nacks their
// messages, and returns nil. An error that no retry can cure (a queue name
// coordd refuses, a key without the permission) ends Run at once, with
// that error, after the running handlers finish.
func (w *Worker) Run(ctx context.Context) error {
	slots := make(chan struct{}, w.opts.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := minBackoff
	for {
		// Claim only as many as there are free slots.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
		for n < w.opts.Concurrency {
			select {
			case slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		wait := w.waits.cap(claimWait)
		resp, err := w.qc.Claim(ctx, &coordv1.ClaimRequest{
			Queue: w.queue, MaxMessages: int32(n), VisibilityTimeout: durationpb.New(w.opts.Visibility), Wait: durationpb.New(wait),
		})
		msgs := resp.GetMessages()
		for range n - len(msgs) {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if w.waits.learn(err, wait) {
				continue
			}
			if !transient(err) {
				return fmt.Errorf("client: claiming from %q: %w", w.queue, err)
			}
			w.report(fmt.Errorf("claiming from %q: %w", w.queue, err))
			if sleep(ctx, backoff/2+randDuration(backoff/2)) != nil {
				return nil
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		for _, m := range msgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				w.handle(context.WithoutCancel(ctx), m)
			}()
		}
	}
}

// claimWait is how long one Claim waits for a message: well under the
// default limits.max_wait (or that limit, if coordd's is lower), so that a
// stop is seen soon after it.
const claimWait = 20 * time.Second

// handle runs the handler on m, extending its claim meanwhile, and acks or
// nacks it.
func (w *Worker) handle(ctx context.Context, m *coordv1.Message) {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	receipt := m.GetReceipt()
	extended := make(chan struct{})
	go func() {
		defer close(extended)
		expires := m.GetExpireTime().AsTime()
		for sleep(hctx, w.opts.Visibility/3) == nil {
			err := retry(hctx, func(ctx context.Context) error {
				cctx, c := context.WithDeadline(ctx, expires)
				defer c()
				resp, err := w.qc.Extend(cctx, &coordv1.ExtendRequest{Queue: w.queue, Receipt: receipt, VisibilityTimeout: durationpb.New(w.opts.Visibility)})
				if err == nil {
					expires = resp.GetExpireTime().AsTime()
				}
				return err
			})
			if err != nil && hctx.Err() == nil {
				w.report(fmt.Errorf("extending message %s: %w", m.GetMessageId(), err))
				cancel(fmt.Errorf("client: the claim of message %s is lost: %w", m.GetMessageId(), err))
				return
			}
		}
	}()
	msg := Message{
		ID: m.GetMessageId(), Payload: m.GetPayload(), Attempt: m.GetAttempt(), MaxAttempts: m.GetMaxAttempts(),
		Priority: m.GetPriority(), Group: m.GetGroup(), EnqueueTime: m.GetEnqueueTime().AsTime(),
	}
	herr := w.safeHandle(hctx, msg)
	lost := context.Cause(hctx) != nil
	cancel(nil)
	<-extended
	if lost {
		return // the claim is gone: the message is redelivered
	}
	actx, c := context.WithTimeout(ctx, w.opts.Visibility)
	defer c()
	if herr == nil {
		err := retry(actx, func(ctx context.Context) error {
			_, err := w.qc.Ack(ctx, &coordv1.AckRequest{Queue: w.queue, Receipt: receipt})
			return err
		})
		if err != nil {
			w.report(fmt.Errorf("acking message %s: %w", m.GetMessageId(), err))
		}
		return
	}
	req := &coordv1.NackRequest{Queue: w.queue, Receipt: receipt}
	var r *Retry
	if errors.As(herr, &r) && r.Delay > 0 {
		req.Delay = durationpb.New(r.Delay)
	}
	if err := retry(actx, func(ctx context.Context) error {
		_, err := w.qc.Nack(ctx, req)
		return err
	}); err != nil {
		w.report(fmt.Errorf("nacking message %s: %w", m.GetMessageId(), err))
	}
}

// safeHandle runs the handler, turning a panic into an error (the message
// is nacked, and the worker goes on).
func (w *Worker) safeHandle(ctx context.Context, m Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("client: handler panicked: %v", p)
		}
	}()
	return w.handler(ctx, m)
}

func (w *Worker) report(err error) {
	if w.opts.OnError != nil {
		w.opts.OnError(err)
	}
}
