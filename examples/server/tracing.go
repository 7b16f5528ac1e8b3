package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracingWanted reports whether the standard OpenTelemetry environment
// asks for traces to be exported: an OTLP endpoint is set, or
// OTEL_TRACES_EXPORTER is "otlp"; OTEL_TRACES_EXPORTER=none and
// OTEL_SDK_DISABLED=true turn it off.
func tracingWanted(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// setupTracing installs OpenTelemetry's SDK as the global tracer provider,
// exporting with OTLP over HTTP/protobuf, when the environment asks for it
// (tracingWanted); every part of the store follows the global provider.
// The exporter, sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG),
// batching (OTEL_BSP_*) and resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES) read their standard variables. The returned
// function flushes and stops it; it does nothing when tracing is off.
func setupTracing(ctx context.Context, getenv func(string) string, log *slog.Logger) (func(context.Context), error) {
	if !tracingWanted(getenv) {
		return func(context.Context) {}, nil
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol != "" && protocol != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: this server exports traces with http/protobuf only (point it at the collector's OTLP/HTTP port, usually 4318)", protocol)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: %v", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "eventstore")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		log.Warn("tracing: the resource attributes are incomplete", "err", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	log.Info("tracing: exporting spans with OTLP/HTTP")
	return func(ctx context.Context) {
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not flushed at shutdown", "err", err)
		}
	}, nil
}
