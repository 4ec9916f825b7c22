// Package server is coordd's gRPC surface: it turns requests into calls of
// the domain packages (internal/lock, semaphore, election, session,
// limiter, idem, queue) and
// their errors into gRPC statuses, through one table (errors.go). Handlers
// never talk to a store and proto types never leave this package.
package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/election"
	"github.com/coordd/coordd/internal/envoyrl"
	"github.com/coordd/coordd/internal/hold"
	"github.com/coordd/coordd/internal/idem"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/lock"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/semaphore"
	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/tracing"
	"github.com/coordd/coordd/internal/waiter"
)

// Services are the domain services the handlers call.
type Services struct {
	Locks      *lock.Service
	Semaphores *semaphore.Service
	Elections  *election.Service
	Sessions   *session.Service
	Limiter    *limiter.Service
	// Envoy is Envoy's rate limit service (ShouldRateLimit).
	Envoy  *envoyrl.Service
	Idem   *idem.Service
	Queues *queue.Service
	// Waiting is the instance's one coordinator of waiting acquisitions,
	// shared by locks, semaphores and elections.
	Waiting *hold.Waiters
	// Drain, when done, ends waits, KeepAlive and Observe streams so that
	// the server can stop gracefully.
	Drain context.Context
}

// Wait returns when the services' background work has ended: the waits
// and the clean-ups of uncertain grants end when Drain is closed. Call it
// after closing Drain and stopping the server, before closing the store;
// it also releases the limiter's local limiters.
func (s Services) Wait() {
	s.Waiting.Close()
	s.Locks.Wait()
	s.Semaphores.Wait()
	s.Elections.Wait()
	s.Limiter.Close()
}

// Config holds every domain package's rules.
type Config struct {
	Lock      lock.Config
	Semaphore semaphore.Config
	Election  election.Config
	Session   session.Config
	Limiter   limiter.Config
	Policies  map[string]limiter.Policy
	// Envoy is envoy ratelimit's configuration (ratelimit.envoy_config);
	// nil: none (ShouldRateLimit answers FAILED_PRECONDITION).
	Envoy *envoyrl.Config
	Idem  idem.Config
	Queue queue.Config
}

// DefaultConfig returns every domain package's default configuration, with
// no rate-limit policies.
func DefaultConfig() Config {
	return Config{
		Lock: lock.DefaultConfig(), Semaphore: semaphore.DefaultConfig(), Election: election.DefaultConfig(),
		Session: session.DefaultConfig(), Limiter: limiter.DefaultConfig(),
		Idem: idem.DefaultConfig(), Queue: queue.DefaultConfig(),
	}
}

// NewServices builds the domain services over st, if cfg is valid
// (Config.Validate). clk should tell the store's time; waits and
// KeepAlive streams end when drainCtx is done (the daemon cancels it when
// it drains).
func NewServices(st store.Store, clk clock.Clock, cfg Config, drainCtx context.Context) (Services, error) {
	if err := cfg.Validate(); err != nil {
		return Services{}, err
	}
	drain := waiter.Drain(drainCtx.Done())
	lim, err := limiter.New(st, cfg.Limiter, cfg.Policies, limiter.WithClock(clk), limiter.WithDrain(drain))
	if err != nil {
		return Services{}, err
	}
	envoy := envoyrl.NewService(st, cfg.Limiter.CheckLimit)
	if err := envoy.SetConfig(cfg.Envoy); err != nil {
		return Services{}, err
	}
	waiting := hold.NewWaiters(st, st, drain)
	return Services{
		Envoy:      envoy,
		Locks:      lock.New(st, waiting, clk, cfg.Lock, drain),
		Semaphores: semaphore.New(st, waiting, clk, cfg.Semaphore, drain),
		Elections:  election.New(st, waiting, clk, cfg.Election, drain),
		Sessions:   session.New(st, st, cfg.Session),
		Limiter:    lim,
		Idem:       idem.New(st, st, cfg.Idem, drain),
		Queues:     queue.New(st, st, clk, cfg.Queue, drain),
		Waiting:    waiting,
		Drain:      drainCtx,
	}, nil
}

