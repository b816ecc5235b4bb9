package repocheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The ship line (docs/development.md, "What ships and what tests"): the
// product is the library under outbox/, the Lambda functions and the CLI;
// the test backends (the embedded servers' wrapper outboxlocal, the
// in-memory store, the contract kit) and everything under internal/,
// scripts/ and examples/ (the lab, the emulators, the tools) are not. The
// line is drawn by import path, so a new package under outbox/ ships
// unless it is listed here as a test backend.
const shipModule = "github.com/spillway-dev/spillway"

// testBackends are the packages under outbox/ that exist for tests and
// the demo, not for production.
var testBackends = []string{
	shipModule + "/outbox/outboxlocal",
	shipModule + "/outbox/outboxmem",
	shipModule + "/outbox/outboxtest",
}

// testOnlyModules are the prefixes of the packages only tests, the lab
// and the demo link: the testing package, the embedded DynamoDB and
// Kafka servers, the lab's plots and profile reader.
var testOnlyModules = []string{
	"testing",
	"github.com/truora/minidyn",
	"github.com/twmb/franz-go/pkg/kfake",
	"gonum.org/v1/plot",
	"github.com/google/pprof",
}

// cliDemo is what the CLI may link across the line, for its demo and
// bench commands alone (spillway run, spillway bench): the embedded
// backends, the real-time scenarios that drive them and the profile
// reader of bench's CPU split. Never testing,
// the contract kit or the lab's simulated studies.
var cliDemo = []string{
	shipModule + "/outbox/outboxlocal",
	shipModule + "/internal/lab",
	shipModule + "/internal/bench",
	shipModule + "/internal/lambdasim",
	shipModule + "/internal/relayproc",
	shipModule + "/internal/sleep",
	shipModule + "/internal/suggest",
	"github.com/truora/minidyn",
	"github.com/twmb/franz-go/pkg/kfake",
	"github.com/google/pprof",
}

func TestShipLine(t *testing.T) {
	t.Parallel()
	deps := listModuleDeps(t)

	// ProductLinksNoTestCode fails when a shipped package, whatever links
	// it, pulls in a test backend, the lab or the testing package: a
	// user's build of outboxddb or outboxkafka, and the function
	// binaries, then stay as small as the code they run.
	t.Run("ProductLinksNoTestCode", func(t *testing.T) {
		t.Parallel()
		products := 0
		for pkg, ds := range deps {
			if !shipped(pkg) {
				continue
			}
			products++
			for _, d := range ds {
				if crossesLine(d) && !(pkg == shipModule+"/cmd/spillway" && hasPrefixIn(d, cliDemo)) {
					t.Errorf("%s ships but links %s, which only tests, the lab or the demo may link (docs/development.md, \"What ships and what tests\")", pkg, d)
				}
			}
		}
		// Positive control: the listing holds the packages the line
		// protects, with the dependencies they are known to have.
		if products < 20 || !slices.Contains(deps[shipModule+"/outbox/outboxddb"], "github.com/aws/aws-sdk-go-v2/service/dynamodb") {
			t.Fatalf("go list found %d shipped packages; outboxddb's deps %q", products, deps[shipModule+"/outbox/outboxddb"])
		}
	})

	// TheLineIsWhereItIsDrawn checks the classification itself: the test
	// backends exist and fall on the test side (so the rule above would
	// catch a product importing them), and every exception the
	// CLI has is one it uses, so the list cannot outlive its reason.
	t.Run("TheLineIsWhereItIsDrawn", func(t *testing.T) {
		t.Parallel()
		for _, b := range testBackends {
			if _, ok := deps[b]; !ok || shipped(b) || !crossesLine(b) {
				t.Errorf("test backend %s is not listed, or ships", b)
			}
		}
		cli := deps[shipModule+"/cmd/spillway"]
		for _, e := range cliDemo {
			if !slices.ContainsFunc(cli, func(d string) bool { return hasPrefixIn(d, []string{e}) }) {
				t.Errorf("the CLI no longer links %s: drop it from cliDemo", e)
			}
		}
		for _, d := range cli {
			if hasPrefixIn(d, []string{"testing", shipModule + "/outbox/outboxtest", shipModule + "/internal/fleetsim"}) {
				t.Errorf("the CLI links %s", d)
			}
		}
	})
}

// shipped reports whether the module's package pkg is part of the product.
func shipped(pkg string) bool {
	rel, ok := strings.CutPrefix(pkg, shipModule+"/")
	if !ok || slices.Contains(testBackends, pkg) {
		return false
	}
	return rel == "outbox" || strings.HasPrefix(rel, "outbox/") || strings.HasPrefix(rel, "functions/") || rel == "cmd/spillway"
}

// crossesLine reports whether a product may not link pkg: a test-only
// module or one of this module's packages that does not ship.
func crossesLine(pkg string) bool {
	if hasPrefixIn(pkg, testOnlyModules) {
		return true
	}
	return strings.HasPrefix(pkg, shipModule+"/") && !shipped(pkg)
}

// hasPrefixIn reports whether pkg is one of prefixes or a package under one.
func hasPrefixIn(pkg string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") })
}

// listModuleDeps returns every package of the module with its transitive
// non-test dependencies, from one `go list`, skipping the test when the
// go tool is not on PATH.
func listModuleDeps(t *testing.T) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not on PATH, cannot list dependencies: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	return deps
}
