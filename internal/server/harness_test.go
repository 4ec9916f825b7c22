package server_test

import (
	"context"
	"flag"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/backendtest"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/server/servertest"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend chooses the store every harness runs on: the acceptance tests of
// this package run on each backend (scripts/test.sh runs them on all three).
var backend = flag.String("coordd.backend", "memory", "store of the tests: memory, redis (standalone) or cluster")

// epoch is where fake clocks start: a whole number of hours, so that windows
// of any period that divides an hour start on it.
var epoch = time.Unix(1_800_000_000, 0)

// config is what a test may change about its harness.
type config struct {
	fake     bool          // drive the store with a fake clock
	services server.Config // the domain services' configuration
	unary    []grpc.UnaryServerInterceptor
	register func(*grpc.Server) // registers more services before serving
	// serverOpts are more server.Options.ServerOptions (e.g. message sizes).
	serverOpts []grpc.ServerOption
	// wrap, if not nil, wraps the store the services use (h.store stays the
	// bare memory store), e.g. in a storetest.Faulty.
	wrap func(store.Store) store.Store
	// auth, limits, metrics and log are server.Options' (nil/zero: auth off,
	// no limits, no metrics, logs discarded).
	auth    *server.Authenticator
	limits  server.Limits
	metrics *metrics.Metrics
	log     *slog.Logger
	// shared, if not nil, is another harness whose backend this one
	// shares, as a second coordd instance: the same memory store, or a
	// Redis store of its own on the same Redis and key prefix.
	shared *harness
	// tracer, if not nil, traces the server and the store (server.Options.Tracer,
	// backendtest.OpenTraced).
	tracer trace.TracerProvider
	// local, if not nil, is server.Options.Local.
	local *server.Local
	// inProcess, if not nil, is server.Options.InProcess.
	inProcess *server.InProcess
	// latency, if not nil, is server.Options.StoreLatency.
	latency *server.StoreLatency
}

// harness is a coordd server on the memory store, on a loopback listener,
// with clients for every service.
type harness struct {
	clock      *clock.Fake   // nil unless config.fake
	st         store.Store   // the backend's store, unwrapped
	store      *memory.Store // the same, on the memory backend; else nil
	conn       *grpc.ClientConn
	locks      coordv1.LockServiceClient
	semaphores coordv1.SemaphoreServiceClient
	elections  coordv1.ElectionServiceClient
	sessions   coordv1.SessionServiceClient
	limits     coordv1.RateLimitServiceClient
	idem       coordv1.IdempotencyServiceClient
	queues     coordv1.QueueServiceClient
	prefix     string // the Redis key prefix (Redis backends)
}

func withFakeClock(c *config) { c.fake = true }

func newHarness(t testing.TB, opts ...func(*config)) *harness {
	t.Helper()
	cfg := config{services: server.DefaultConfig()}
	cfg.services.Session.MinTTL = 10 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	h := &harness{}
	var c clock.Clock = clock.Real{}
	if cfg.fake {
		h.clock = clock.NewFake(epoch)
		c = h.clock
	}
	switch {
	case cfg.shared == nil:
		h.st, h.prefix = backendtest.OpenTraced(t, *backend, c, "", cfg.tracer)
	case cfg.shared.store != nil:
		h.st = nopClose{cfg.shared.st} // one memory store: its first harness closes it
	default:
		h.st, h.prefix = newBackend(t, c, cfg.shared.prefix)
	}
	h.store, _ = h.st.(*memory.Store)
	st := h.st
	if cfg.wrap != nil {
		st = cfg.wrap(st)
	}
	t.Cleanup(func() { _ = h.st.Close() }) // after the server stops: cleanups run last first
	h.conn = servertest.Serve(t, st, c,
		servertest.WithConfig(func(sc *server.Config) { *sc = cfg.services }),
		servertest.WithServerOptions(func(o *server.Options) {
			if cfg.log != nil {
				o.Log = cfg.log
			}
			o.Unary, o.Auth, o.Limits, o.Metrics, o.ServerOptions = cfg.unary, cfg.auth, cfg.limits, cfg.metrics, cfg.serverOpts
			o.Tracer = cfg.tracer
			o.Local = cfg.local
			o.InProcess = cfg.inProcess
			o.StoreLatency = cfg.latency
		}),
		servertest.WithRegister(cfg.register))
	h.locks = coordv1.NewLockServiceClient(h.conn)
	h.semaphores = coordv1.NewSemaphoreServiceClient(h.conn)
	h.elections = coordv1.NewElectionServiceClient(h.conn)
	h.sessions = coordv1.NewSessionServiceClient(h.conn)
	h.limits = coordv1.NewRateLimitServiceClient(h.conn)
	h.idem = coordv1.NewIdempotencyServiceClient(h.conn)
	h.queues = coordv1.NewQueueServiceClient(h.conn)
	return h
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// wantStatus checks that err is a status with code and, unless reason is "",
// an ErrorInfo of domain coordd with reason. It returns the status.
func wantStatus(t testing.TB, err error, code codes.Code, reason string) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || err == nil {
		t.Fatalf("got error %v, want status %v", err, code)
	}
	if st.Code() != code {
		t.Fatalf("got %v (%s), want %v", st.Code(), st.Message(), code)
	}
	if reason == "" {
		return st
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetDomain() != server.ErrorDomain || info.GetReason() != reason {
				t.Fatalf("got ErrorInfo %s/%s, want %s/%s", info.GetDomain(), info.GetReason(), server.ErrorDomain, reason)
			}
			return st
		}
	}
	t.Fatalf("status %v has no ErrorInfo", st)
	return nil
}

func timestampAt(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// nopClose is a store whose Close does nothing.
type nopClose struct{ store.Store }

func (nopClose) Close() error { return nil }

// newBackend returns a store of the -coordd.backend kind with clock c, and
// its Redis key prefix (prefix, or a new one if empty).
func newBackend(t testing.TB, c clock.Clock, prefix string) (store.Store, string) {
	return backendtest.Open(t, *backend, c, prefix)
}