// Options are the server's optional parts.
type Options struct {
	Log     *slog.Logger     // nil: slog.Default()
	Metrics *metrics.Metrics // nil: none
	// Auth authenticates callers and gives them their namespace; nil: auth
	// off, every caller in DefaultNamespace.
	Auth   *Authenticator
	Limits Limits
	// Interceptors that run outside all of coordd's, so that they see the
	// final status of every call (Prometheus server metrics).
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
	// More server options (credentials, message sizes, stream limits).
	ServerOptions []grpc.ServerOption
	// Tracer, if set, gives every call of coordd's services a server span
	// (package tracing), continuing the client's trace (W3C trace context).
	// Health and reflection calls get none: probes every few seconds would
	// crowd out the traces and touch no store. nil: tracing off, no stats
	// handler. The store's spans are the store's (tracing.NewStore).
	Tracer trace.TracerProvider
	// Local, if set, is made an in-process client of the services New
	// registers (see Local), for the operator's console.
	Local *Local
	// InProcess, if set, is made an in-process client of the services New
	// registers that goes through every interceptor a gRPC call does,
	// authentication included (see InProcess), for the HTTP/JSON gateway.
	InProcess *InProcess
	// StoreLatency, if set, sheds new work (new sessions, calls that would
	// wait, Observe streams) with OVERLOADED while the store answers
	// slowly; the store's observer feeds it. nil: no shedding.
	StoreLatency *StoreLatency
	// Activity, if set, counts each queue's messages by minute for the
	// console (NewActivity; the caller runs its Run).
	Activity *Activity
}

// New returns a gRPC server with coordd's services, the health service
// (reporting SERVING for the server and each service) and reflection
// registered.
//
// Every call goes through, outermost first: with o.Tracer, the stats
// handler that gives it its span (package tracing); the call log (one line when the
// call ends: method, code, duration, namespace — never a payload, token or
// receipt; calllog.go); o.Unary/o.Stream; the latency of unary calls, a
// call that asks to wait apart (latency.go); panic recovery (a panic is
// logged and counted, and the client gets INTERNAL with nothing of it);
// authentication, which gives the call its namespace (health and
// reflection need none); the limits against abuse; and the mapping of
// domain errors to statuses.
func New(svc Services, o Options) (*grpc.Server, *health.Server) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	e := errorMapper{log: o.Log, metrics: o.Metrics, hideStore: o.Auth != nil}
	c := calls{auth: o.Auth, metrics: o.Metrics, gate: &gate{limits: o.Limits, counts: map[gateKey]int{}, conns: map[gateKey]int{}}, latency: o.StoreLatency}
	recoveryOpt := recovery.WithRecoveryHandlerContext(e.recovered)
	needsAuth := selector.MatchFunc(func(_ context.Context, cm interceptors.CallMeta) bool {
		return cm.Service != healthpb.Health_ServiceDesc.ServiceName && !strings.HasPrefix(cm.Service, "grpc.reflection.")
	})
	cl := callLog{log: o.Log}
	unary := append([]grpc.UnaryServerInterceptor{cl.unary}, o.Unary...)
	unary = append(unary,
		callTimer{o.Metrics}.unary,
		recovery.UnaryServerInterceptor(recoveryOpt),
		selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(c.authenticate), needsAuth),
		c.limitUnary,
		e.unary,
	)
	stream := append([]grpc.StreamServerInterceptor{cl.stream}, o.Stream...)
	stream = append(stream,
		recovery.StreamServerInterceptor(recoveryOpt),
		selector.StreamServerInterceptor(c.authStream, needsAuth),
		c.limitStream,
		e.stream,
	)
	opts := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}, o.ServerOptions...)
	var traced map[string]bool // coordd's methods, set below before the server serves
	if o.Tracer != nil {
		opts = append(opts, tracing.ServerOption(o.Tracer, func(method string) bool { return traced[method] }))
	}
	gs := grpc.NewServer(opts...)
	m := o.Metrics
	var services []localService
	register := func(desc *grpc.ServiceDesc, impl any) {
		gs.RegisterService(desc, impl)
		services = append(services, localService{desc, impl})
	}
	names := newQueueNames(maxQueueNames)
	register(&coordv1.LockService_ServiceDesc, &lockServer{svc: svc.Locks, metrics: m})
	register(&coordv1.SemaphoreService_ServiceDesc, &semaphoreServer{svc: svc.Semaphores, metrics: m})
	register(&coordv1.ElectionService_ServiceDesc, &electionServer{svc: svc.Elections, drain: svc.Drain.Done(), metrics: m})
	register(&coordv1.SessionService_ServiceDesc, &sessionServer{svc: svc.Sessions, drain: svc.Drain, final: e.keepAliveStatus, metrics: m, rate: o.Limits.MaxStreamMessageRate, max: o.Limits.MaxSessions, latency: o.StoreLatency})
	register(&coordv1.RateLimitService_ServiceDesc, &rateLimitServer{svc: svc.Limiter, metrics: m, log: o.Log})
	register(&rlsv3.RateLimitService_ServiceDesc, &envoyRateLimitServer{svc: svc.Envoy, metrics: m})
	register(&coordv1.IdempotencyService_ServiceDesc, &idempotencyServer{svc: svc.Idem, metrics: m})
	register(&coordv1.QueueService_ServiceDesc, &queueServer{svc: svc.Queues, metrics: m, names: names, activity: o.Activity})
	traced = fullMethods(gs)
	if o.Local != nil {
		*o.Local = *newLocal(services, names, c.gate, cl, callTimer{o.Metrics}.unary, recovery.UnaryServerInterceptor(recoveryOpt), c.limitUnary, e.unary)
	}
	if o.InProcess != nil {
		*o.InProcess = *newInProcess(services, unary)
	}
	hs := health.NewServer()
	for name := range gs.GetServiceInfo() {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	initMethods(gs, m)
	return gs, hs
}

