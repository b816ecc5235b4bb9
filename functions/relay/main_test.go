//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/internal/lambdalocal"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// rie is where `make tools` installs the emulator.
var rie = filepath.Join("..", "..", "bin", "aws-lambda-rie")

// bins are the functions' bootstraps, built once by TestMain for the host
// architecture (the arm64 build of `make build` only runs on Lambda);
// buildErr is why they are missing.
var (
	bins     = map[string]string{}
	buildErr error
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if _, err := os.Stat(rie); err != nil {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "spillway-bootstrap-")
		if err != nil {
			buildErr = err
			return m.Run()
		}
		defer os.RemoveAll(dir)
		for name, pkg := range map[string]string{"relay": ".", "enqueue": filepath.Join("..", "enqueue")} {
			out := filepath.Join(dir, name, "bootstrap")
			if buildErr = lambdalocal.Build(context.Background(), pkg, out); buildErr != nil {
				break
			}
			bins[name] = out
		}
		return m.Run()
	}())
}

// syncBuffer collects a process's output for the test log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fixture is both functions' binaries under the emulator, on the embedded
// backends, with wake-ups recorded by a stand-in Invoke API.
type fixture struct {
	ddb    *outboxlocal.DynamoDB
	kafka  *outboxlocal.Kafka
	invoke *lambdalocal.InvokeAPI
	env    map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if _, err := os.Stat(rie); err != nil {
		t.Skipf("skipping: %s is missing (run `make tools` to install aws-lambda-rie %s)", rie, lambdalocal.RIEVersion)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	ddb := outboxtest.NewDynamoDB(t)
	f := &fixture{ddb: ddb, kafka: outboxtest.NewKafka(t, "orders", "payments")}
	api, err := lambdalocal.StartInvokeAPI()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	f.invoke = api
	f.env = map[string]string{
		outboxconf.EnvTable:            outboxtest.CreateTable(t, ddb),
		outboxconf.EnvDynamoDBEndpoint: ddb.Endpoint,
		outboxconf.EnvKafkaBrokers:     strings.Join(f.kafka.Brokers, ","),
		outboxconf.EnvRelayFunction:    "outbox-relay",
		"AWS_ENDPOINT_URL_LAMBDA":      api.URL,
		"AWS_REGION":                   "us-east-1",
		"AWS_ACCESS_KEY_ID":            "spillway",
		"AWS_SECRET_ACCESS_KEY":        "spillway",
		"AWS_EC2_METADATA_DISABLED":    "true",
		"AWS_LAMBDA_LOG_LEVEL":         "DEBUG",
	}
	if ddb.External {
		// The external endpoint's credentials come from the environment.
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_PROFILE"} {
			if v := os.Getenv(k); v != "" {
				f.env[k] = v
			}
		}
	}
	return f
}

// start runs function fn under the emulator with the fixture's
// environment plus extra.
func (f *fixture) start(t *testing.T, fn string, extra map[string]string) *lambdalocal.Emulator {
	t.Helper()
	vars := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "outbox-" + fn, "PATH": os.Getenv("PATH")}
	for k, v := range f.env {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	var envList []string
	for k, v := range vars {
		envList = append(envList, k+"="+v)
	}
	out := &syncBuffer{}
	em, err := lambdalocal.Start(t.Context(), lambdalocal.Options{RIE: rie, Bootstrap: bins[fn], Env: envList, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		em.Close()
		t.Logf("%s output:\n%s", fn, out.String())
	})
	return em
}

// sample reads events/<name> with the sample topics renamed for external
// brokers.
func (f *fixture) sample(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, topic := range []string{"orders", "payments"} {
		s = strings.ReplaceAll(s, `"`+topic+`"`, `"`+f.kafka.Topic(topic)+`"`)
	}
	return []byte(s)
}

