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
	"reflect"
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
	return WaitAny(ctx, sub, []string{topic}, wait, drain, try)
}

// WaitAny is Wait woken by any of topics (a partitioned queue's).
func WaitAny(ctx context.Context, sub store.Subscriber, topics []string, wait time.Duration, drain Drain, try Try) error {
	if wait <= 0 {
		_, _, err := try(ctx)
		return err
	}
	deadline := time.Now().Add(wait)
	// The select's cases: the timer, drain, ctx, then one per subscription.
	cases := make([]reflect.SelectCase, 3, 3+len(topics))
	poll := time.Duration(0)
	for _, topic := range topics {
		s, err := sub.Subscribe(ctx, topic)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			poll = PollWithoutWakeups
			continue
		}
		defer s.Close()
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.C())})
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf((<-chan struct{})(drain))}
	cases[2] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	var wake <-chan struct{} // with one subscription, a plain select
	if len(cases) == 4 {
		wake = cases[3].Chan.Interface().(<-chan struct{})
	}
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
		chosen := 0
		if len(cases) <= 4 {
			select {
			case <-wake: // nil without a subscription: never ready
				chosen = 3
			case <-timer.C:
			case <-drain:
				chosen = 1
			case <-ctx.Done():
				chosen = 2
			}
		} else {
			chosen, _, _ = reflect.Select(cases)
		}
		switch chosen {
		case 0: // the timer fired
		case 1:
			timer.Stop()
			return nil
		case 2:
			return ctx.Err()
		default:
			timer.Stop()
		}
	}
}

// PollWithoutWakeups is how often a wait re-checks when it could not
// subscribe to wake-ups.
const PollWithoutWakeups = time.Second
