package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Local calls the server's own handlers in-process, as a client in a
// namespace that the caller has already authenticated (the operator's
// console, package console). A call goes through the same handlers as over
// gRPC, and through the same unary interceptors except authentication: the
// call log, latency metrics, panic recovery, the limits and the error table.
// So validation, limits, errors and namespace isolation are the API's.
// Streams are not served (Unimplemented). New fills a Local given in
// Options.Local; the zero Local has no services.
type Local struct {
	services map[string]localService // by full service name
	names    *queueNames
	gate     *gate
	chain    []grpc.UnaryServerInterceptor
	log      callLog
}

// localService is one registered service: what its handlers are and whom
// they are called on.
type localService struct {
	desc *grpc.ServiceDesc
	impl any
}

func newLocal(services []localService, names *queueNames, g *gate, cl callLog, chain ...grpc.UnaryServerInterceptor) *Local {
	l := &Local{services: map[string]localService{}, names: names, gate: g, log: cl, chain: chain}
	for _, s := range services {
		l.services[s.desc.ServiceName] = s
	}
	return l
}

// Conn returns a connection whose calls run in namespace ns, for the
// generated clients (coordv1.NewQueueServiceClient(l.Conn(ns))). The caller
// must have authenticated ns: Local does not.
func (l *Local) Conn(ns string) grpc.ClientConnInterface { return localConn{l, ns} }

// Queues lists, by name, the queues of ns this instance has served
// (Enqueue, Claim, Stats or Redrive succeeded) since it started: at most
// the maxQueueNames most recently served. The store keeps no list of
// queues.
func (l *Local) Queues(ns string) []string {
	if l.names == nil {
		return nil
	}
	return l.names.list(ns)
}

// StreamCounts are a namespace's open streams and waiting calls on this
// instance.
type StreamCounts struct {
	// KeepAlive streams, each keeping one live session.
	KeepAlive int
	// Waiting calls (Lock, Acquire, Campaign, Claim… with a wait) and
	// Observe streams.
	Waiting int
}

// Streams reports, by namespace, the streams and waiting calls open on this
// instance now: the counts the limits keep.
func (l *Local) Streams() map[string]StreamCounts {
	out := map[string]StreamCounts{}
	if l.gate == nil {
		return out
	}
	l.gate.mu.Lock()
	defer l.gate.mu.Unlock()
	for k, n := range l.gate.counts {
		c := out[k.ns]
		if k.stream {
			c.KeepAlive += n
		} else {
			c.Waiting += n
		}
		out[k.ns] = c
	}
	return out
}

type localConn struct {
	l  *Local
	ns string
}

// Invoke calls method's handler with a copy of args, in the conn's
// namespace, and copies its answer into reply.
func (c localConn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	return invoke(WithNamespace(ctx, c.ns), c.l.services, method, args, reply, c.interceptor(c.ns))
}

// invoke calls method's handler among services with a copy of args,
// through interceptor, and copies its answer into reply.
func invoke(ctx context.Context, services map[string]localService, method string, args, reply any, interceptor grpc.UnaryServerInterceptor) error {
	in, ok := args.(proto.Message)
	out, ok2 := reply.(proto.Message)
	if !ok || !ok2 {
		return status.Errorf(codes.Internal, "local call %s: not protobuf messages", method)
	}
	svc, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	s, ok := services[svc]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown service %s", svc)
	}
	i := slices.IndexFunc(s.desc.Methods, func(m grpc.MethodDesc) bool { return m.MethodName == name })
	if i < 0 {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	dec := func(v any) error {
		m, ok := v.(proto.Message)
		if !ok {
			return fmt.Errorf("local call %s: request %T is not a protobuf message", method, v)
		}
		proto.Reset(m)
		proto.Merge(m, in)
		return nil
	}
	resp, err := s.desc.Methods[i].Handler(s.impl, ctx, dec, interceptor)
	if err != nil {
		return err
	}
	m, ok := resp.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "local call %s: response %T is not a protobuf message", method, resp)
	}
	proto.Reset(out)
	proto.Merge(out, m)
	return nil
}

// interceptor is the conn's chain: the call log, which learns the
// namespace as authentication would tell it, then the others in order.
func (c localConn) interceptor(ns string) grpc.UnaryServerInterceptor {
	chain := append([]grpc.UnaryServerInterceptor{c.l.log.unary, func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if ci := infoOf(ctx); ci != nil {
			ci.ns = ns
		}
		return h(ctx, req)
	}}, c.l.chain...)
	return chainUnary(chain)
}

// chainUnary is chain as one interceptor, the first outermost (as
// grpc.ChainUnaryInterceptor).
func chainUnary(chain []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		var next func(i int) grpc.UnaryHandler
		next = func(i int) grpc.UnaryHandler {
			if i == len(chain) {
				return h
			}
			return func(ctx context.Context, req any) (any, error) { return chain[i](ctx, req, info, next(i+1)) }
		}
		return next(0)(ctx, req)
	}
}

// NewStream: streams are not served locally.
func (c localConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "streams are not served in-process")
}

// maxQueueNames bounds the queue names kept per namespace.
const maxQueueNames = 1000

// queueNames records the names of the queues served, per namespace, the
// most recently served kept when there are more than max.
type queueNames struct {
	max  int
	mu   sync.Mutex
	tick uint64
	byNS map[string]map[string]uint64 // name -> when last served (tick)
}

func newQueueNames(max int) *queueNames {
	return &queueNames{max: max, byNS: map[string]map[string]uint64{}}
}

func (q *queueNames) saw(ns, name string) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.byNS[ns]
	if m == nil {
		m = map[string]uint64{}
		q.byNS[ns] = m
	}
	q.tick++
	m[name] = q.tick
	if len(m) > q.max {
		oldest, at := "", uint64(0)
		for n, t := range m {
			if oldest == "" || t < at {
				oldest, at = n, t
			}
		}
		delete(m, oldest)
	}
}

func (q *queueNames) list(ns string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.byNS[ns]))
	for n := range q.byNS[ns] {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
