package limiter

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/storetest"
)

// TestLocalStatesBounded: during an outage, a local policy's keys of many
// values (an address each) keep the local limiters at most
// max(deny_cache_size, 10,000) states, plus one check's worth of calls:
// they start afresh past it; and a cost above the local share is the
// store's error, not a denial whose retry_after never comes true.
func TestLocalStatesBounded(t *testing.T) {
	mem := memory.New(memory.Options{})
	t.Cleanup(func() { _ = mem.Close() })
	f := storetest.NewFaulty(mem)
	f.Set("Allow", storetest.Fault{Fail: true, Err: store.ErrUnavailable})
	cfg := DefaultConfig()
	cfg.DenyCacheSize, cfg.ExpectedInstances = 0, 2
	s, err := New(f, cfg, map[string]Policy{"p": {Limit: store.Limit{Algorithm: store.FixedWindow, Limit: 10, Period: time.Minute}, OnStoreFailure: FailLocal}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	most := 0
	for i := range 3 * localQuotas {
		res, err := s.Allow(context.Background(), Request{Key: "ip-" + strconv.Itoa(i), Policy: "p"})
		if err != nil || !res.Allowed || !res.Degraded {
			t.Fatalf("Allow %d during the outage = %+v, %v; want allowed locally", i, res, err)
		}
		most = max(most, s.local.st.Load().LimitStates())
	}
	if most > localQuotas+localCheckEvery {
		t.Fatalf("the local limiters held %d states, want at most %d", most, localQuotas+localCheckEvery)
	}
	if _, err := s.Allow(context.Background(), Request{Key: "k", Policy: "p", Cost: 6}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a cost of 6 above the local share of 5: %v, want the store's error", err)
	}
}
