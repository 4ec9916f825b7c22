package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/gateway"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/tracing"
)

// The HTTP/JSON API (package gateway) over the services of a harness,
// through server.InProcess: these tests run on every backend, as the
// gRPC ones do.

// httpAPI is a harness's HTTP/JSON API on a loopback HTTP server.
type httpAPI struct {
	t   testing.TB
	h   *harness
	url string
}

// newHTTPAPI starts a harness with opts and the gateway over it.
func newHTTPAPI(t testing.TB, opts ...func(*config)) *httpAPI {
	t.Helper()
	var p server.InProcess
	var auth *server.Authenticator
	var tracer trace.TracerProvider
	h := newHarness(t, append(opts, func(c *config) { c.inProcess = &p; auth, tracer = c.auth, c.tracer })...)
	g, err := gateway.New(gateway.Options{Conn: &p, AuthEnabled: auth.Enabled, MaxMessageBytes: 4 << 10, WriteTimeout: time.Minute, MaxWait: time.Minute, Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g)
	t.Cleanup(hs.Close)
	return &httpAPI{t: t, h: h, url: hs.URL}
}

// httpAnswer is an answer of the API: its HTTP status, its JSON body as
// a map, and its headers.
type httpAnswer struct {
	status int
	body   map[string]any
	header http.Header
}

// post POSTs body to path with the API key key (none if ""), and decodes
// the JSON answer.
func (a *httpAPI) post(path, key, body string, header ...string) httpAnswer {
	a.t.Helper()
	req, err := http.NewRequestWithContext(ctx(a.t), http.MethodPost, a.url+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		a.t.Fatalf("POST %s: Content-Type %q, want application/json; body %s", path, ct, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		a.t.Fatalf("POST %s: %v in %s", path, err, b)
	}
	return httpAnswer{resp.StatusCode, m, resp.Header}
}

// ok fails unless the answer is 200, and returns its body.
func (r httpAnswer) ok(t testing.TB) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("HTTP %d %v, want 200", r.status, r.body)
	}
	return r.body
}

// wantError fails unless the answer is an error with HTTP status
// httpStatus, gRPC code, and an ErrorInfo of domain coordd with reason; it
// returns the message.
func (r httpAnswer) wantError(t testing.TB, httpStatus int, code codes.Code, reason string) string {
	t.Helper()
	if r.status != httpStatus {
		t.Fatalf("HTTP %d %v, want %d", r.status, r.body, httpStatus)
	}
	if got, _ := r.body["code"].(float64); codes.Code(got) != code {
		t.Fatalf("code %v in %v, want %d (%v)", r.body["code"], r.body, code, code)
	}
	details, _ := r.body["details"].([]any)
	for _, d := range details {
		d, _ := d.(map[string]any)
		if d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
			if d["domain"] != server.ErrorDomain || d["reason"] != reason {
				t.Fatalf("ErrorInfo %v, want %s/%s", d, server.ErrorDomain, reason)
			}
			msg, _ := r.body["message"].(string)
			return msg
		}
	}
	t.Fatalf("no ErrorInfo in %v", r.body)
	return ""
}

// str is a string field of a JSON object.
func str(t testing.TB, m map[string]any, field string) string {
	t.Helper()
	s, ok := m[field].(string)
	if !ok {
		t.Fatalf("field %s of %v: not a string", field, m)
	}
	return s
}

// TestHTTPEveryUnaryMethodHasARoute: every unary method of every service
// the gRPC server serves (listed by gRPC reflection, their methods read
// from the descriptors) is reached by POST /v1/<service>/<rpc> in lower
// case (Envoy's ShouldRateLimit by /v1/envoy/shouldratelimit); no
// streaming method has a route. Health is left out: the HTTP port has
// /healthz.
func TestHTTPEveryUnaryMethodHasARoute(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	api := newHTTPAPI(t, func(c *config) {
		c.unary = []grpc.UnaryServerInterceptor{func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			mu.Lock()
			seen[info.FullMethod] = true
			mu.Unlock()
			return h(ctx, req)
		}}
	})
	stream, err := rpb.NewServerReflectionClient(api.h.conn).ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var unary, streaming int
	for _, s := range resp.GetListServicesResponse().GetService() {
		name := s.GetName()
		if name == "grpc.health.v1.Health" || strings.HasPrefix(name, "grpc.reflection.") {
			continue
		}
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			full := "/" + name + "/" + string(m.Name())
			route := httpRoute(name, string(m.Name()))
			if m.IsStreamingClient() || m.IsStreamingServer() {
				streaming++
				api.post(route, "", `{}`).wantError(t, http.StatusNotFound, codes.NotFound, "NOT_FOUND")
				continue
			}
			unary++
			r := api.post(route, "", `{}`)
			mu.Lock()
			ok := seen[full]
			mu.Unlock()
			if !ok {
				t.Errorf("%s: POST %s did not reach it: HTTP %d %v", full, route, r.status, r.body)
			}
		}
	}
	if unary < 36 || streaming != 2 {
		t.Errorf("%d unary and %d streaming methods checked, want at least 36 and 2: is reflection listing the services?", unary, streaming)
	}
}

