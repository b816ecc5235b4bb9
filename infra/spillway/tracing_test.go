package spillway

import (
	"errors"
	"testing"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

const adotLayer = "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"

// functionsOf returns both functions' template properties.
func functionsOf(f *fixture) map[string]map[string]any {
	return map[string]map[string]any{
		"relay":   f.props(f.functionID(f.outbox.relay.fn)),
		"enqueue": f.props(f.functionID(f.outbox.enqueue.fn)),
	}
}

func envOf(t *testing.T, p map[string]any) map[string]any {
	t.Helper()
	env, ok := p["Environment"].(map[string]any)["Variables"].(map[string]any)
	if !ok {
		t.Fatalf("no environment variables: %v", p["Environment"])
	}
	return env
}

func TestTracing(t *testing.T) {
	t.Run("DefaultsToXRay", func(t *testing.T) {
		f := synth(t, nil)
		for name, p := range functionsOf(f) {
			assertJSON(t, name+" tracing", p["TracingConfig"], map[string]any{"Mode": "Active"})
			if _, ok := p["Layers"]; ok {
				t.Errorf("%s has layers in xray mode: %v", name, p["Layers"])
			}
			env := envOf(t, p)
			assertJSON(t, name+" "+outboxconf.EnvTracing, env[outboxconf.EnvTracing], "xray")
			if _, ok := env[outboxconf.EnvOTelEndpoint]; ok {
				t.Errorf("%s has an OTLP endpoint in xray mode", name)
			}
		}
	})

	t.Run("OTelAttachesTheCollectorAndKeepsActiveTracing", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.Tracing = outboxconf.TracingOTel
			p.OTel = OTelProps{CollectorLayerArn: adotLayer, Env: map[string]string{
				"OPENTELEMETRY_COLLECTOR_CONFIG_URI": "/var/task/collector.yaml",
				"OTEL_TRACES_SAMPLER":                "parentbased_traceidratio",
			}}
		})
		for name, p := range functionsOf(f) {
			// The platform segments stay, and the otel spans join their trace.
			assertJSON(t, name+" tracing", p["TracingConfig"], map[string]any{"Mode": "Active"})
			assertJSON(t, name+" layers", p["Layers"], []any{adotLayer})
			env := envOf(t, p)
			for k, want := range map[string]string{
				outboxconf.EnvTracing:                "otel",
				outboxconf.EnvOTelEndpoint:           DefaultOTelEndpoint,
				outboxconf.EnvOTelProtocol:           outboxconf.OTelProtocolHTTP,
				"OPENTELEMETRY_COLLECTOR_CONFIG_URI": "/var/task/collector.yaml",
				"OTEL_TRACES_SAMPLER":                "parentbased_traceidratio",
			} {
				assertJSON(t, name+" "+k, env[k], want)
			}
		}

		g := synth(t, func(p *OutboxProps) {
			p.Tracing = outboxconf.TracingOTel
			p.OTel = OTelProps{Endpoint: "https://collector.internal:4318"}
		})
		for name, p := range functionsOf(g) {
			if _, ok := p["Layers"]; ok {
				t.Errorf("%s has a layer with an external collector: %v", name, p["Layers"])
			}
			assertJSON(t, name+" endpoint", envOf(t, p)[outboxconf.EnvOTelEndpoint], "https://collector.internal:4318")
		}
	})

	t.Run("OffTurnsActiveTracingOff", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) { p.Tracing = outboxconf.TracingOff })
		for name, p := range functionsOf(f) {
			if tc, ok := p["TracingConfig"]; ok && canonical(tc) != canonical(map[string]any{"Mode": "PassThrough"}) {
				t.Errorf("%s tracing config %v with tracing off", name, tc)
			}
			assertJSON(t, name+" "+outboxconf.EnvTracing, envOf(t, p)[outboxconf.EnvTracing], "off")
		}
	})

	t.Run("PropsAreValidated", func(t *testing.T) {
		for name, c := range map[string]struct {
			mutate func(*OutboxProps)
			want   string
		}{
			"unknown mode":      {func(p *OutboxProps) { p.Tracing = "jaeger" }, `tracing must be "xray", "otel" or "off", got "jaeger"`},
			"otel props unused": {func(p *OutboxProps) { p.OTel.CollectorLayerArn = adotLayer }, `OTel props are set but tracing is "xray"`},
			"no collector":      {func(p *OutboxProps) { p.Tracing = "otel" }, "otel needs a collector"},
			"bad layer": {func(p *OutboxProps) {
				p.Tracing, p.OTel.CollectorLayerArn = "otel", "aws-otel-collector-arm64"
			}, "is not a layer version ARN"},
			"bad endpoint": {func(p *OutboxProps) { p.Tracing, p.OTel.Endpoint = "otel", "localhost:4318" }, "not an http:// or https:// URL"},
			"foreign variable": {func(p *OutboxProps) {
				p.Tracing, p.OTel = "otel", OTelProps{CollectorLayerArn: adotLayer, Env: map[string]string{"SPILLWAY_TRACING": "xray"}}
			}, "does not start with OTEL_ or OPENTELEMETRY_"},
			"grpc": {func(p *OutboxProps) {
				p.Tracing, p.OTel = "otel", OTelProps{CollectorLayerArn: adotLayer, Env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}}
			}, "export http/protobuf only"},
		} {
			t.Run(name, func(t *testing.T) {
				p := baseProps()
				c.mutate(&p)
				err := p.WithDefaults().Validate()
				if !errors.Is(err, ErrInvalidProps) {
					t.Fatalf("want ErrInvalidProps, got %v", err)
				}
				mustContain(t, err.Error(), c.want)
			})
		}
	})
}
