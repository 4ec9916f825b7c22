package store_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coordd/coordd/internal/store"
)

// woken reports whether sub has a wake-up pending, consuming it.
func woken(sub *store.Subscription) bool {
	select {
	case <-sub.C():
		return true
	default:
		return false
	}
}

func TestHubNotifyWakesEverySubscriberOfTheTopic(t *testing.T) {
	var h store.Hub
	a1, first := h.Subscribe("a", nil)
	defer a1.Close()
	if !first {
		t.Error("first subscription of a: first = false")
	}
	a2, first := h.Subscribe("a", nil)
	defer a2.Close()
	if first {
		t.Error("second subscription of a: first = true")
	}
	b, first := h.Subscribe("b", nil)
	defer b.Close()
	if !first {
		t.Error("first subscription of b: first = false")
	}

	h.Notify("a")
	if !woken(a1) || !woken(a2) {
		t.Error("a subscriber of a was not woken by Notify(a)")
	}
	if woken(b) {
		t.Error("the subscriber of b was woken by Notify(a)")
	}
	h.Notify("c") // nobody listens: no effect
	if woken(a1) || woken(a2) || woken(b) {
		t.Error("Notify(c) woke a subscriber of another topic")
	}
}

func TestHubMergesUnreadWakeUps(t *testing.T) {
	var h store.Hub
	s, _ := h.Subscribe("t", nil)
	defer s.Close()
	for i := 0; i < 5; i++ {
		h.Notify("t") // must not block while the channel is full
	}
	if !woken(s) {
		t.Fatal("no wake-up after 5 Notify")
	}
	if woken(s) {
		t.Fatal("a second wake-up: unread wake-ups were not merged")
	}
	h.Notify("t")
	if !woken(s) {
		t.Fatal("no wake-up for a Notify after the channel was read")
	}
}

func TestHubCloseStopsDelivery(t *testing.T) {
	var h store.Hub
	s, _ := h.Subscribe("t", nil)
	other, _ := h.Subscribe("t", nil)
	defer other.Close()
	s.Close()
	h.Notify("t")
	if woken(s) {
		t.Error("a closed subscription was woken")
	}
	if !woken(other) {
		t.Error("closing one subscription stopped another's delivery")
	}
	s.Close() // idempotent
	h.Notify("t")
	if woken(s) {
		t.Error("a twice-closed subscription was woken")
	}
	if !woken(other) {
		t.Error("closing a subscription twice stopped another's delivery")
	}
}

func TestHubOnLast(t *testing.T) {
	var h store.Hub
	var calls atomic.Int32
	onLast := func() { calls.Add(1) }
	s1, first1 := h.Subscribe("t", onLast)
	s2, first2 := h.Subscribe("t", onLast)
	if !first1 || first2 {
		t.Fatalf("first = %v, %v; want true, false", first1, first2)
	}
	s1.Close()
	if n := calls.Load(); n != 0 {
		t.Fatalf("onLast ran %d times with a subscription left", n)
	}
	s1.Close()
	if n := calls.Load(); n != 0 {
		t.Fatalf("onLast ran %d times after closing the first subscription twice", n)
	}
	s2.Close()
	if n := calls.Load(); n != 1 {
		t.Fatalf("onLast ran %d times after the last subscription closed, want 1", n)
	}
	s2.Close()
	s1.Close()
	if n := calls.Load(); n != 1 {
		t.Fatalf("onLast ran %d times after repeated Close, want 1", n)
	}
	// The topic starts afresh: the next subscription is first again.
	s3, first3 := h.Subscribe("t", onLast)
	if !first3 {
		t.Error("a subscription after the last one closed: first = false")
	}
	s3.Close()
	if n := calls.Load(); n != 2 {
		t.Fatalf("onLast ran %d times in all, want 2", n)
	}
}

func TestHubOnLastNil(t *testing.T) {
	var h store.Hub
	s, _ := h.Subscribe("t", nil)
	s.Close() // must not call a nil onLast
}

func TestHubTopics(t *testing.T) {
	var h store.Hub
	if n := h.Topics(); n != 0 {
		t.Fatalf("Topics() of a new Hub = %d, want 0", n)
	}
	a1, _ := h.Subscribe("a", nil)
	a2, _ := h.Subscribe("a", nil)
	b, _ := h.Subscribe("b", nil)
	steps := []struct {
		do   func()
		want int
	}{
		{func() {}, 2},
		{a1.Close, 2},
		{b.Close, 1},
		{b.Close, 1},
		{a2.Close, 0},
	}
	for i, st := range steps {
		st.do()
		if n := h.Topics(); n != st.want {
			t.Errorf("step %d: Topics() = %d, want %d", i, n, st.want)
		}
	}
}

// TestHubConcurrent is for the race detector: subscribes, notifies and
// closes from many goroutines, and checks the hub ends empty with onLast run
// once per topic that emptied.
func TestHubConcurrent(t *testing.T) {
	var h store.Hub
	const topics, perTopic = 8, 16
	var lasts [topics]atomic.Int32
	var wg sync.WaitGroup
	var subs sync.Map
	for i := 0; i < topics; i++ {
		for j := 0; j < perTopic; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, _ := h.Subscribe(fmt.Sprint(i), func() { lasts[i].Add(1) })
				subs.Store(s, i)
				h.Notify(fmt.Sprint(i))
				h.Notify(fmt.Sprint((i + 1) % topics))
				_ = h.Topics()
			}()
		}
	}
	wg.Wait()
	if n := h.Topics(); n != topics {
		t.Fatalf("Topics() = %d, want %d", n, topics)
	}
	subs.Range(func(k, _ any) bool {
		s := k.(*store.Subscription)
		if !woken(s) {
			t.Error("a subscription was never woken")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Close()
			s.Close()
		}()
		return true
	})
	wg.Wait()
	if n := h.Topics(); n != 0 {
		t.Fatalf("Topics() after closing all = %d, want 0", n)
	}
	for i := range lasts {
		if n := lasts[i].Load(); n != 1 {
			t.Errorf("topic %d: onLast ran %d times, want 1", i, n)
		}
	}
}
