//go:build unix

package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/internal/lambdalocal"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// rie is where `make tools` installs the emulator.
var rie = filepath.Join("..", "..", "bin", "aws-lambda-rie")

// buildDir holds the bootstrap built once for the package's tests.
var buildDir string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "spillway-enqueue-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		buildDir = dir
		return m.Run()
	}())
}

// bootstrap skips without the emulator, and otherwise builds the function
// for the host architecture once.
var bootstrapOnce = sync.OnceValues(func() (string, error) {
	out := filepath.Join(buildDir, "bootstrap")
	return out, lambdalocal.Build(context.Background(), ".", out)
})

func bootstrap(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(rie); err != nil {
		t.Skipf("skipping: %s is missing (run `make tools` to install aws-lambda-rie %s)", rie, lambdalocal.RIEVersion)
	}
	bin, err := bootstrapOnce()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestEnqueueBinary(t *testing.T) {
	// AnswersEverySample runs the enqueue bootstrap under the
	// emulator and sends it every enqueue sample, one invoke at a time: valid
	// requests are stored and wake the relay through the stand-in Invoke API,
	// invalid ones are answered with the field, never with a function error.
	t.Run("AnswersEverySample", func(t *testing.T) {
		bin := bootstrap(t)
		ddb := outboxtest.NewDynamoDB(t)
		api, err := lambdalocal.StartInvokeAPI()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Close() })
		vars := []string{
			"PATH=" + os.Getenv("PATH"),
			"AWS_LAMBDA_FUNCTION_NAME=outbox-enqueue",
			"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=spillway", "AWS_SECRET_ACCESS_KEY=spillway", "AWS_EC2_METADATA_DISABLED=true",
			"AWS_ENDPOINT_URL_LAMBDA=" + api.URL,
			outboxconf.EnvTable + "=" + outboxtest.CreateTable(t, ddb),
			outboxconf.EnvDynamoDBEndpoint + "=" + ddb.Endpoint,
			outboxconf.EnvRelayFunction + "=outbox-relay",
		}
		out := &lockedWriter{w: &strings.Builder{}}
		em, err := lambdalocal.Start(t.Context(), lambdalocal.Options{RIE: rie, Bootstrap: bin, Env: vars, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		defer em.Close()

		// The expected results of every sample, shared with outboxlambda's
		// TestSamples/EverySampleEventRoundTrips.
		var cases map[string]enqueueExpectation
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "sample-events.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &cases); err != nil {
			t.Fatalf("testdata/sample-events.json: %v", err)
		}
		maps.DeleteFunc(cases, func(name string, _ enqueueExpectation) bool { return !strings.HasPrefix(name, "enqueue.") })
		files, err := filepath.Glob(filepath.Join("..", "..", "events", "enqueue.*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != len(cases) {
			t.Errorf("%d enqueue samples in events/, %d expectations here", len(files), len(cases))
		}
		stored := 0
		for _, file := range files {
			name := filepath.Base(file)
			want, ok := cases[name]
			if !ok {
				t.Errorf("events/%s has no expectation", name)
				continue
			}
			payload, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := em.Invoke(t.Context(), payload)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Failed() {
				t.Errorf("%s: function error %s: %s", name, resp.ErrorType, resp.ErrorMessage)
				continue
			}
			var got outboxlambda.EnqueueResponse
			if err := json.Unmarshal(resp.Payload, &got); err != nil {
				t.Fatalf("%s: response %s: %v", name, resp.Payload, err)
			}
			if len(got.Messages) != want.Messages || got.Field != want.Field {
				t.Errorf("%s: response %s, want %d messages, field %q", name, resp.Payload, want.Messages, want.Field)
			}
			if len(got.Messages) > 0 {
				stored++
			}
		}
		if wakes := api.Invocations(); len(wakes) != stored {
			t.Errorf("%d wake-ups for %d stored requests", len(wakes), stored)
		}
		t.Logf("enqueue output:\n%s", out.String())
	})

	// NeedsATable: without SPILLWAY_TABLE the function exits
	// at init, naming the variable.
	t.Run("NeedsATable", func(t *testing.T) {
		bin := bootstrap(t)
		out := &lockedWriter{w: &strings.Builder{}}
		em, err := lambdalocal.Start(context.Background(), lambdalocal.Options{RIE: rie, Bootstrap: bin,
			Env: []string{"PATH=" + os.Getenv("PATH"), "AWS_REGION=us-east-1"}, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		defer em.Close()
		resp, err := em.Invoke(t.Context(), []byte(`{"topic":"orders","value":"v"}`))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Failed() {
			t.Fatalf("an enqueue function without a table answered %s", resp.Payload)
		}
		em.Close()
		if logs := out.String(); !strings.Contains(logs, "SPILLWAY_TABLE") || !strings.Contains(logs, "enqueue function cannot start") {
			t.Fatalf("init error does not name the variable:\n%s", logs)
		}
	})
}

// lockedWriter serialises the emulator's two output streams.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// enqueueExpectation is the expected result of an enqueue sample in
// testdata/sample-events.json: the stored message count, or the refused
// field.
type enqueueExpectation struct {
	Messages int    `json:"messages"`
	Field    string `json:"field"`
}
