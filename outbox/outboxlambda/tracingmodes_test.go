package outboxlambda

import (
	"errors"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// TestTracingModes is a top-level test that is not parallel: it edits the
// registry of compiled-in modes, which parallel tests read (LoadConfig),
// and parallel tests run only once the sequential ones are done. As a
// subtest of a parallel test it ran beside them: a data race.
func TestTracingModes(t *testing.T) {
	for _, mode := range []string{"xray", "otel", "off"} {
		// Another mode's protocol setting does not concern xray and off.
		got, err := LoadConfig(env(withVars(map[string]string{outboxconf.EnvTracing: mode, outboxconf.EnvOTelProtocol: map[bool]string{true: "http/protobuf", false: "grpc"}[mode == "otel"]})))
		if err != nil || got.Tracing != mode {
			t.Errorf("%s: %+v, %v", mode, got.Tracing, err)
		}
	}
	// A mode left out of the build is refused with the build tag named.
	saved := tracingModes[outboxconf.TracingOTel]
	t.Cleanup(func() { tracingModes[outboxconf.TracingOTel] = saved })
	delete(tracingModes, outboxconf.TracingOTel)
	_, err := LoadConfig(env(withVars(map[string]string{outboxconf.EnvTracing: "otel"})))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Variable != outboxconf.EnvTracing || !strings.Contains(err.Error(), "built without it (build tag spillway.nootel)") {
		t.Fatalf("otel left out: %v", err)
	}
}
