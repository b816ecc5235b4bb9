//go:build unix

// Package lambdatest runs the functions' bootstrap binaries under AWS's
// Runtime Interface Emulator in tests, as Lambda runs them: the one home
// of what the function packages' tests share (the emulator's path, the
// builds, the environment, the output). The emulator is a test
// prerequisite, installed by `make tools`, which `make test` runs first:
// a test without it fails and says so, it is never skipped.
package lambdatest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/internal/lambdalocal"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// buildDir holds the bootstraps Main's test binary built; builds maps a
// package directory to its build.
var (
	buildDir string
	builds   sync.Map // string -> func() (string, error)
)

// Main runs a function package's tests (call it from TestMain): the
// bootstraps they build live in a directory removed at the end.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "spillway-bootstrap-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	buildDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// RIE returns the emulator's path, bin/aws-lambda-rie at the module's
// root, and fails t when it is missing.
func RIE(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie := filepath.Join(root, "bin", "aws-lambda-rie")
	if _, err := os.Stat(rie); err != nil {
		t.Fatalf("the function binaries' tests need AWS's Lambda Runtime Interface Emulator at %s: run `make tools` (aws-lambda-rie %s; `make test` does it): %v",
			rie, lambdalocal.RIEVersion, err)
	}
	return rie
}

// Bootstrap builds the function main in pkgDir for this machine, once per
// test binary, and returns the binary's path.
func Bootstrap(t testing.TB, pkgDir string) string {
	t.Helper()
	if buildDir == "" {
		t.Fatal("lambdatest: call lambdatest.Main from the package's TestMain")
	}
	abs, err := filepath.Abs(pkgDir)
	if err != nil {
		t.Fatal(err)
	}
	build, _ := builds.LoadOrStore(abs, sync.OnceValues(func() (string, error) {
		out := filepath.Join(buildDir, filepath.Base(abs), "bootstrap")
		return out, lambdalocal.Build(context.Background(), abs, out)
	}))
	bin, err := build.(func() (string, error))()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Env is a function's environment on ddb: its table, the endpoint, and
// AWS settings that reach nothing outside the machine (no credentials
// chain, no metadata service), plus extra. With an external endpoint the
// AWS variables of the test's environment pass through.
func Env(ddb *outboxlocal.DynamoDB, table string, extra map[string]string) map[string]string {
	env := map[string]string{
		"PATH":                         os.Getenv("PATH"),
		outboxconf.EnvTable:            table,
		outboxconf.EnvDynamoDBEndpoint: ddb.Endpoint,
		"AWS_REGION":                   "us-east-1",
		"AWS_ACCESS_KEY_ID":            "spillway",
		"AWS_SECRET_ACCESS_KEY":        "spillway",
		"AWS_EC2_METADATA_DISABLED":    "true",
	}
	if ddb.External {
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_PROFILE"} {
			if v := os.Getenv(k); v != "" {
				env[k] = v
			}
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// Function is one function's execution environment under the emulator.
type Function struct {
	*lambdalocal.Emulator
	out *output
}

// Start starts bin under the emulator with env (nothing else of the
// process environment), ends it with the test, and logs its output then.
func Start(t testing.TB, bin string, env map[string]string) *Function {
	t.Helper()
	vars := make([]string, 0, len(env))
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	sort.Strings(vars)
	out := &output{}
	em, err := lambdalocal.Start(context.Background(), lambdalocal.Options{RIE: RIE(t), Bootstrap: bin, Env: vars, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		em.Close()
		t.Logf("%s output:\n%s", filepath.Base(filepath.Dir(bin)), out.String())
	})
	return &Function{Emulator: em, out: out}
}

// Output returns what the function and the emulator wrote so far; all of
// it once the emulator has exited (Close, Terminate).
func (f *Function) Output() string { return f.out.String() }

// output collects the emulator's two streams.
type output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("lambdatest: no go.mod above the working directory")
		}
		dir = parent
	}
}
