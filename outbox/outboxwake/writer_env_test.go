package outboxwake_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

// lambdaServer answers the Lambda Invoke API on loopback and records the
// payloads it got.
type lambdaServer struct {
	mu       sync.Mutex
	paths    []string
	payloads []outboxwake.Payload
}

func (s *lambdaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var p outboxwake.Payload
	_ = json.Unmarshal(body, &p)
	s.mu.Lock()
	s.paths, s.payloads = append(s.paths, r.URL.Path), append(s.payloads, p)
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func testAWSConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	}
}

func TestWriterEnv(t *testing.T) {
	t.Run("FromEnvCommitsAndWakesTheRelayFunction", func(t *testing.T) {
		db := outboxtest.NewDynamoDB(t)
		table := outboxtest.CreateTable(t, db)
		lam := &lambdaServer{}
		srv := httptest.NewServer(lam)
		defer srv.Close()
		vars := map[string]string{
			outboxconf.EnvTable:            table,
			outboxconf.EnvBucketCount:      "16",
			outboxconf.EnvTopics:           "orders",
			outboxconf.EnvDynamoDBEndpoint: db.Endpoint,
			outboxconf.EnvRelayFunction:    "spillway-relay",
		}
		w, err := outboxwake.WriterFromEnv(testAWSConfig(srv.URL), func(k string) string { return vars[k] }, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := outbox.NewMessage("orders", []byte("order-1"), []byte("paid"), outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := w.Commit(t.Context(), func(_ context.Context, tx *outboxddb.Tx) error { return tx.Enqueue(msg) })
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := outbox.ComputeBucket(msg.Key, msg.ID, 16, nil); stored[0].Bucket() != b {
			t.Fatalf("stored in bucket %d, want %d: the environment's 16 buckets", stored[0].Bucket(), b)
		}
		lam.mu.Lock()
		defer lam.mu.Unlock()
		want := []outboxwake.Payload{{Trigger: outbox.TriggerWake, Buckets: []int{stored[0].Bucket()}}}
		if !reflect.DeepEqual(lam.payloads, want) || lam.paths[0] != "/2015-03-31/functions/spillway-relay/invocations" {
			t.Fatalf("invokes %v %+v, want one wake-up of spillway-relay %+v", lam.paths, lam.payloads, want)
		}
		other, err := outbox.NewMessage("payments", nil, nil, outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Enqueue(t.Context(), other); !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Fatalf("enqueue to a topic outside SPILLWAY_TOPICS: %v, want outbox.ErrInvalidMessage", err)
		}
	})

	// Without a relay function the messages wait for the schedule, and the
	// writer warns so; beside a local endpoint no schedule runs (the user
	// runs the relay), and it does not.
	t.Run("FromEnvWarnsOfTheScheduleOnlyWhereOneRuns", func(t *testing.T) {
		for endpoint, warns := range map[string]bool{
			"": true,
			"https://dynamodb.eu-west-1.amazonaws.com": true,
			"http://10.0.0.5:8000":                     true,
			"http://127.0.0.1:8000":                    false,
			"http://localhost:4566":                    false,
			"http://[::1]:8000":                        false,
		} {
			var logs strings.Builder
			vars := map[string]string{outboxconf.EnvTable: "t", outboxconf.EnvDynamoDBEndpoint: endpoint}
			if _, err := outboxwake.WriterFromEnv(testAWSConfig("http://127.0.0.1:1"), func(k string) string { return vars[k] }, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(logs.String(), "wait for the relay's schedule"); got != warns {
				t.Errorf("endpoint %q: warned %v, want %v: %q", endpoint, got, warns, logs.String())
			}
		}
	})

	t.Run("FromEnvNamesTheUnusableVariable", func(t *testing.T) {
		for name, tc := range map[string]struct {
			vars     map[string]string
			variable string
		}{
			"no table":         {map[string]string{}, outboxconf.EnvTable},
			"zero buckets":     {map[string]string{outboxconf.EnvTable: "t", outboxconf.EnvBucketCount: "0"}, outboxconf.EnvBucketCount},
			"blank topic":      {map[string]string{outboxconf.EnvTable: "t", outboxconf.EnvTopics: "orders,,x"}, outboxconf.EnvTopics},
			"endpoint":         {map[string]string{outboxconf.EnvTable: "t", outboxconf.EnvDynamoDBEndpoint: "localhost:8000"}, outboxconf.EnvDynamoDBEndpoint},
			"relay function":   {map[string]string{outboxconf.EnvTable: "t", outboxconf.EnvRelayFunction: "relay fn"}, outboxconf.EnvRelayFunction},
			"lease duration":   {map[string]string{outboxconf.EnvTable: "t", outboxconf.EnvLeaseDuration: "30"}, outboxconf.EnvLeaseDuration},
			"generation check": {map[string]string{outboxconf.EnvTable: "t", outboxconf.EnvGenerationCheck: "yes"}, outboxconf.EnvGenerationCheck},
		} {
			_, err := outboxwake.WriterFromEnv(testAWSConfig("http://127.0.0.1:1"), func(k string) string { return tc.vars[k] }, slog.New(slog.DiscardHandler))
			var ve *outboxconf.VariableError
			if !errors.As(err, &ve) || ve.Variable != tc.variable || !errors.Is(err, outbox.ErrMisconfigured) {
				t.Errorf("%s: error %v, want a *outboxconf.VariableError naming %s", name, err, tc.variable)
			}
		}
	})
}
