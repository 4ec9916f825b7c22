package redis

import (
	"errors"
	"strings"
	"testing"

	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
)

// TestChannelOfEveryTopicKind checks that each of store's topic functions
// maps to its object's key tag (so that its channel shares the object's
// slot), and that a topic of any other kind is an error, which names the
// kind but not the rest of the topic (a session ID there never reaches a
// log), where channel, for the store's own calls, panics.
func TestChannelOfEveryTopicKind(t *testing.T) {
	k := keys{prefix: "p"}
	const name = "ns:a{b}:c"
	for topic, tag := range map[string]string{
		store.ElectionTopic(name): k.holdBase(store.HoldElection, name),
		store.IdemTopic(name):     k.idem(name),
		store.QueueTopic(name):    k.tag("q", name),
		store.SessionTopic(name):  k.session(name)[0],
	} {
		ch, err := k.topicChannel(topic)
		if err != nil || ch != tag+":ev" {
			t.Errorf("topicChannel(%q) = %q, %v, want %q", topic, ch, err, tag+":ev")
		}
		if ch := k.channel(topic); ch != tag+":ev" {
			t.Errorf("channel(%q) = %q, want %q", topic, ch, tag+":ev")
		}
	}
	for _, kind := range []store.HoldKind{store.HoldLock, store.HoldSemaphore, store.HoldElection} {
		want := k.holdBase(kind, name) + ":w:0123456789abcdef"
		if ch, err := k.topicChannel(store.WaitTopic(kind, name, "0123456789abcdef")); err != nil || ch != want {
			t.Errorf("topicChannel(WaitTopic(%s)) = %q, %v, want %q", kind, ch, err, want)
		}
	}
	if len(topicTags) != 5 {
		t.Errorf("topicTags has %d kinds, want the 5 of store's topic functions", len(topicTags))
	}
	for _, topic := range []string{"", "secret", "bogus:secret", "lock:secret", "Lock:secret", "q:secret", "l:secret", ":secret", " lock:secret"} {
		ch, err := k.topicChannel(topic)
		if !errors.Is(err, errUnknownTopic) || ch != "" {
			t.Errorf("topicChannel(%q) = %q, %v, want errUnknownTopic", topic, ch, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("topicChannel(%q)'s error %q quotes the topic's name", topic, err)
		}
		func() {
			defer func() {
				if p := recover(); p == nil {
					t.Errorf("channel(%q) did not panic", topic)
				}
			}()
			_ = k.channel(topic)
		}()
	}
}

// TestSubscribeUnknownTopic checks that Subscribe to a topic none of
// store's topic functions made fails at once, as no outage (retrying cannot
// help), and leaves no subscription behind.
func TestSubscribeUnknownTopic(t *testing.T) {
	s, _, _ := rgStandalone(t, redistest.Standalone(t), nil, Config{})
	sub, err := s.Subscribe(t.Context(), "bogus:x")
	if !errors.Is(err, errUnknownTopic) || errors.Is(err, store.ErrUnavailable) || sub != nil {
		t.Fatalf("Subscribe(bogus:x) = %v, %v, want errUnknownTopic", sub, err)
	}
	if n := s.subs.hub.Topics(); n != 0 {
		t.Errorf("%d topics subscribed after the failure, want 0", n)
	}
	sub, err = s.Subscribe(t.Context(), store.ElectionTopic("ns:l"))
	if err != nil {
		t.Fatalf("Subscribe(a lock topic) after it: %v", err)
	}
	sub.Close()
}