// httpRoute is the documented route of a method (README: HTTP/JSON API).
func httpRoute(service, method string) string {
	if service == "envoy.service.ratelimit.v3.RateLimitService" {
		return gateway.EnvoyPath
	}
	short := strings.TrimSuffix(service[strings.LastIndex(service, ".")+1:], "Service")
	return "/v1/" + strings.ToLower(short) + "/" + strings.ToLower(method)
}

// TestHTTPAuthAndNamespaces: with auth on, a call without a key or with an
// unknown one is 401 with UNAUTHENTICATED as JSON; the key of the
// Authorization header gives the call its namespace, as over gRPC, so a
// lock of one tenant is invisible to and apart from another's.
func TestHTTPAuthAndNamespaces(t *testing.T) {
	const keyA, keyB = "http-key-of-tenant-a-0123456789", "http-key-of-tenant-b-0123456789"
	auth, err := server.NewAuthenticator(server.AuthConfig{Enabled: true, APIKeys: []server.APIKey{
		{Namespace: "tenant-a", Key: keyA}, {Namespace: "tenant-b", Key: keyB},
	}})
	if err != nil {
		t.Fatal(err)
	}
	api := newHTTPAPI(t, func(c *config) { c.auth = auth })
	const lock = `{"name": "jobs", "ttl": "30s", "owner": "worker-1"}`

	r := api.post("/v1/lock/lock", "", lock)
	r.wantError(t, http.StatusUnauthorized, codes.Unauthenticated, "UNAUTHENTICATED")
	if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("WWW-Authenticate %q, want the Bearer scheme", got)
	}
	if msg := api.post("/v1/lock/lock", "not-a-key-of-anyone-000", lock).wantError(t, http.StatusUnauthorized, codes.Unauthenticated, "UNAUTHENTICATED"); !strings.Contains(msg, "unknown API key") {
		t.Errorf("message %q, want it to say the key is unknown", msg)
	}

	a := api.post("/v1/lock/lock", keyA, lock).ok(t)
	if a["acquired"] != true {
		t.Fatalf("tenant-a Lock: %v", a)
	}
	b := api.post("/v1/lock/getlock", keyB, `{"name": "jobs"}`).ok(t)
	if b["held"] != false {
		t.Errorf("tenant-b sees tenant-a's lock: %v", b)
	}
	if b := api.post("/v1/lock/lock", keyB, lock).ok(t); b["acquired"] != true {
		t.Errorf("tenant-b could not take its own jobs lock: %v", b)
	}
	// A token of tenant-a is nothing in tenant-b.
	rel := api.post("/v1/lock/release", keyB, `{"name": "jobs", "token": "`+str(t, a, "token")+`"}`).ok(t)
	if rel["released"] != false {
		t.Errorf("tenant-b released with tenant-a's token: %v", rel)
	}
	if g := api.post("/v1/lock/getlock", keyA, `{"name": "jobs"}`).ok(t); g["held"] != true || g["owner"] != "worker-1" {
		t.Errorf("tenant-a's lock: %v", g)
	}
	// The same key over gRPC is in the same namespace.
	gctx := metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer "+keyA)
	if g, err := api.h.locks.GetLock(gctx, &coordv1.GetLockRequest{Name: "jobs"}); err != nil || !g.GetHeld() || g.GetOwner() != "worker-1" {
		t.Errorf("tenant-a's lock over gRPC: %v, %v", g, err)
	}
}

