package spillway

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// DefaultOTelEndpoint is where the functions export OTLP in otel mode: the
// OTLP/HTTP receiver of a collector layer (ADOT) in the execution
// environment.
const DefaultOTelEndpoint = "http://localhost:4318"

// OTelProps configure the otel tracing mode.
type OTelProps struct {
	// CollectorLayerArn is the Lambda layer running the collector next to
	// both functions, e.g. the ADOT collector layer for arm64
	// (arn:aws:lambda:<region>:901920570463:layer:aws-otel-collector-arm64-ver-<version>:<n>).
	// Required with tracing otel unless Endpoint names a collector outside
	// the function.
	CollectorLayerArn string
	// Endpoint is OTEL_EXPORTER_OTLP_ENDPOINT, the OTLP/HTTP base URL.
	// Default DefaultOTelEndpoint.
	Endpoint string
	// Env adds exporter and collector variables to both functions: names
	// starting with OTEL_ (headers, sampler, resource attributes) or
	// OPENTELEMETRY_ (the ADOT layer's OPENTELEMETRY_COLLECTOR_CONFIG_URI).
	// Default none.
	Env map[string]string
}

var layerArn = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$`)

// validateTracing checks Tracing and OTel.
func (p OutboxProps) validateTracing() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: tracing: "+format, append([]any{ErrInvalidProps}, args...)...))
	}
	switch p.Tracing {
	case outboxconf.TracingXRay, outboxconf.TracingOff:
		if p.OTel.CollectorLayerArn != "" || p.OTel.Endpoint != "" || len(p.OTel.Env) > 0 {
			bad("OTel props are set but tracing is %q; set Tracing to %q", p.Tracing, outboxconf.TracingOTel)
		}
		return errs
	case outboxconf.TracingOTel:
	default:
		return append(errs, fmt.Errorf("%w: tracing must be %q, %q or %q, got %q", ErrInvalidProps,
			outboxconf.TracingXRay, outboxconf.TracingOTel, outboxconf.TracingOff, p.Tracing))
	}
	o := p.OTel
	if o.CollectorLayerArn == "" && o.Endpoint == "" {
		bad("otel needs a collector: the collector layer ARN, or an endpoint outside the function")
	}
	if o.CollectorLayerArn != "" && !isToken(o.CollectorLayerArn) && !layerArn.MatchString(o.CollectorLayerArn) {
		bad("collector layer %q is not a layer version ARN (arn:aws:lambda:<region>:<account>:layer:<name>:<version>)", o.CollectorLayerArn)
	}
	if o.Endpoint != "" && !isToken(o.Endpoint) && !strings.HasPrefix(o.Endpoint, "http://") && !strings.HasPrefix(o.Endpoint, "https://") {
		bad("endpoint %q is not an http:// or https:// URL", o.Endpoint)
	}
	for k, v := range o.Env {
		switch {
		case !strings.HasPrefix(k, "OTEL_") && !strings.HasPrefix(k, "OPENTELEMETRY_"):
			bad("variable %s does not start with OTEL_ or OPENTELEMETRY_", k)
		case (k == outboxconf.EnvOTelProtocol || k == outboxconf.EnvOTelTracesProtocol) && v != outboxconf.OTelProtocolHTTP:
			bad("%s=%q: the functions export %s only", k, v, outboxconf.OTelProtocolHTTP)
		case k == outboxconf.EnvOTelEndpoint:
			bad("set the endpoint with OTelProps.Endpoint, not Env")
		}
	}
	return errs
}

// tracingEnv is what both functions read about tracing.
func tracingEnv(p OutboxProps) map[string]*string {
	env := map[string]*string{outboxconf.EnvTracing: jsii.String(p.Tracing)}
	if p.Tracing != outboxconf.TracingOTel {
		return env
	}
	for k, v := range p.OTel.Env {
		env[k] = jsii.String(v)
	}
	if p.OTel.Endpoint != "" {
		env[outboxconf.EnvOTelEndpoint] = jsii.String(p.OTel.Endpoint)
	} else {
		env[outboxconf.EnvOTelEndpoint] = jsii.String(DefaultOTelEndpoint)
	}
	env[outboxconf.EnvOTelProtocol] = jsii.String(outboxconf.OTelProtocolHTTP)
	return env
}

// functionTracing is how both functions trace: Lambda's active X-Ray
// tracing (the platform segments, and the parent the otel spans join)
// unless tracing is off, plus the collector layer in otel mode.
type functionTracing struct {
	mode   awslambda.Tracing
	layers []awslambda.ILayerVersion
}

func newFunctionTracing(scope constructs.Construct, p OutboxProps) functionTracing {
	t := functionTracing{mode: awslambda.Tracing_ACTIVE}
	switch {
	case p.Tracing == outboxconf.TracingOff:
		t.mode = awslambda.Tracing_DISABLED
	case p.Tracing == outboxconf.TracingOTel && p.OTel.CollectorLayerArn != "":
		t.layers = []awslambda.ILayerVersion{
			awslambda.LayerVersion_FromLayerVersionArn(scope, jsii.String("CollectorLayer"), jsii.String(p.OTel.CollectorLayerArn)),
		}
	}
	return t
}

func (t functionTracing) configure(fp *awslambda.FunctionProps) {
	fp.Tracing = t.mode
	if len(t.layers) > 0 {
		fp.Layers = &t.layers
	}
}
