package repocheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestShipTestLine holds the line between what ships and what tests
// (docs/development.md, "What ships and what tests").
func TestShipTestLine(t *testing.T) {
	t.Parallel()
	const module = "github.com/spillway-dev/spillway"

	// LibraryLinksNothingOfTheTestSide: a library package — every package
	// under outbox/ but the test backends (outboxlocal) and the contract
	// kit (outboxtest) — links neither of those, nothing from the
	// repository's internal/ (the lab, its emulators, the repository's
	// tools), no testing package, and none of the modules only the test
	// side needs (the embedded DynamoDB and Kafka, the lab's plots, the
	// bench's profile reader).
	t.Run("LibraryLinksNothingOfTheTestSide", func(t *testing.T) {
		t.Parallel()
		testSide := []string{module + "/outbox/outboxlocal", module + "/outbox/outboxtest", module + "/internal/", "testing",
			"github.com/truora/minidyn", "github.com/twmb/franz-go/pkg/kfake", "gonum.org/", "github.com/google/pprof"}
		out := goList(t, "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "./outbox/...")
		library := 0
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			fields := strings.Fields(line)
			pkg, deps := fields[0], fields[1:]
			if isTestSide(pkg, module) {
				continue
			}
			library++
			for _, d := range deps {
				for _, forbidden := range testSide {
					if d == forbidden || strings.HasSuffix(forbidden, "/") && strings.HasPrefix(d, forbidden) ||
						!strings.HasSuffix(forbidden, "/") && strings.HasPrefix(d, forbidden+"/") {
						t.Errorf("library package %s links %s", pkg, d)
					}
				}
			}
		}
		// Positive control: the listing is the library's.
		if library < 15 {
			t.Fatalf("go list ./outbox/... listed %d library packages, want the library's (15 or more):\n%s", library, out)
		}
	})

	// WhatAUserLinks: a program built on outboxddb and outboxkafka (a
	// service's writer and an in-process relay) links exactly these
	// modules beside Spillway's, which its go.mod then lists: the
	// DynamoDB client and its AWS SDK modules, the credential chain MSK
	// IAM signs with, franz-go and its compressors. Adding a module here
	// is a decision a user pays for.
	t.Run("WhatAUserLinks", func(t *testing.T) {
		t.Parallel()
		want := []string{
			"github.com/aws/aws-sdk-go-v2",
			"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream",
			"github.com/aws/aws-sdk-go-v2/config",
			"github.com/aws/aws-sdk-go-v2/credentials",
			"github.com/aws/aws-sdk-go-v2/feature/ec2/imds",
			"github.com/aws/aws-sdk-go-v2/internal/configsources",
			"github.com/aws/aws-sdk-go-v2/internal/endpoints/v2",
			"github.com/aws/aws-sdk-go-v2/internal/v4a",
			"github.com/aws/aws-sdk-go-v2/service/dynamodb",
			"github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding",
			"github.com/aws/aws-sdk-go-v2/service/internal/endpoint-discovery",
			"github.com/aws/aws-sdk-go-v2/service/internal/presigned-url",
			"github.com/aws/aws-sdk-go-v2/service/signin",
			"github.com/aws/aws-sdk-go-v2/service/sso",
			"github.com/aws/aws-sdk-go-v2/service/ssooidc",
			"github.com/aws/aws-sdk-go-v2/service/sts",
			"github.com/aws/smithy-go",
			"github.com/klauspost/compress",
			"github.com/pierrec/lz4/v4",
			"github.com/twmb/franz-go",
			"github.com/twmb/franz-go/pkg/kmsg",
		}
		var got []string
		for _, m := range strings.Fields(goList(t, "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./outbox/outboxddb", "./outbox/outboxkafka")) {
			if m != module && !slices.Contains(got, m) {
				got = append(got, m)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("a program of outboxddb and outboxkafka links the modules\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	})
}

// isTestSide reports whether pkg is on the test side of the outbox/ tree:
// the test backends and the contract kit.
func isTestSide(pkg, module string) bool {
	for _, p := range []string{module + "/outbox/outboxlocal", module + "/outbox/outboxtest"} {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// goList runs `go list args...` at the repository's root and returns its
// output, skipping the test when the go tool is not on PATH.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not on PATH, cannot list packages: %v", err)
	}
	cmd := exec.Command(goTool, append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}
