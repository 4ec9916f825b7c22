package memory_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		c := clock.NewFake(time.Unix(1_800_000_000, 0))
		s := memory.New(memory.Options{Clock: c})
		t.Cleanup(func() { _ = s.Close() })
		return storetest.Harness{Store: s, Clock: c}
	})
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
