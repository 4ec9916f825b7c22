// Package server is coordd's gRPC surface: it turns requests into calls of
// the domain packages (internal/lock, session, limiter, idem, queue) and
// their errors into gRPC statuses, through one table (errors.go). Handlers
// never talk to a store and proto types never leave this package.
package server

import (
	"context"
	"log/slog"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/idem"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/waiter"
)

// Services are the domain services the handlers call.
type Services struct {
	Locks    *lock.Service
	Sessions *session.Service
	Limiter  *limiter.Service
	Idem     *idem.Service
	Queues   *queue.Service
	// Drain, when closed, ends waits and KeepAlive streams so that the
	// server can stop gracefully.
	Drain waiter.Drain
}

// Config holds every domain package's rules.
type Config struct {
	Lock     lock.Config
	Session  session.Config
	Limiter  limiter.Config
	Policies map[string]limiter.Policy
	Idem     idem.Config
	Queue    queue.Config
}

// NewServices builds the domain services over st. clk should tell the
// store's time; waits end when drain is closed.
func NewServices(st store.Store, clk clock.Clock, cfg Config, drain waiter.Drain) (Services, error) {
	lim, err := limiter.New(st, cfg.Limiter, cfg.Policies)
	if err != nil {
		return Services{}, err
	}
	return Services{
		Locks:    lock.New(st, st, cfg.Lock, drain),
		Sessions: session.New(st, cfg.Session),
		Limiter:  lim,
		Idem:     idem.New(st, st, cfg.Idem, drain),
		Queues:   queue.New(st, st, clk, cfg.Queue, drain),
		Drain:    drain,
	}, nil
}

// Options are the server's optional parts.
type Options struct {
	Log *slog.Logger // nil: slog.Default()
	// Interceptors that run outside coordd's own (which map errors and
	// recover panics), so that they see the final status: metrics, logging.
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
	// More server options (credentials, limits).
	ServerOptions []grpc.ServerOption
}

// New returns a gRPC server with coordd's services, the health service
// (reporting SERVING for the server and each service) and reflection
// registered.
func New(svc Services, o Options) (*grpc.Server, *health.Server) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	e := errorMapper{log: o.Log}
	unary := append(append([]grpc.UnaryServerInterceptor{}, o.Unary...),
		e.unary, recovery.UnaryServerInterceptor(recovery.WithRecoveryHandlerContext(e.recovered)))
	stream := append(append([]grpc.StreamServerInterceptor{}, o.Stream...),
		e.stream, recovery.StreamServerInterceptor(recovery.WithRecoveryHandlerContext(e.recovered)))
	opts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}, o.ServerOptions...)
	gs := grpc.NewServer(opts...)
	coordv1.RegisterLockServiceServer(gs, &lockServer{svc: svc.Locks})
	coordv1.RegisterSessionServiceServer(gs, &sessionServer{svc: svc.Sessions, drain: svc.Drain})
	coordv1.RegisterRateLimitServiceServer(gs, &rateLimitServer{svc: svc.Limiter})
	coordv1.RegisterIdempotencyServiceServer(gs, &idempotencyServer{svc: svc.Idem})
	coordv1.RegisterQueueServiceServer(gs, &queueServer{svc: svc.Queues})
	hs := health.NewServer()
	for name := range gs.GetServiceInfo() {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	return gs, hs
}

// DefaultNamespace is the namespace of callers when auth is off.
const DefaultNamespace = "default"

type namespaceKey struct{}

// WithNamespace returns ctx carrying the caller's namespace.
func WithNamespace(ctx context.Context, ns string) context.Context {
	return context.WithValue(ctx, namespaceKey{}, ns)
}

// namespace is the caller's namespace: the one an auth interceptor put in
// ctx, else DefaultNamespace.
func namespace(ctx context.Context) string {
	if ns, ok := ctx.Value(namespaceKey{}).(string); ok {
		return ns
	}
	return DefaultNamespace
}
