package storetest

import (
	"fmt"
	"time"

	"github.com/coordd/coordd/internal/store"
)

// wakeTimeout bounds the real time the suite waits for a wake-up.
const wakeTimeout = 5 * time.Second

// quietPeriod is how long the suite watches for a wake-up that must not come.
const quietPeriod = 200 * time.Millisecond

func subscribeTests() []test {
	return []test{
		{"ReleaseWakes", subReleaseWakes},
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

func subReleaseWakes(e *env) {
	n := e.name("lock")
	sub := e.subscribe(store.LockTopic(n))
	tok, _ := e.lock(n, "alice", time.Minute)
	drain(sub)
	if !e.release(n, tok) {
		e.Fatal("release: false")
	}
	e.wantWake(sub, "LockTopic after ReleaseLock")
}

// subNotMissed releases right after Subscribe returns, many times over, on
// a new topic each time (the first subscription of a topic is the one a
// backend may have to set up).
func subNotMissed(e *env) {
	for i := range 20 {
		n := e.name(fmt.Sprint("lock", i))
		tok, _ := e.lock(n, "alice", time.Minute)
		sub, err := e.s.Subscribe(e.ctx, store.LockTopic(n))
		noErr(e, "Subscribe", err)
		if !e.release(n, tok) {
			e.Fatal("release: false")
		}
		e.wantWake(sub, fmt.Sprint("release ", i, " right after Subscribe"))
		sub.Close()
	}
}

func subEverySubscriber(e *env) {
	n := e.name("lock")
	subs := []*store.Subscription{e.subscribe(store.LockTopic(n)), e.subscribe(store.LockTopic(n)), e.subscribe(store.LockTopic(n))}
	tok, _ := e.lock(n, "alice", time.Minute)
	for _, s := range subs {
		drain(s)
	}
	if !e.release(n, tok) {
		e.Fatal("release: false")
	}
	for i, s := range subs {
		e.wantWake(s, fmt.Sprint("subscriber ", i))
	}
}

func subCloseStops(e *env) {
	n := e.name("lock")
	sub := e.subscribe(store.LockTopic(n))
	other := e.subscribe(store.LockTopic(n)) // keeps the topic alive
	tok, _ := e.lock(n, "alice", time.Minute)
	sub.Close()
	sub.Close() // safe twice
	drain(sub)  // a wake-up buffered before Close
	drain(other)
	if !e.release(n, tok) {
		e.Fatal("release: false")
	}
	e.wantWake(other, "open subscription")
	e.wantNoWake(sub, "closed subscription")
}
