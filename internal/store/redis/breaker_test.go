package redis

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestBreakerIgnoresTimeoutsOfASlowNode: timeouts of commands sent before
// the node last answered another command do not open its breaker (it is
// slow, saturated — not gone); timeouts with no answer since they were sent
// do, and so do refused connections whatever else the node answered.
func TestBreakerIgnoresTimeoutsOfASlowNode(t *testing.T) {
	ctx := context.Background()
	refused := fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)
	for _, tc := range []struct {
		name     string
		answered bool  // the node answered a command after the failing ones were sent
		err      error // each failure
		open     bool
	}{
		{"timeouts while the node answers others", true, context.DeadlineExceeded, false},
		{"timeouts with no answer since", false, context.DeadlineExceeded, true},
		{"refused connections while the node answers others", true, refused, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &breaker{opts: BreakerOptions{Failures: 3, Cooldown: time.Minute}}
			sent := time.Now()
			if tc.answered {
				time.Sleep(time.Millisecond)
				b.record(ctx, nil, time.Now()) // another command, answered while these wait
			}
			for range 10 {
				if !b.allow() {
					break
				}
				b.record(ctx, tc.err, sent)
			}
			if b.isOpen() != tc.open {
				t.Fatalf("breaker open = %v after 10 failures (%v), want %v", b.isOpen(), tc.err, tc.open)
			}
		})
	}
	if !timedOut(context.DeadlineExceeded) || timedOut(errors.New("EOF")) {
		t.Fatal("timedOut tells a timeout from another failure wrongly")
	}
}
