package outbox

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestDependenciesAreStandardLibraryOnly keeps the core free of the AWS SDK,
// franz-go and everything else: adapters import outbox, never the reverse,
// so a writer that only builds messages pulls in nothing but the standard
// library.
func TestDependenciesAreStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not on PATH, cannot list dependencies: %v", err)
	}
	const self = "github.com/spillway-dev/spillway/outbox"
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	var foreign []string
	sawSelf, sawStd := false, false
	for _, p := range deps {
		if p == self {
			sawSelf = true
			continue
		}
		// A standard-library path has no dot in its first element
		// ("fmt", "crypto/rand", "vendor/golang.org/x/..."); every module
		// path starts with a domain.
		first, _, _ := strings.Cut(p, "/")
		if strings.Contains(first, ".") {
			foreign = append(foreign, p)
			continue
		}
		sawStd = sawStd || p == "encoding/binary"
	}
	// Positive controls: the listing is of this package and includes a
	// standard package it is known to import.
	if !sawSelf || !sawStd {
		t.Fatalf("go list -deps output does not look like this package's: %q", deps)
	}
	if len(foreign) > 0 {
		t.Fatalf("package outbox must import only the standard library; it depends on:\n  %s", strings.Join(foreign, "\n  "))
	}
}
