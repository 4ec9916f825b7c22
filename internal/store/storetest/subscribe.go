package storetest

import (
	"fmt"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/token"
)

// wakeTimeout bounds the real time the suite waits for a wake-up.
const wakeTimeout = 5 * time.Second

// quietPeriod is how long the suite watches for a wake-up that must not come.
const quietPeriod = 200 * time.Millisecond

func subscribeTests() []test {
	return []test{
		{"EnqueueWakes", subEnqueueWakes},
		{"NotMissedAfterSubscribe", subNotMissed},
		{"EverySubscriberWoken", subEverySubscriber},
		{"CloseStopsDelivery", subCloseStops},
	}
}

func (e *env) subscribe(topic string) *store.Subscription {
	e.Helper()
	sub, err := e.s.Subscribe(e.ctx, topic)
	noErr(e, "Subscribe "+topic, err)
	e.Cleanup(sub.Close)
	return sub
}

// drain discards a pending wake-up, so that the next one waited for is
// caused by what the test does next.
func drain(sub *store.Subscription) {
	select {
	case <-sub.C():
	default:
	}
}

func (e *env) wantWake(sub *store.Subscription, what string) {
	e.Helper()
	select {
	case <-sub.C():
	case <-time.After(wakeTimeout):
		e.Errorf("%s: no wake-up within %v", what, wakeTimeout)
	}
}

// wantWakeWithin is wantWake with a tighter bound, for a case whose point
// is that the wake-up comes at once.
func (e *env) wantWakeWithin(sub *store.Subscription, within time.Duration, what string) {
	e.Helper()
	select {
	case <-sub.C():
	case <-time.After(within):
		e.Errorf("%s: no wake-up within %v", what, within)
	}
}

func (e *env) wantNoWake(sub *store.Subscription, what string) {
	e.Helper()
	select {
	case <-sub.C():
		e.Errorf("%s: woken", what)
	case <-time.After(quietPeriod):
	}
}

// wake makes the store wake QueueTopic(q): an enqueue, the wake-up a
// waiting Claim listens for.
func (e *env) wake(q string) {
	e.Helper()
	e.enqueue(q, store.NewMessage{ID: token.New(), Payload: []byte("p"), MaxAttempts: 1})
}

func subEnqueueWakes(e *env) {
	q := e.name("q")
	sub := e.subscribe(store.QueueTopic(q))
	e.wake(q)
	e.wantWake(sub, "QueueTopic after Enqueue")
}

// subNotMissed wakes right after Subscribe returns, many times over, on a
// new topic each time (the first subscription of a topic is the one a
// backend may have to set up).
func subNotMissed(e *env) {
	for i := range 20 {
		q := e.name(fmt.Sprint("q", i))
		sub, err := e.s.Subscribe(e.ctx, store.QueueTopic(q))
		noErr(e, "Subscribe", err)
		e.wake(q)
		e.wantWake(sub, fmt.Sprint("enqueue ", i, " right after Subscribe"))
		sub.Close()
	}
}

func subEverySubscriber(e *env) {
	q := e.name("q")
	subs := []*store.Subscription{e.subscribe(store.QueueTopic(q)), e.subscribe(store.QueueTopic(q)), e.subscribe(store.QueueTopic(q))}
	e.wake(q)
	for i, s := range subs {
		e.wantWake(s, fmt.Sprint("subscriber ", i))
	}
}

func subCloseStops(e *env) {
	q := e.name("q")
	sub := e.subscribe(store.QueueTopic(q))
	other := e.subscribe(store.QueueTopic(q)) // keeps the topic alive
	sub.Close()
	sub.Close() // safe twice
	e.wake(q)
	e.wantWake(other, "open subscription")
	e.wantNoWake(sub, "closed subscription")
}
