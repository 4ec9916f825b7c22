// Package backendtest opens the store a test runs on, by the name of its
// kind: the tests that run on every backend (internal/server's acceptance
// tests, the client package's) take it from a -coordd.backend flag.
//
// Only tests import it.
package backendtest

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/redistest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
	"github.com/coordd/coordd/internal/store/redis"
	"github.com/coordd/coordd/internal/token"
	"github.com/coordd/coordd/internal/tracing"
)

// Backend returns a store of the kind named (memory, redis: the standalone
// test server, or cluster: the test Cluster; see redistest) with clock c,
// and its Redis key prefix: prefix, or a fresh one if "" (a prefix of its
// own keeps each test apart on a shared Redis). The store is the caller's to
// close.
func Open(tb testing.TB, kind string, c clock.Clock, prefix string) (store.Store, string) {
	tb.Helper()
	return OpenTraced(tb, kind, c, prefix, nil)
}

// OpenTraced is Open with store spans from tp, as coordd makes them with
// tracing on: the memory store wrapped by tracing.WrapStore, the Redis store
// with redis.Config.Trace. tp nil: Open.
func OpenTraced(tb testing.TB, kind string, c clock.Clock, prefix string, tp trace.TracerProvider) (store.Store, string) {
	tb.Helper()
	var addrs []string
	switch kind {
	case "memory":
		return tracing.WrapStore(memory.New(memory.Options{Clock: c}), tracing.NewStore(tp, "memory")), ""
	case "redis":
		addrs = []string{redistest.Standalone(tb)}
	case "cluster":
		addrs = redistest.Cluster(tb)
	default:
		tb.Fatalf("backend %q: want memory, redis or cluster", kind)
	}
	mode := "standalone"
	if len(addrs) > 1 {
		mode = "cluster"
	}
	if prefix == "" {
		prefix = "t" + token.New()[:12]
	}
	cfg := redis.Config{Mode: mode, Addrs: addrs, Prefix: prefix, Timeout: 5 * time.Second, MaxBatch: 64, Trace: tracing.NewStore(tp, "redis")}
	if _, fake := c.(*clock.Fake); fake {
		cfg.Clock = c
	}
	st, err := redis.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return st, prefix
}
