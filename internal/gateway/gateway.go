// Package gateway serves coordd's gRPC API as HTTP/JSON on the HTTP port
// when http_api.enabled is set: every unary RPC is POST
// /v1/<service>/<rpc> in lower case (POST /v1/lock/lock), with the request
// message as the JSON body and the response message as the answer. The
// handlers are grpc-gateway's, generated from the .proto files and the
// rules in api/http/gateway.yaml (api/gen/gateway/coord/v1); the OpenAPI
// document is api/openapi/coordd.swagger.json. Envoy's ShouldRateLimit,
// which the gRPC port serves too, is POST /v1/envoy/shouldratelimit.
//
// The calls are gRPC's own: the handlers call the services through
// server.InProcess, which runs every interceptor a gRPC call runs, in this
// process. So an HTTP caller authenticates as a gRPC caller does (the
// Authorization header, "Bearer <API key>", is the call's authorization
// metadata), lands in the same namespace, and gets the same validation,
// limits, metrics, logs and errors. What gRPC's transport does, this
// package does: a request body is bounded, a request message is at most
// limits.max_message_bytes, and a call has a server span when tracing is
// on.
//
// An error answers a JSON google.rpc.Status (grpc-gateway's): code (the
// gRPC code's number), message and details, among which the
// google.rpc.ErrorInfo of domain "coordd"; the HTTP status follows the
// code (400 INVALID_ARGUMENT and FAILED_PRECONDITION, 401, 403, 429
// RESOURCE_EXHAUSTED, 503 UNAVAILABLE…). Errors of the HTTP layer itself
// (no such route, a body that is not the message's JSON, a body too large)
// get an ErrorInfo too, with the code's name as reason.
//
// Streaming RPCs (SessionService.KeepAlive, ElectionService.Observe) are
// gRPC only: they have no route. With auth off, a request with an Origin
// header (a browser's: a page on another site, or one that DNS
// rebinding points at this port) is refused, so that a web page cannot
// drive a coordd that trusts whoever reaches it.
package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	coordv1gw "github.com/coordd/coordd/api/gen/gateway/coord/v1"
	"github.com/coordd/coordd/internal/tracing"
)

// Prefix is the path under which the API is served on the HTTP port.
const Prefix = "/v1/"

// EnvoyPath is the route of Envoy's RateLimitService.ShouldRateLimit.
const EnvoyPath = "/v1/envoy/shouldratelimit"

// errorDomain is the domain of the ErrorInfo of the HTTP layer's own
// errors: coordd's (server.ErrorDomain).
const errorDomain = "coordd"

// Config is the http_api section of coordd's configuration.
type Config struct {
	// Enabled serves the HTTP/JSON API under /v1/ on the HTTP port
	// (http_addr); default false.
	Enabled bool `mapstructure:"enabled"`
}

// DefaultConfig is the API off.
func DefaultConfig() Config { return Config{} }

// Options configure the gateway.
type Options struct {
	// Conn calls the gRPC services: a server.InProcess, so that every
	// interceptor of a gRPC call runs.
	Conn grpc.ClientConnInterface
	// AuthEnabled reports whether callers must authenticate now (a reload
	// may change it); nil: never. With auth off, browsers' requests are
	// refused.
	AuthEnabled func() bool
	// MaxMessageBytes is the largest request message, encoded as
	// protobuf, as over gRPC (limits.max_message_bytes); 0: no limit. A
	// JSON body may be twice as large (bytes fields are base64, and field
	// names are spelled out), and no larger.
	MaxMessageBytes int
	// WriteTimeout is the HTTP server's; a call gets MaxWait more to
	// answer, since it may wait that long (limits.max_wait).
	WriteTimeout, MaxWait time.Duration
	// Tracer, if not nil, gives every call a server span named by its
	// method, as the gRPC server's stats handler does, continuing the
	// caller's trace (W3C traceparent header: tracing.Propagator).
	Tracer trace.TracerProvider
}

// registrations are the generated handlers of every service with unary
// RPCs; the Envoy route is New's.
var registrations = []func(context.Context, *runtime.ServeMux, grpc.ClientConnInterface) error{
	func(ctx context.Context, m *runtime.ServeMux, c grpc.ClientConnInterface) error {
		return coordv1gw.RegisterLockServiceHandlerClient(ctx, m, coordv1.NewLockServiceClient(c))
	},
	func(ctx context.Context, m *runtime.ServeMux, c grpc.ClientConnInterface) error {
		return coordv1gw.RegisterSemaphoreServiceHandlerClient(ctx, m, coordv1.NewSemaphoreServiceClient(c))
	},
	func(ctx context.Context, m *runtime.ServeMux, c grpc.ClientConnInterface) error {
		return coordv1gw.RegisterElectionServiceHandlerClient(ctx, m, coordv1.NewElectionServiceClient(c))
	},
	func(ctx context.Context, m *runtime.ServeMux, c grpc.ClientConnInterface) error {
		return coordv1gw.RegisterRateLimitServiceHandlerClient(ctx, m, coordv1.NewRateLimitServiceClient(c))
	},
	func(ctx context.Context, m *runtime.ServeMux, c grpc.ClientConnInterface) error {
		return coordv1gw.RegisterIdempotencyServiceHandlerClient(ctx, m, coordv1.NewIdempotencyServiceClient(c))
	},
	func(ctx context.Context, m *runtime.ServeMux, c grpc.ClientConnInterface) error {
		return coordv1gw.RegisterQueueServiceHandlerClient(ctx, m, coordv1.NewQueueServiceClient(c))
	},
}

