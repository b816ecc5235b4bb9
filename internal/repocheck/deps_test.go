package repocheck

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestDependencies(t *testing.T) {
	t.Parallel()
	// AreStandardLibraryOnly keeps the core free of the AWS SDK,
	// franz-go and everything else: adapters import outbox, never the reverse,
	// so a writer that only builds messages pulls in nothing but the standard
	// library. The lease protocol (outbox/lease) is held to the same, and may
	// not import the core: the core and the stores call it, never the reverse.
	// The generation protocol (outbox/generation) builds on the core and
	// imports nothing else, so a service that changes its bucket count links
	// no more than the core. The library's one interruptible wait
	// (outbox/internal/sleep) is held to the standard library too, so the
	// core may share it with the other library packages instead of
	// exporting it.
	t.Run("AreStandardLibraryOnly", func(t *testing.T) {
		t.Parallel()
		const module = "github.com/spillway-dev/spillway"
		murmur2 := module + "/outbox/internal/murmur2"
		sleep := module + "/outbox/internal/sleep"
		for _, c := range []struct {
			dir, self string
			// own are the module's packages it may import.
			own []string
		}{
			{"../../outbox", module + "/outbox", []string{module + "/outbox/lease", murmur2, sleep}},
			{"../../outbox/lease", module + "/outbox/lease", []string{murmur2}},
			{"../../outbox/generation", module + "/outbox/generation", []string{module + "/outbox", module + "/outbox/lease", murmur2, sleep}},
			{"../../outbox/internal/sleep", sleep, nil},
		} {
			t.Run(c.self, func(t *testing.T) {
				t.Parallel()
				deps := listDeps(t, c.dir)
				var foreign []string
				sawSelf, sawStd := false, false
				for _, p := range deps {
					if p == c.self {
						sawSelf = true
						continue
					}
					if slices.Contains(c.own, p) {
						continue
					}
					// A standard-library path has no dot in its first element
					// ("fmt", "crypto/rand", "vendor/golang.org/x/..."); every
					// module path starts with a domain.
					first, _, _ := strings.Cut(p, "/")
					if strings.Contains(first, ".") {
						foreign = append(foreign, p)
						continue
					}
					sawStd = sawStd || p == "time"
				}
				// Positive controls: the listing is of this package and
				// includes a standard package it is known to import.
				if !sawSelf || !sawStd {
					t.Fatalf("go list -deps output does not look like this package's: %q", deps)
				}
				if len(foreign) > 0 {
					t.Fatalf("package %s must import only the standard library and %q; it depends on:\n  %s", c.self, c.own, strings.Join(foreign, "\n  "))
				}
			})
		}
	})

	// BinaryDependencies keeps the binaries lean: the CLI links the
	// embedded backends for its local commands (run, bench) but never the
	// testing package nor the lab's simulated studies, which run only inside
	// testing/synctest bubbles; the Lambda functions link neither test code nor the embedded servers; a
	// service's writer with wake-ups (outboxwake, which builds it) links neither
	// Kafka nor a tracing SDK, and a store-only user of outboxddb links no
	// Lambda client either; the in-memory store (outboxmem) links neither testing nor
	// an AWS SDK, so services may link it.
	t.Run("BinaryDependencies", func(t *testing.T) {
		t.Parallel()
		const module = "github.com/spillway-dev/spillway"
		embedded := []string{"testing", module + "/outbox/outboxlocal", module + "/outbox/outboxtest", "github.com/truora/minidyn/server", "github.com/twmb/franz-go/pkg/kfake"}
		studies := []string{"testing", module + "/outbox/outboxtest", module + "/internal/steady", module + "/internal/scale",
			module + "/internal/economy", module + "/internal/fleetsim"}
		for _, c := range []struct {
			dir, tags string
			forbidden []string
			// control is a package the binary is known to link, so an
			// empty or wrong listing cannot pass.
			control string
		}{
			{"../../cmd/spillway", "", studies, module + "/outbox/outboxlocal"},
			{"../../functions/relay", "", embedded, module + "/outbox/outboxlambda"},
			{"../../functions/enqueue", "", embedded, module + "/outbox/outboxlambda"},
			{"../../functions/consumer", "", embedded, module + "/outbox/outboxinbox"},
			{"../../outbox/outboxmem", "", []string{"testing", "github.com/aws/aws-sdk-go-v2/service/dynamodb"}, module + "/outbox"},
			{"../../outbox/outboxwake", "", append([]string{"github.com/twmb/franz-go/pkg/kgo", "github.com/aws/aws-xray-sdk-go/xray",
				"go.opentelemetry.io/otel", module + "/outbox/outboxlambda"}, embedded...), "github.com/aws/aws-sdk-go-v2/service/lambda"},
			{"../../outbox/outboxddb", "", append([]string{"github.com/twmb/franz-go/pkg/kgo", "github.com/aws/aws-xray-sdk-go/xray",
				"go.opentelemetry.io/otel", module + "/outbox/outboxlambda", module + "/outbox/outboxwake",
				"github.com/aws/aws-sdk-go-v2/service/lambda"}, embedded...), "github.com/aws/aws-sdk-go-v2/service/dynamodb"},
		} {
			t.Run(c.dir+" "+c.tags, func(t *testing.T) {
				t.Parallel()
				deps := listDeps(t, c.dir, "-tags="+c.tags)
				if !slices.Contains(deps, c.control) {
					t.Fatalf("go list -deps %s does not list %s: %q", c.dir, c.control, deps)
				}
				for _, p := range c.forbidden {
					if slices.Contains(deps, p) {
						t.Errorf("%s links %s", c.dir, p)
					}
				}
			})
		}
	})
}

// listDeps returns `go list -deps [flags] dir`, skipping the test when the go tool
// is not on PATH.
func listDeps(t *testing.T, dir string, flags ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not on PATH, cannot list dependencies: %v", err)
	}
	cmd := exec.Command(goTool, append(append([]string{"list", "-deps"}, flags...), ".")...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", dir, err, stderr)
	}
	return strings.Fields(string(out))
}
