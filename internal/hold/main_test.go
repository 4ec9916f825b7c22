package hold_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// long is a wait no test lets pass; prompt bounds how long a wake-up, a
// drain or a cancellation may take to end a wait.
const (
	long   = time.Minute
	prompt = 10 * time.Second
)

// hubSub delivers the wake-ups of a bare store.Hub: a test's own, apart
// from the store's.
type hubSub struct{ hub *store.Hub }

func (s *hubSub) Subscribe(_ context.Context, topic string) (*store.Subscription, error) {
	sub, _ := s.hub.Subscribe(topic, nil)
	return sub, nil
}
