package outboxlambda

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestEnqueueEnv(t *testing.T) {
	// Without a relay function the enqueued messages wait for the
	// schedule, and the function's init warns so; beside a local endpoint
	// (SPILLWAY_DYNAMODB_ENDPOINT on loopback) no schedule runs, the user
	// runs the relay, and it does not. The deployed case reaches the same
	// server through the SDK's own endpoint variable, as Spillway's is
	// unset there; each stores a message there.
	t.Run("WarnsOfTheScheduleOnlyWhereOneRuns", func(t *testing.T) {
		ddb := outboxtest.NewDynamoDB(t)
		table := outboxtest.CreateTable(t, ddb)
		for k, v := range map[string]string{
			outboxconf.EnvTable: table, outboxconf.EnvRelayFunction: "", "AWS_REGION": "us-east-1",
			"AWS_ACCESS_KEY_ID": "spillway", "AWS_SECRET_ACCESS_KEY": "spillway", "AWS_EC2_METADATA_DISABLED": "true",
		} {
			t.Setenv(k, v)
		}
		for _, tc := range []struct {
			name, spillway, sdk string
			warns               bool
		}{
			{"local", ddb.Endpoint, "", false},
			{"deployed", "", ddb.Endpoint, true},
		} {
			t.Setenv(outboxconf.EnvDynamoDBEndpoint, tc.spillway)
			t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", tc.sdk)
			var logs strings.Builder
			h, err := NewEnqueueFromEnv(t.Context(), os.Getenv, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			resp, err := h.Handle(t.Context(), json.RawMessage(`{"topic":"orders","key":"k","value":"v"}`))
			if err != nil || len(resp.Messages) != 1 {
				t.Fatalf("%s: enqueue = %+v, %v; want the message stored on the embedded server", tc.name, resp, err)
			}
			if got := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "wait for the relay's schedule"); got != tc.warns {
				t.Errorf("%s (SPILLWAY_DYNAMODB_ENDPOINT %q): warned %v, want %v: %q", tc.name, tc.spillway, got, tc.warns, logs.String())
			}
		}
	})
}
