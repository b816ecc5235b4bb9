package otel

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/outbox"
)

// ScopeName is the instrumentation scope of every span this package opens.
const ScopeName = "github.com/spillway-dev/spillway/outbox/outboxobs/otel"

// DefaultFlushTimeout bounds the export at the end of an invocation.
const DefaultFlushTimeout = 5 * time.Second

// Config configures New. The zero value exports to the endpoint the OTEL_*
// variables name.
type Config struct {
	// ServiceName is the service.name resource attribute, unless
	// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES set it. Default
	// "spillway".
	ServiceName string
	// Exporter receives the spans. Default: OTLP over HTTP configured by the
	// OTEL_EXPORTER_OTLP_* variables.
	Exporter sdktrace.SpanExporter
	// Endpoint, when set, is the OTLP/HTTP base URL of the default exporter
	// (spans go to Endpoint + "/v1/traces"), overriding the variables.
	Endpoint string
	// FlushTimeout bounds the export when a root span ends. Default
	// DefaultFlushTimeout; the invocation's deadline bounds it too.
	FlushTimeout time.Duration
	// Getenv reads _X_AMZN_TRACE_ID when ctx carries no trace header.
	// Default os.Getenv.
	Getenv func(string) string
}

// Provider owns the SDK tracer provider and its exporter. It is safe for
// concurrent use; build one per process.
type Provider struct {
	sdk          *sdktrace.TracerProvider
	scoped       trace.TracerProvider
	live         *liveRoots
	tracer       trace.Tracer
	flushTimeout time.Duration
	getenv       func(string) string
}

// New builds the provider: a batching span processor (flushed when each
// root span ends), the X-Ray id generator, the sampler OTEL_TRACES_SAMPLER
// names (default: parent-based, always on), and a resource with the
// service name, the function's name and region, and OTEL_RESOURCE_ATTRIBUTES.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	exp := cfg.Exporter
	if exp == nil {
		var err error
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/")+"/v1/traces"))
		}
		if exp, err = otlptracehttp.New(ctx, opts...); err != nil {
			return nil, fmt.Errorf("otel: OTLP/HTTP exporter: %w", err)
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(resourceAttributes(cmp.Or(cfg.ServiceName, "spillway"), getenv)...),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("otel: resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithIDGenerator(xray.NewIDGenerator()),
		sdktrace.WithResource(res))
	live := &liveRoots{n: map[trace.TraceID]int{}}
	return &Provider{
		sdk: sdk, scoped: underRoot{sdk: sdk, live: live}, live: live, tracer: sdk.Tracer(ScopeName),
		flushTimeout: cmp.Or(cfg.FlushTimeout, DefaultFlushTimeout), getenv: getenv,
	}, nil
}

func resourceAttributes(service string, getenv func(string) string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.ServiceName(service), semconv.CloudProviderAWS}
	if fn := getenv("AWS_LAMBDA_FUNCTION_NAME"); fn != "" {
		attrs = append(attrs, semconv.FaaSName(fn))
	}
	if v := getenv("AWS_LAMBDA_FUNCTION_VERSION"); v != "" {
		attrs = append(attrs, semconv.FaaSVersion(v))
	}
	if r := getenv("AWS_REGION"); r != "" {
		attrs = append(attrs, semconv.CloudRegion(r))
	}
	return attrs
}

// Tracer returns the outbox.Tracer whose spans are children of the span in
// ctx; it records nothing outside a root span.
func (p *Provider) Tracer() outbox.Tracer { return Tracer{tracer: p.scoped.Tracer(ScopeName)} }

// StartInvocation opens the root span of one Lambda invocation, named name
// (the function's name), as a child of the function's X-Ray segment when
// the invocation's trace header names one (active tracing), and returns
// the function that ends it and exports every span ended so far. Call end
// before the handler returns: Lambda may freeze the process right after.
func (p *Provider) StartInvocation(ctx context.Context, name string) (context.Context, func(err error) error) {
	if header := outbox.InvocationTraceContext(ctx, p.getenv).AmznTraceID; header != "" {
		ctx = xray.Propagator{}.Extract(ctx, propagation.MapCarrier{"X-Amzn-Trace-Id": header})
	}
	attrs := []attribute.KeyValue{}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID), semconv.CloudResourceID(lc.InvokedFunctionArn))
	}
	return p.startRoot(ctx, name, trace.SpanKindServer, attrs)
}

// Start opens a root span for a process outside Lambda (the CLI); the
// returned function ends it and exports every span ended so far.
func (p *Provider) Start(ctx context.Context, name string) (context.Context, func(err error) error) {
	return p.startRoot(ctx, name, trace.SpanKindInternal, nil)
}

func (p *Provider) startRoot(ctx context.Context, name string, kind trace.SpanKind, attrs []attribute.KeyValue) (context.Context, func(error) error) {
	ctx, span := p.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	id := span.SpanContext().TraceID()
	p.live.add(id, 1)
	return ctx, func(err error) error {
		p.live.add(id, -1)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.flushTimeout)
		defer cancel()
		if d, ok := ctx.Deadline(); ok {
			var cancelDeadline context.CancelFunc
			fctx, cancelDeadline = context.WithDeadline(fctx, d)
			defer cancelDeadline()
		}
		if err := p.sdk.ForceFlush(fctx); err != nil {
			return fmt.Errorf("otel: export spans: %w", err)
		}
		return nil
	}
}

// TraceContext returns the trace context to store on messages enqueued
// under ctx: what ctx carries (outbox.TraceContextFrom; caller values win),
// completed with the span in ctx as a W3C traceparent and as an X-Ray
// header, so consumers of either kind link to the exact span that enqueued.
func (p *Provider) TraceContext(ctx context.Context) outbox.TraceContext {
	tc := outbox.TraceContextFrom(ctx)
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return tc
	}
	carrier := propagation.MapCarrier{}
	if tc.TraceParent == "" {
		propagation.TraceContext{}.Inject(ctx, carrier)
		tc.TraceParent, tc.TraceState = carrier.Get(outbox.HeaderTraceParent), carrier.Get(outbox.HeaderTraceState)
	}
	if tc.AmznTraceID == "" {
		xray.Propagator{}.Inject(ctx, carrier)
		tc.AmznTraceID = carrier.Get(outbox.HeaderAmznTraceID)
	}
	return tc
}

// ForceFlush exports every span ended so far.
func (p *Provider) ForceFlush(ctx context.Context) error { return p.sdk.ForceFlush(ctx) }

// Shutdown flushes and stops the exporter; spans started afterwards are
// dropped.
func (p *Provider) Shutdown(ctx context.Context) error { return p.sdk.Shutdown(ctx) }
