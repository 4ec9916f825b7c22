// Package waiter runs the loops in which waiting calls wait for an event
// without polling. Wait (BeginIdempotent, Claim): try, and if not done,
// sleep until a wake-up on the store topic, the retry time the store
// suggested (a message's due time), the end of the wait, or a drain.
// Queues (locks, semaphore permits, leaderships): the same, in the store's
// FIFO ticket queue, with one agent per name on this instance so that a
// release costs a constant number of store calls however many wait
// (queue.go).
package waiter

import (
	"context"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// Drain ends every wait early when closed; the daemon closes it on shutdown
// so that waiting calls answer at once with what they have.
type Drain <-chan struct{}

// Try makes one attempt. done ends the loop; otherwise retryIn > 0 is when
// the state may have changed by itself (0: only a wake-up can change it).
type Try func(ctx context.Context) (done bool, retryIn time.Duration, err error)

// Wait calls try until it is done, fails, wait has passed, ctx ends (its error
// is returned) or drain is closed. It subscribes to topic before the first
// try, so a wake-up between a try and the sleep is not lost; if it cannot
// subscribe (the store refuses more subscriptions, say), it re-checks at
// least every PollWithoutWakeups instead, so that the wait gets slower rather
// than failing. With wait <= 0 it tries once.
func Wait(ctx context.Context, sub store.Subscriber, topic string, wait time.Duration, drain Drain, try Try) error {
	if wait <= 0 {
		_, _, err := try(ctx)
		return err
	}
	deadline := time.Now().Add(wait)
	var wake <-chan struct{} // nil without a subscription: never ready
	poll := time.Duration(0)
	if s, err := sub.Subscribe(ctx, topic); err == nil {
		defer s.Close()
		wake = s.C()
	} else {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		poll = PollWithoutWakeups
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		done, retryIn, err := try(ctx)
		if done || err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		if poll > 0 && (retryIn <= 0 || retryIn > poll) {
			retryIn = poll
		}
		if retryIn > 0 && retryIn < left {
			left = retryIn
		}
		timer.Reset(left)
		select {
		case <-wake:
			timer.Stop()
		case <-timer.C:
		case <-drain:
			timer.Stop()
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// PollWithoutWakeups is how often a wait re-checks when it could not
// subscribe to wake-ups.
const PollWithoutWakeups = time.Second