// fullMethods is the set of the full method names (/coord.v1.LockService/Lock)
// of the services registered on gs.
func fullMethods(gs *grpc.Server) map[string]bool {
	m := make(map[string]bool)
	for svc, info := range gs.GetServiceInfo() {
		for _, method := range info.Methods {
			m["/"+svc+"/"+method.Name] = true
		}
	}
	return m
}

// callInfo is what the inner interceptors learn of a call that the outer
// ones report: its namespace, once authenticated, and the whole text of a
// store failure that the client was told of without it (errorMapper).
type callInfo struct{ ns, storeErr string }

type callInfoKey struct{}

func infoOf(ctx context.Context) *callInfo {
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	return ci
}

// contextStream is a ServerStream with another context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }

// calls holds the per-call interceptors: authentication and limits.
type calls struct {
	auth    *Authenticator
	metrics *metrics.Metrics
	gate    *gate
	latency *StoreLatency // nil: no shedding
}

// authenticate is the auth interceptors' function: it gives the call its
// namespace or refuses it.
func (c calls) authenticate(ctx context.Context) (context.Context, error) {
	ns, err := c.auth.namespaceOf(ctx)
	if err != nil {
		var ae *authError
		if errors.As(err, &ae) {
			c.metrics.AuthFailure(ae.reason)
			return nil, withDetails(ae.code, ae.msg, ae.reason, nil)
		}
		return nil, err
	}
	if ci := infoOf(ctx); ci != nil {
		ci.ns = ns
	}
	return WithNamespace(ctx, ns), nil
}

// authStream authenticates a stream as authenticate does, and follows it
// while it runs: a reload that revokes its credential ends it with
// UNAUTHENTICATED at once (Authenticator.follow). The handler sees its
// context end, and returns; what it returns is replaced by that status.
func (c calls) authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := c.authenticate(ss.Context())
	if err != nil {
		return err
	}
	if c.auth != nil {
		var stop func()
		ctx, stop = c.auth.follow(ctx, credentialOf(ctx), namespace(ctx))
		defer stop()
	}
	err = h(srv, &contextStream{ServerStream: ss, ctx: ctx})
	if r := revoked(ctx); r != nil {
		c.metrics.AuthFailure("REVOKED")
		return r
	}
	return err
}

// revoked returns the status of a stream whose credential a reload
// revoked (its context's cause), or nil.
func revoked(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errRevoked) {
		return withDetails(codes.Unauthenticated, errRevoked.Error(), "UNAUTHENTICATED", map[string]string{"cause": "revoked"})
	}
	return nil
}

func (c calls) limitUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !waits(req) {
		return h(ctx, req)
	}
	if err := c.latency.shed(); err != nil {
		c.metrics.Rejected("store_latency")
		return nil, err
	}
	leave, err := c.gate.enter(ctx, namespace(ctx), false)
	if err != nil {
		c.metrics.Rejected("too_many_waiters")
		return nil, err
	}
	defer leave()
	return h(ctx, req)
}

func (c calls) limitStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	var leave func()
	var err error
	switch info.FullMethod {
	case coordv1.SessionService_KeepAlive_FullMethodName:
		if leave, err = c.gate.enter(ss.Context(), namespace(ss.Context()), true); err != nil {
			c.metrics.Rejected("too_many_streams")
			return err
		}
	case coordv1.ElectionService_Observe_FullMethodName:
		// An observer is a long wait: it counts among the waiting calls.
		if err = c.latency.shed(); err != nil {
			c.metrics.Rejected("store_latency")
			return err
		}
		if leave, err = c.gate.enter(ss.Context(), namespace(ss.Context()), false); err != nil {
			c.metrics.Rejected("too_many_waiters")
			return err
		}
	default:
		return h(srv, ss) // health Watch, reflection: not sessions
	}
	defer leave()
	return h(srv, ss)
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