// Gateway serves the API: mount it at Prefix on the HTTP port's mux.
type Gateway struct {
	o   Options
	mux *runtime.ServeMux
}

// New returns the gateway over o.Conn.
func New(o Options) (*Gateway, error) {
	if o.Conn == nil {
		return nil, errors.New("gateway: no Conn")
	}
	g := &Gateway{o: o}
	conn := grpc.ClientConnInterface(limitedConn{o.Conn, o.MaxMessageBytes, o.Tracer})
	g.mux = runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, marshaler),
		runtime.WithErrorHandler(errorHandler),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
	)
	ctx := context.Background() // the handlers use it only to close a connection they dialled: none here
	for _, register := range registrations {
		if err := register(ctx, g.mux, conn); err != nil {
			return nil, err
		}
	}
	envoy := rlsv3.NewRateLimitServiceClient(conn)
	if err := g.mux.HandlePath(http.MethodPost, EnvoyPath, func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		inbound, outbound := runtime.MarshalerForRequest(g.mux, r)
		ctx, err := runtime.AnnotateContext(r.Context(), g.mux, r, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, runtime.WithHTTPPathPattern(EnvoyPath))
		if err != nil {
			runtime.HTTPError(r.Context(), g.mux, outbound, w, r, err)
			return
		}
		var req rlsv3.RateLimitRequest
		if err := inbound.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			runtime.HTTPError(ctx, g.mux, outbound, w, r, status.Errorf(codes.InvalidArgument, "%v", err))
			return
		}
		resp, err := envoy.ShouldRateLimit(ctx, &req)
		if err != nil {
			runtime.HTTPError(ctx, g.mux, outbound, w, r, err)
			return
		}
		runtime.ForwardResponseMessage(ctx, g.mux, outbound, w, r, resp)
	}); err != nil {
		return nil, err
	}
	return g, nil
}

// marshaler is the JSON of requests and answers: the .proto field names
// (snake_case, as in the docs; protojson reads lowerCamelCase too), every
// field written (a false or 0 is there, not left out), and an unknown
// field refused (INVALID_ARGUMENT naming it) rather than ignored, so that
// a misspelt ttl is not a default ttl.
var marshaler = &runtime.HTTPBodyMarshaler{Marshaler: &runtime.JSONPb{
	MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
	UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
}}

// ServeHTTP refuses a browser's request with auth off, bounds the body
// and the time to answer, gives the call its caller's address and trace,
// and serves it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Origin") != "" && (g.o.AuthEnabled == nil || !g.o.AuthEnabled()) {
		g.fail(w, r, http.StatusForbidden, withReason(codes.PermissionDenied,
			"a request with an Origin header (from a web page) is refused while auth is off: call the API from a program, or turn auth on",
			"PERMISSION_DENIED", map[string]string{"cause": "origin"}))
		return
	}
	if limit := g.maxBody(); limit > 0 {
		if r.ContentLength > limit {
			g.fail(w, r, http.StatusRequestEntityTooLarge, tooLarge(limit))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			g.fail(w, r, http.StatusRequestEntityTooLarge, tooLarge(limit))
			return
		case err != nil:
			g.fail(w, r, http.StatusBadRequest, withReason(codes.InvalidArgument, "reading the request body: "+err.Error(), "INVALID_ARGUMENT", nil))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if g.o.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(g.o.WriteTimeout + g.o.MaxWait))
	}
	ctx := peer.NewContext(r.Context(), &peer.Peer{Addr: remoteAddr(r.RemoteAddr)})
	if g.o.Tracer != nil {
		ctx = tracing.Propagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	g.mux.ServeHTTP(w, r.WithContext(ctx))
}

// maxBody is the largest body read: twice MaxMessageBytes; 0: no limit.
func (g *Gateway) maxBody() int64 { return 2 * int64(g.o.MaxMessageBytes) }

func tooLarge(limit int64) error {
	return withReason(codes.ResourceExhausted, fmt.Sprintf("request body larger than %d bytes (twice limits.max_message_bytes)", limit), "MESSAGE_TOO_LARGE", nil)
}

