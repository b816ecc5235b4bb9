//go:build unix

package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/internal/lambdalocal"
	"github.com/spillway-dev/spillway/internal/lambdalocal/lambdatest"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestMain(m *testing.M) { lambdatest.Main(m) }

func TestEnqueueBinary(t *testing.T) {
	// AnswersEverySample runs the enqueue bootstrap under the emulator and
	// sends it every enqueue sample, one invoke at a time: valid requests
	// are stored and wake the relay through the stand-in Invoke API,
	// invalid ones are answered with the field, never with a function
	// error.
	t.Run("AnswersEverySample", func(t *testing.T) {
		ddb := outboxtest.NewDynamoDB(t)
		api := invokeAPI(t)
		em := start(t, ddb, outboxtest.CreateTable(t, ddb), api)

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
	})

	// NeedsATable: without SPILLWAY_TABLE the function exits at init,
	// naming the variable after the documented prefix.
	t.Run("NeedsATable", func(t *testing.T) {
		em := lambdatest.Start(t, lambdatest.Bootstrap(t, "."), map[string]string{"PATH": os.Getenv("PATH"), "AWS_REGION": "us-east-1"})
		resp, err := em.Invoke(t.Context(), []byte(`{"topic":"orders","value":"v"}`))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Failed() {
			t.Fatalf("an enqueue function without a table answered %s", resp.Payload)
		}
		em.Close()
		if logs := em.Output(); !strings.Contains(logs, "outboxlambda: configuration: SPILLWAY_TABLE") || !strings.Contains(logs, "enqueue function cannot start") {
			t.Fatalf("init error does not name the variable after outboxlambda:\n%s", logs)
		}
	})

	// BadBodiesGetTheErrorAnswer: bodies that are no request at all get the
	// function's {"error":…} answer, like any refused request, never the
	// runtime library's decoding error, and nothing is written.
	t.Run("BadBodiesGetTheErrorAnswer", func(t *testing.T) {
		ddb := outboxtest.NewDynamoDB(t)
		api := invokeAPI(t)
		table := outboxtest.CreateTable(t, ddb)
		em := start(t, ddb, table, api)
		for name, body := range map[string][]byte{
			"garbage":            []byte("this is not JSON {"),
			"empty":              {},
			"7 MB":               []byte(`{"topic":"orders","value":"` + strings.Repeat("x", 7<<20) + `"}`),
			"nested 20,000 deep": []byte(`{"topic":"orders","value":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `,"valueEncoding":"json"}`),
		} {
			resp, err := em.Invoke(t.Context(), body)
			if err != nil {
				t.Fatal(err)
			}
			var got outboxlambda.EnqueueResponse
			if resp.Failed() || json.Unmarshal(resp.Payload, &got) != nil || got.Error == "" || len(got.Messages) != 0 {
				t.Errorf("%s: the runtime received %s %s, want an {\"error\":…} answer", name, resp.ErrorType, truncate(resp.Payload))
			}
		}
		store, err := outboxddb.NewStore(ddb.Client, outboxddb.StoreOptions{Options: outboxddb.Options{TableName: table}})
		if err != nil {
			t.Fatal(err)
		}
		if bl, err := store.Backlog(t.Context()); err != nil || bl.Pending != 0 || len(api.Invocations()) != 0 {
			t.Fatalf("after the bad bodies: %+v, %v, %d wake-ups; want nothing written", bl, err, len(api.Invocations()))
		}
	})

	// ADynamoDBFailureIsNamed: a write the table refuses (it was deleted
	// under the warm function) reaches Lambda with its service and code as
	// errorType, not aws-lambda-go's name for a wrapped error.
	t.Run("ADynamoDBFailureIsNamed", func(t *testing.T) {
		ddb := outboxtest.NewDynamoDB(t)
		table := outboxtest.CreateTable(t, ddb)
		em := start(t, ddb, table, invokeAPI(t))
		single, err := os.ReadFile(filepath.Join("..", "..", "events", "enqueue.single.json"))
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := em.Invoke(t.Context(), single); err != nil || resp.Failed() {
			t.Fatalf("first enqueue: %+v, %v", resp, err)
		}
		if _, err := ddb.Client.DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Fatal(err)
		}
		resp, err := em.Invoke(t.Context(), single)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorType != "DynamoDB.ResourceNotFoundException" || !strings.Contains(resp.ErrorMessage, "outboxlambda: enqueue 1 message(s)") {
			t.Fatalf("the runtime received %s %q, want DynamoDB.ResourceNotFoundException", resp.ErrorType, resp.ErrorMessage)
		}
	})
}

// start runs the enqueue bootstrap under the emulator on ddb's table,
// waking outbox-relay through api.
func start(t *testing.T, ddb *outboxlocal.DynamoDB, table string, api *lambdalocal.InvokeAPI) *lambdatest.Function {
	t.Helper()
	return lambdatest.Start(t, lambdatest.Bootstrap(t, "."), lambdatest.Env(ddb, table, map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":  "outbox-enqueue",
		"AWS_ENDPOINT_URL_LAMBDA":   api.URL,
		outboxconf.EnvRelayFunction: "outbox-relay",
	}))
}

// invokeAPI is a stand-in Lambda Invoke API for the test.
func invokeAPI(t *testing.T) *lambdalocal.InvokeAPI {
	t.Helper()
	api, err := lambdalocal.StartInvokeAPI()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	return api
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// enqueueExpectation is the expected result of an enqueue sample in
// testdata/sample-events.json: the stored message count, or the refused
// field.
type enqueueExpectation struct {
	Messages int    `json:"messages"`
	Field    string `json:"field"`
}
