package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// InProcess calls the server's own handlers in this process as a gRPC
// client calls them over the network, for the HTTP/JSON gateway (package
// gateway): through every unary interceptor of a gRPC call, in the same
// order (New: the call log, Options.Unary, the latency metrics, panic
// recovery, authentication, the limits, the error table). Unlike Local,
// it authenticates each call itself, from the call's "authorization"
// metadata (the outgoing metadata of ctx, which the gateway fills from the
// HTTP Authorization header), and so gives it the namespace, or the
// refusal, that the same key gets over gRPC.
//
// What the transport does is the caller's: the gateway bounds a request's
// size, and a ctx carrying a peer (peer.NewContext) names the caller's
// connection for the call log and the per-connection limits. Streams are
// not served (Unimplemented). New fills an InProcess given in
// Options.InProcess; the zero InProcess has no services.
type InProcess struct {
	services map[string]localService // by full service name
	chain    grpc.UnaryServerInterceptor
}

func newInProcess(services []localService, chain []grpc.UnaryServerInterceptor) *InProcess {
	p := &InProcess{services: map[string]localService{}, chain: chainUnary(chain)}
	for _, s := range services {
		p.services[s.desc.ServiceName] = s
	}
	return p
}

// Invoke calls method (/coord.v1.LockService/Lock) with args, the
// outgoing metadata of ctx as the call's metadata, and copies the answer
// into reply.
func (p *InProcess) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	if p.services == nil {
		return status.Error(codes.Unimplemented, "no services")
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	ctx = metadata.NewIncomingContext(ctx, md)
	return invoke(ctx, p.services, method, args, reply, p.chain)
}

// NewStream: streams are not served in-process.
func (p *InProcess) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "streams are gRPC only")
}