// fail answers err as the gateway answers any error, with HTTP status
// code rather than the one of its gRPC code (413 for a body too large, not
// 429).
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	_, outbound := runtime.MarshalerForRequest(g.mux, r)
	errorHandler(r.Context(), g.mux, outbound, w, r, &runtime.HTTPStatusError{HTTPStatus: code, Err: err})
}

// remoteAddr is an HTTP caller's address ("ip:port", one per connection)
// as a net.Addr.
type remoteAddr string

func (a remoteAddr) Network() string { return "tcp" }
func (a remoteAddr) String() string  { return string(a) }

// errorHandler answers an error of a call as grpc-gateway does (a JSON
// google.rpc.Status, the HTTP status by its code), with an ErrorInfo
// added to an error of the HTTP layer that has none, WWW-Authenticate on
// a 401 (RFC 9110), and Retry-After when the status has a RetryInfo.
func errorHandler(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	var custom *runtime.HTTPStatusError
	if errors.As(err, &custom) {
		err = custom.Err
	}
	st := status.Convert(err)
	var hasInfo bool
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			hasInfo = true
		case *errdetails.RetryInfo:
			secs := math.Ceil(d.GetRetryDelay().AsDuration().Seconds())
			w.Header().Set("Retry-After", strconv.Itoa(max(int(secs), 1)))
		}
	}
	if !hasInfo && st.Code() != codes.OK {
		err = withReason(st.Code(), st.Message(), codeName(st.Code()), nil)
	}
	if custom != nil {
		err = &runtime.HTTPStatusError{HTTPStatus: custom.HTTPStatus, Err: err}
	}
	runtime.DefaultHTTPErrorHandler(ctx, mux, m, challenge{w}, r, err)
}

// challenge writes a 401's WWW-Authenticate as RFC 9110 wants it (a
// scheme), where grpc-gateway would put the status message.
type challenge struct{ http.ResponseWriter }

func (c challenge) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		c.Header().Set("WWW-Authenticate", `Bearer realm="coordd"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

// routingErrorHandler answers a request that matches no route: 404 for an
// unknown path, 405 for a method other than POST, as JSON with an
// ErrorInfo (reason NOT_FOUND, METHOD_NOT_ALLOWED).
func routingErrorHandler(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
		errorHandler(ctx, mux, m, w, r, &runtime.HTTPStatusError{HTTPStatus: httpStatus,
			Err: withReason(codes.Unimplemented, "method "+r.Method+" not allowed: every route is POST", "METHOD_NOT_ALLOWED", nil)})
	default:
		errorHandler(ctx, mux, m, w, r, &runtime.HTTPStatusError{HTTPStatus: http.StatusNotFound,
			Err: withReason(codes.NotFound, "no route "+r.URL.Path+": POST /v1/<service>/<rpc> in lower case (README: HTTP/JSON API)", "NOT_FOUND", nil)})
	}
}

// withReason is a status of code with msg and an ErrorInfo of domain
// coordd.
func withReason(code codes.Code, msg, reason string, md map[string]string) error {
	st, err := status.New(code, msg).WithDetails(protoadapt.MessageV1Of(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: md}))
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// codeName is a code's name as the .proto enum google.rpc.Code spells it
// (FAILED_PRECONDITION): the reason of the HTTP layer's errors and the
// rpc.response.status_code of spans.
func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "CODE_" + strconv.Itoa(int(c))
}

var codeNames = [...]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

// limitedConn is the gateway's connection: what a gRPC transport does
// before a call reaches the server's interceptors.
type limitedConn struct {
	grpc.ClientConnInterface
	maxMessage int
	tracer     trace.TracerProvider
}

// Invoke refuses a request larger than maxMessage as gRPC does
// (RESOURCE_EXHAUSTED), and traces the call when tracing is on.
func (c limitedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) (err error) {
	if m, ok := args.(proto.Message); ok && c.maxMessage > 0 {
		if n := proto.Size(m); n > c.maxMessage {
			return withReason(codes.ResourceExhausted, fmt.Sprintf("request message larger than max (%d vs. %d bytes: limits.max_message_bytes)", n, c.maxMessage), "MESSAGE_TOO_LARGE", nil)
		}
	}
	if c.tracer != nil {
		var span trace.Span
		ctx, span = c.tracer.Tracer(tracing.Scope).Start(ctx, strings.TrimPrefix(method, "/"),
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("rpc.system.name", "grpc"), attribute.String("coordd.transport", "http")))
		defer func() {
			code := status.Code(err)
			span.SetAttributes(attribute.String("rpc.response.status_code", codeName(code)))
			switch code {
			case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
				span.SetStatus(otelcodes.Error, codeName(code))
			}
			span.End()
		}()
	}
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}