// TestHTTPInvalidArgument: bad input is 400 INVALID_ARGUMENT with an
// ErrorInfo, and the message names the field: a value the server
// refuses and an unknown field (a misspelt ttl is refused, not taken as
// the default); a value that is not the field's JSON is named by its
// place in the body.
func TestHTTPInvalidArgument(t *testing.T) {
	api := newHTTPAPI(t)
	for _, c := range []struct{ body, field string }{
		{`{"name": "", "ttl": "30s"}`, "name"},
		{`{"name": "jobs", "ttl": "-5s"}`, "ttl"},
		{`{"name": "jobs", "ttl": 30}`, "line 1:25"}, // protojson names the place of a bad token
		{`{"name": "jobs", "tll": "30s"}`, "tll"},
		{`{"name": "jobs"`, ""},
	} {
		msg := api.post("/v1/lock/lock", "", c.body).wantError(t, http.StatusBadRequest, codes.InvalidArgument, "INVALID_ARGUMENT")
		if !strings.Contains(msg, c.field) {
			t.Errorf("%s: message %q does not name %s", c.body, msg, c.field)
		}
	}
}

// TestHTTPLockRenewRelease: a lock's round trip over HTTP/JSON: the
// token and fence (a 64-bit integer, so a JSON string) of Lock, Renew
// with the token, Release, a stale token's FAILED_PRECONDITION
// LOCK_NOT_HELD, and a next holder's greater fence.
func TestHTTPLockRenewRelease(t *testing.T) {
	api := newHTTPAPI(t)
	l := api.post("/v1/lock/lock", "", `{"name": "orders", "ttl": "10s"}`).ok(t)
	token, fence := str(t, l, "token"), str(t, l, "fence")
	if l["acquired"] != true || len(token) == 0 || str(t, l, "ttl") != "10s" {
		t.Fatalf("Lock: %v", l)
	}
	if _, err := time.Parse(time.RFC3339Nano, str(t, l, "expire_time")); err != nil {
		t.Errorf("expire_time: %v", err)
	}
	if busy := api.post("/v1/lock/lock", "", `{"name": "orders", "ttl": "10s"}`).ok(t); busy["acquired"] != false || busy["token"] != "" {
		t.Errorf("a second Lock: %v", busy)
	}
	rn := api.post("/v1/lock/renew", "", `{"name": "orders", "token": "`+token+`", "ttl": "20s"}`).ok(t)
	if str(t, rn, "fence") != fence || str(t, rn, "ttl") != "20s" {
		t.Errorf("Renew: %v, want fence %s and ttl 20s", rn, fence)
	}
	if cf := api.post("/v1/lock/checkfence", "", `{"name": "orders", "fence": "`+fence+`"}`).ok(t); cf["current"] != true {
		t.Errorf("CheckFence: %v", cf)
	}
	if rel := api.post("/v1/lock/release", "", `{"name": "orders", "token": "`+token+`"}`).ok(t); rel["released"] != true {
		t.Errorf("Release: %v", rel)
	}
	if rel := api.post("/v1/lock/release", "", `{"name": "orders", "token": "`+token+`"}`).ok(t); rel["released"] != false {
		t.Errorf("a second Release: %v", rel)
	}
	api.post("/v1/lock/renew", "", `{"name": "orders", "token": "`+token+`", "ttl": "20s"}`).
		wantError(t, http.StatusBadRequest, codes.FailedPrecondition, "LOCK_NOT_HELD")
	next := api.post("/v1/lock/lock", "", `{"name": "orders", "ttl": "10s"}`).ok(t)
	f1, _ := strconv.ParseUint(fence, 10, 64)
	f2, err := strconv.ParseUint(str(t, next, "fence"), 10, 64)
	if err != nil || f2 <= f1 {
		t.Errorf("next fence %v, want more than %d", next["fence"], f1)
	}
}

// TestHTTPAllow: Allow over HTTP/JSON with an inline limit: allowed twice,
// then a denial that is an answer (200, allowed false, every field
// written) with a retry_after, as over gRPC.
func TestHTTPAllow(t *testing.T) {
	api := newHTTPAPI(t)
	const body = `{"key": "user-42", "limit": {"algorithm": "ALGORITHM_FIXED_WINDOW", "limit": "2", "period": "3600s"}}`
	for i := range 2 {
		if a := api.post("/v1/ratelimit/allow", "", body).ok(t); a["allowed"] != true {
			t.Fatalf("Allow %d: %v", i+1, a)
		}
	}
	a := api.post("/v1/ratelimit/allow", "", body).ok(t)
	if a["allowed"] != false || str(t, a, "remaining") != "0" {
		t.Fatalf("Allow 3: %v, want a denial with remaining \"0\"", a)
	}
	if ra, err := time.ParseDuration(str(t, a, "retry_after")); err != nil || ra <= 0 {
		t.Errorf("retry_after %v (%v)", a["retry_after"], err)
	}
}