func invoke[T any](t *testing.T, em *lambdalocal.Emulator, payload []byte) T {
	t.Helper()
	resp, err := em.Invoke(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Failed() {
		t.Fatalf("function error %s: %s", resp.ErrorType, resp.ErrorMessage)
	}
	var out T
	if err := json.Unmarshal(resp.Payload, &out); err != nil {
		t.Fatalf("response %s: %v", resp.Payload, err)
	}
	return out
}

func TestBinaries(t *testing.T) {
	// UnderTheEmulator runs the real bootstraps: the enqueue
	// function stores the sample messages and sends its wake-ups to the stand-in
	// Invoke API; each wake-up is then delivered to the relay function, whose
	// invocations have a 3-second timeout, as Lambda would deliver it.
	t.Run("UnderTheEmulator", func(t *testing.T) {
		f := newFixture(t)
		enqueue := f.start(t, "enqueue", nil)

		single := invoke[outboxlambda.EnqueueResponse](t, enqueue, f.sample(t, "enqueue.single.json"))
		batch := invoke[outboxlambda.EnqueueResponse](t, enqueue, f.sample(t, "enqueue.batch.json"))
		if len(single.Messages) != 1 || single.Messages[0].Bucket != 5 || len(batch.Messages) != 5 {
			t.Fatalf("enqueued %+v and %+v", single, batch)
		}
		refused := invoke[outboxlambda.EnqueueResponse](t, enqueue, f.sample(t, "enqueue.invalid-base64.json"))
		if refused.Field != "messages[1].key" || refused.Error == "" {
			t.Fatalf("invalid request answered %+v", refused)
		}

		wakes := f.invoke.Invocations()
		if len(wakes) != 2 {
			t.Fatalf("%d wake-ups, want one per stored request: %+v", len(wakes), wakes)
		}
		for _, w := range wakes {
			if w.Function != "outbox-relay" || w.Type != "Event" {
				t.Fatalf("wake-up %+v, want an Event invoke of outbox-relay", w)
			}
		}
		if string(wakes[0].Payload) != `{"trigger":"wake","buckets":[5],"hop":0,"join":false}` {
			t.Fatalf("first wake-up %s", wakes[0].Payload)
		}

		relay := f.start(t, "relay", map[string]string{"AWS_LAMBDA_FUNCTION_TIMEOUT": "3"})
		first := invoke[outboxlambda.RelayResponse](t, relay, wakes[0].Payload)
		// Under a 3 s timeout the stop margin is 1 s: the relay claims, drains
		// everything, lingers until its budget and releases.
		if !first.Joined || first.Published != 6 || first.ReleaseSkipped || len(first.Released) == 0 {
			t.Fatalf("relay under a 3 s timeout: %+v", first)
		}
		if first.Reason != string(outbox.StopBudget) && first.Reason != string(outbox.StopDrained) {
			t.Fatalf("relay stopped for %s", first.Reason)
		}
		recs := outboxtest.Consume(t, f.kafka, f.kafka.Topic("orders"), 4)
		var ids []string
		for _, r := range recs {
			last := r.Headers[len(r.Headers)-1]
			if last.Key != outbox.DefaultMessageIDHeaderName {
				t.Fatalf("record's last header is %q, want the dedup header", last.Key)
			}
			ids = append(ids, string(last.Value))
		}
		if !slices.Contains(ids, single.Messages[0].MessageID) {
			t.Fatalf("the single message %s is not among %v", single.Messages[0].MessageID, ids)
		}

		// A warm invocation of the same environment keeps its relay id.
		sweep := invoke[outboxlambda.RelayResponse](t, relay, f.sample(t, "relay.schedule.json"))
		if sweep.Reason != string(outbox.StopNothingPending) || sweep.Joined || sweep.RelayID != first.RelayID {
			t.Fatalf("sweep after the drain: %+v (first run's relay %s)", sweep, first.RelayID)
		}
		bad, err := relay.Invoke(t.Context(), f.sample(t, "relay.invalid.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !bad.Failed() || !strings.Contains(bad.ErrorMessage, "invalid relay event") || bad.ErrorType != "InvalidEventError" {
			t.Fatalf("invalid event answered %s", bad.Payload)
		}
	})

	// RelayBinaryRefusesABadConfigurationAtInit: the function exits at
	// init with an error naming the variable.
	t.Run("RelayBinaryRefusesABadConfigurationAtInit", func(t *testing.T) {
		f := newFixture(t)
		out := &syncBuffer{}
		vars := []string{"PATH=" + os.Getenv("PATH"), "AWS_LAMBDA_FUNCTION_NAME=outbox-relay"}
		for k, v := range f.env {
			vars = append(vars, k+"="+v)
		}
		vars = append(vars, outboxconf.EnvBatchSize+"=lots")
		em, err := lambdalocal.Start(t.Context(), lambdalocal.Options{RIE: rie, Bootstrap: bins["relay"], Env: vars, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		defer em.Close()
		resp, err := em.Invoke(t.Context(), f.sample(t, "relay.schedule.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Failed() {
			t.Fatalf("a misconfigured relay answered %s", resp.Payload)
		}
		// The function's output reaches the buffer through a pipe, possibly
		// after the invoke answered; once the emulator has exited, all of it
		// has.
		em.Close()
		if logs := out.String(); !strings.Contains(logs, `SPILLWAY_BATCH_SIZE=\"lots\"`) || !strings.Contains(logs, "relay function cannot start") {
			t.Fatalf("init error does not name the variable and its value:\n%s", logs)
		}
	})
}
