package server

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/coordd/coordd/internal/metrics"
)

// callTimer times unary calls into the metrics, a call that asks to wait
// apart from one that does not (internal/metrics says why). It runs just
// inside Options.Unary, where the Prometheus server metrics count the call,
// so that both see the same calls. Streams are not timed: a KeepAlive or
// Observe stream lasts as long as its client wants.
type callTimer struct{ metrics *metrics.Metrics }

func (c callTimer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	service, method, _ := strings.Cut(strings.TrimPrefix(info.FullMethod, "/"), "/")
	c.metrics.Call(service, method, time.Since(start), waits(req))
	return resp, err
}

// waitRequest is a request that can ask to wait: Lock, Acquire, Campaign,
// Allow, BeginIdempotent and Claim.
type waitRequest interface{ GetWait() *durationpb.Duration }

// waits reports whether a request asks to wait (wait > 0), whether or not it
// then has to: such a call is a waiting one for the limits against abuse and
// the metrics.
func waits(req any) bool {
	w, ok := req.(waitRequest)
	return ok && w.GetWait().AsDuration() > 0
}

// initMethods creates the latency series of every unary method gs serves at
// 0, and the wait series of those whose requests can ask to wait.
func initMethods(gs *grpc.Server, m *metrics.Metrics) {
	for service, info := range gs.GetServiceInfo() {
		for _, mi := range info.Methods {
			if !mi.IsClientStream && !mi.IsServerStream {
				m.InitMethod(service, mi.Name, canWait(service, mi.Name))
			}
		}
	}
}

// canWait reports whether the requests of a method can ask to wait: its
// request type, looked up in the registry of generated types, is a
// waitRequest.
func canWait(service, method string) bool {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return false
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return false
	}
	_, ok = mt.New().Interface().(waitRequest)
	return ok
}
