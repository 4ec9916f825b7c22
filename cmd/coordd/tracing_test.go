package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/daemontest"
)

// TestTracingOn is the decision table of what turns tracing on.
func TestTracingOn(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		on      bool
		wantErr bool
	}{
		{env: nil, on: false},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, on: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_TRACES_EXPORTER": "none"}, on: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_SDK_DISABLED": "true"}, on: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, on: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
	} {
		on, err := tracingOn(func(k string) string { return c.env[k] })
		if on != c.on || (err != nil) != c.wantErr {
			t.Errorf("%v: on %v, err %v; want on %v, error %v", c.env, on, err, c.on, c.wantErr)
		}
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http/protobuf"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, ""},
	} {
		got, err := otlpProtocol(func(k string) string { return c.env[k] })
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("%v: %q, %v; want %q", c.env, got, err, c.want)
		}
	}
}

// collector is a loopback OTLP trace collector.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	addr string

	mu       sync.Mutex
	exports  int
	spans    []*tracepb.Span
	services []string // service.name of each export's resource
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exports++
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				c.services = append(c.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{addr: lis.Addr().String()}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, c)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return c
}

// otelEnv is the environment of a daemon under test: every variable that
// could turn tracing on emptied (the test's own environment may set them),
// then env.
func otelEnv(env ...string) []string {
	return append([]string{"OTEL_TRACES_EXPORTER=", "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=",
		"OTEL_SDK_DISABLED=", "OTEL_SERVICE_NAME=", "OTEL_EXPORTER_OTLP_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="}, env...)
}

// lockOnce starts the binary with env, takes a lock named name through it,
// and stops it gracefully (which flushes its spans).
func lockOnce(t *testing.T, name string, env []string) *daemontest.Daemon {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	d := daemontest.Start(t, daemontest.Options{Args: []string{"--store", "memory"}, Env: env, KillAtEnd: true, StopTimeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dial(t, d.GRPCAddr)
	defer conn.Close()
	g, err := coordv1.NewLockServiceClient(conn).Lock(ctx, &coordv1.LockRequest{Name: name, Owner: "tracing-test"})
	if err != nil || !g.GetAcquired() {
		t.Fatalf("Lock: %v, %v", g, err)
	}
	d.Stop(t)
	return d
}

// TestBinaryExportsTraces: with an OTLP endpoint in the environment, the
// binary exports a span per RPC and a store span under it, as service
// coordd, to the collector; with OTEL_SDK_DISABLED, or with nothing set,
// it exports nothing and says nothing of tracing.
func TestBinaryExportsTraces(t *testing.T) {
	const name = "traced-lock-name-v4m"
	col := startCollector(t)
	d := lockOnce(t, name, otelEnv("OTEL_EXPORTER_OTLP_ENDPOINT=http://"+col.addr, "OTEL_BSP_SCHEDULE_DELAY=50"))
	if !strings.Contains(d.Output(), "tracing on") {
		t.Errorf("no log line says tracing is on:\n%s", d.Output())
	}
	col.mu.Lock()
	spans, services := col.spans, col.services
	col.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[string(s.GetSpanId())] = s
		for _, kv := range s.GetAttributes() {
			if strings.Contains(s.GetName(), name) || strings.Contains(kv.GetValue().GetStringValue(), name) {
				t.Errorf("span %q carries the lock name", s.GetName())
			}
		}
	}
	var rpc, st *tracepb.Span
	for _, s := range spans {
		switch s.GetName() {
		case "coord.v1.LockService/Lock":
			rpc = s
		case "store AcquireHold":
			st = s
		}
	}
	if rpc == nil || st == nil {
		var names []string
		for _, s := range spans {
			names = append(names, s.GetName())
		}
		t.Fatalf("collector got spans %v, want the Lock RPC's and its store span", names)
	}
	if byID[string(st.GetParentSpanId())] != rpc {
		t.Errorf("the store span's parent is not the RPC's span")
	}
	for _, s := range services {
		if s != "coordd" {
			t.Errorf("service.name %q, want coordd", s)
		}
	}

	for _, env := range [][]string{
		otelEnv("OTEL_EXPORTER_OTLP_ENDPOINT=http://"+col.addr, "OTEL_SDK_DISABLED=true", "OTEL_BSP_SCHEDULE_DELAY=50"),
		otelEnv(),
	} {
		col.mu.Lock()
		before := col.exports
		col.mu.Unlock()
		d := lockOnce(t, name, env)
		col.mu.Lock()
		after := col.exports
		col.mu.Unlock()
		if after != before || strings.Contains(d.Output(), "tracing") {
			t.Errorf("env %v: %d exports, output:\n%s", env, after-before, d.Output())
		}
	}
}