// TestHTTPBounds: what the HTTP layer refuses, as JSON with an ErrorInfo:
// a body larger than twice limits.max_message_bytes (413), a message
// larger than limits.max_message_bytes (429 RESOURCE_EXHAUSTED, as gRPC),
// a browser's request while auth is off (403), a method other than POST
// (405), a path without a route (404); and no streaming RPC over HTTP.
func TestHTTPBounds(t *testing.T) {
	api := newHTTPAPI(t) // MaxMessageBytes 4 KiB
	api.post("/v1/queue/enqueue", "", `{"queue": "q", "payload": "`+strings.Repeat("A", 9<<10)+`"}`).
		wantError(t, http.StatusRequestEntityTooLarge, codes.ResourceExhausted, "MESSAGE_TOO_LARGE")
	api.post("/v1/queue/enqueue", "", `{"queue": "q", "payload": "`+strings.Repeat("A", 6<<10)+`"}`).
		wantError(t, http.StatusTooManyRequests, codes.ResourceExhausted, "MESSAGE_TOO_LARGE")
	api.post("/v1/lock/getlock", "", `{"name": "x"}`, "Origin", "http://evil.example").
		wantError(t, http.StatusForbidden, codes.PermissionDenied, "PERMISSION_DENIED")
	api.post("/v1/lock/nosuchrpc", "", `{}`).wantError(t, http.StatusNotFound, codes.NotFound, "NOT_FOUND")
	api.post("/v1/session/keepalive", "", `{}`).wantError(t, http.StatusNotFound, codes.NotFound, "NOT_FOUND")

	resp, err := http.Get(api.url + "/v1/lock/getlock")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !slices.Contains(resp.Header.Values("Allow"), http.MethodPost) || !strings.Contains(string(b), "METHOD_NOT_ALLOWED") {
		t.Errorf("GET: HTTP %d, Allow %q, %s", resp.StatusCode, resp.Header.Values("Allow"), b)
	}
}

// TestHTTPTraces: with a tracer, an HTTP call has one server span named
// by its method, in the caller's trace (a traceparent header), with the
// gRPC code as rpc.response.status_code and the store's spans as
// children, as a gRPC call has; no span carries the lock's name or token.
func TestHTTPTraces(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	api := newHTTPAPI(t, func(c *config) { c.tracer = tp })
	cctx, client := tp.Tracer("client").Start(ctx(t), "client")
	carrier := propagation.MapCarrier{}
	tracing.Propagator().Inject(cctx, carrier)
	const name, badToken = "secret-http-lock-9zq", "5ec7e75ec7e75ec7e75ec7e75ec7e7cd"
	l := api.post("/v1/lock/lock", "", `{"name": "`+name+`", "ttl": "30s"}`, "traceparent", carrier["traceparent"]).ok(t)
	api.post("/v1/lock/renew", "", `{"name": "`+name+`", "token": "`+badToken+`", "ttl": "30s"}`, "traceparent", carrier["traceparent"]).
		wantError(t, http.StatusBadRequest, codes.FailedPrecondition, "LOCK_NOT_HELD")
	client.End()
	spans := endedSpans(t, rec, func(s []sdktrace.ReadOnlySpan) bool {
		return spanNamed(s, "coord.v1.LockService/Lock") != nil && spanNamed(s, "coord.v1.LockService/Renew") != nil && spanNamed(s, "client") != nil
	})
	for _, c := range []struct{ method, code string }{
		{"coord.v1.LockService/Lock", "OK"},
		{"coord.v1.LockService/Renew", "FAILED_PRECONDITION"},
	} {
		var named []sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == c.method {
				named = append(named, s)
			}
		}
		if len(named) != 1 {
			t.Fatalf("%d spans named %s, want 1", len(named), c.method)
		}
		s := named[0]
		if s.SpanKind() != trace.SpanKindServer || s.Parent().SpanID() != client.SpanContext().SpanID() || s.SpanContext().TraceID() != client.SpanContext().TraceID() {
			t.Errorf("%s: kind %v, parent %v, want a server span under the client's %v", c.method, s.SpanKind(), s.Parent(), client.SpanContext())
		}
		if got := attr(s, "rpc.response.status_code"); got != c.code {
			t.Errorf("%s: rpc.response.status_code %q, want %q", c.method, got, c.code)
		}
		if len(childrenOf(spans, s)) == 0 {
			t.Errorf("%s: no store span among %v", c.method, spanNames(spans))
		}
	}
	noSecrets(t, spans, name, badToken, str(t, l, "token"))
}
