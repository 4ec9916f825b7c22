package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/coordd/coordd/internal/version"
)

// tracingOn reports whether the OTEL_* environment (read with getenv)
// turns tracing on: OTEL_SDK_DISABLED is not "true", and either
// OTEL_TRACES_EXPORTER is "otlp", or it is unset and an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set. OTEL_TRACES_EXPORTER "none" turns it off; any other exporter is an
// error rather than silently no traces.
func tracingOn(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "otlp":
		return true, nil
	case "none":
		return false, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported; coordd exports traces with otlp (or none)", exp)
	}
}

// otlpProtocol is the OTLP protocol for traces: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
// else OTEL_EXPORTER_OTLP_PROTOCOL, else grpc.
func otlpProtocol(getenv func(string) string) (string, error) {
	p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if p == "" {
		p = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch p {
	case "", "grpc":
		return "grpc", nil
	case "http/protobuf":
		return p, nil
	default:
		return "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported; use grpc or http/protobuf", p)
	}
}

// newTracerProvider returns the tracer provider that the OTEL_* environment
// asks for (README: Traces), or nil if tracing is off: then coordd makes no
// spans and installs no stats handler. The OTLP exporter reads its own
// OTEL_EXPORTER_OTLP_* variables (endpoint, headers, TLS, timeout), the SDK
// the sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG) and the batch
// processor's OTEL_BSP_*; the resource is service.name (OTEL_SERVICE_NAME,
// default coordd), service.version and OTEL_RESOURCE_ATTRIBUTES.
func newTracerProvider(ctx context.Context, getenv func(string) string, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	on, err := tracingOn(getenv)
	if err != nil || !on {
		return nil, err
	}
	protocol, err := otlpProtocol(getenv)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later sources win: the environment's service name over coordd's.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("coordd"), semconv.ServiceVersion(version.Get().Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// The SDK's errors (an export that failed) go to coordd's log, not to
	// stderr through the SDK's own logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: " + err.Error()) }))
	log.Info("tracing on: exporting spans over OTLP", "protocol", protocol)
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
