//go:build unix

package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/internal/lambdalocal"
	"github.com/spillway-dev/spillway/internal/lambdalocal/lambdatest"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestMain(m *testing.M) { lambdatest.Main(m) }

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
	lambdatest.RIE(t)
	ddb := outboxtest.NewDynamoDB(t)
	f := &fixture{ddb: ddb, kafka: outboxtest.NewKafka(t, "orders", "payments")}
	api, err := lambdalocal.StartInvokeAPI()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	f.invoke = api
	f.env = lambdatest.Env(ddb, outboxtest.CreateTable(t, ddb), map[string]string{
		outboxconf.EnvKafkaBrokers:  strings.Join(f.kafka.Brokers, ","),
		outboxconf.EnvRelayFunction: "outbox-relay",
		"AWS_ENDPOINT_URL_LAMBDA":   api.URL,
		"AWS_LAMBDA_LOG_LEVEL":      "DEBUG",
	})
	return f
}

// start runs function fn ("relay" or "enqueue") under the emulator with
// the fixture's environment plus extra.
func (f *fixture) start(t *testing.T, fn string, extra map[string]string) *lambdatest.Function {
	t.Helper()
	vars := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "outbox-" + fn}
	maps.Copy(vars, f.env)
	maps.Copy(vars, extra)
	return lambdatest.Start(t, bootstrap(t, fn), vars)
}

// bootstrap is function fn's binary.
func bootstrap(t *testing.T, fn string) string {
	return lambdatest.Bootstrap(t, filepath.Join("..", fn))
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

func invoke[T any](t *testing.T, em *lambdatest.Function, payload []byte) T {
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
	// init with an error naming the variable, with the documented prefix.
	t.Run("RelayBinaryRefusesABadConfigurationAtInit", func(t *testing.T) {
		f := newFixture(t)
		relay := f.start(t, "relay", map[string]string{outboxconf.EnvBatchSize: "lots"})
		resp, err := relay.Invoke(t.Context(), f.sample(t, "relay.schedule.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Failed() {
			t.Fatalf("a misconfigured relay answered %s", resp.Payload)
		}
		// The function's output reaches the buffer through a pipe, possibly
		// after the invoke answered; once the emulator has exited, all of it
		// has.
		relay.Close()
		if logs := relay.Output(); !strings.Contains(logs, `outboxlambda: configuration: SPILLWAY_BATCH_SIZE=\"lots\"`) || !strings.Contains(logs, "relay function cannot start") {
			t.Fatalf("init error does not name the variable and its value after outboxlambda:\n%s", logs)
		}
	})
}
