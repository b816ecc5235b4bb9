//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/internal/lambdalocal/lambdatest"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestMain(m *testing.M) { lambdatest.Main(m) }

// TestConsumerBinary runs the consumer bootstrap under the emulator, as
// Lambda runs it for a Kafka event source mapping, and asserts what the
// runtime receives for each payload: success only when every record got
// its verdict, so that Lambda commits the batch's offsets only then.
func TestConsumerBinary(t *testing.T) {
	// AnswersEachPayload, under each tracing mode (the span export's
	// result must never stand in for the batch's): the repository's sample
	// batch succeeds and is applied once, its retry too; the undecodable
	// sample fails the invocation with the inbox's BatchError and applies
	// nothing; AWS's own MSK sample (aws-lambda-go's testdata) carries no
	// message id and fails its partition; what is not a Kafka batch at all
	// is an InvalidEventError and writes nothing.
	t.Run("AnswersEachPayload", func(t *testing.T) {
		recv, err := outboxlocal.StartOTLPReceiver()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = recv.Close() })
		for _, mode := range []string{outboxconf.TracingXRay, outboxconf.TracingOff, outboxconf.TracingOTel} {
			t.Run(mode, func(t *testing.T) {
				ddb := outboxtest.NewDynamoDB(t)
				table := outboxtest.CreateTable(t, ddb)
				em := lambdatest.Start(t, lambdatest.Bootstrap(t, "."), lambdatest.Env(ddb, table, map[string]string{
					"AWS_LAMBDA_FUNCTION_NAME":    "outbox-consumer",
					outboxconf.EnvTracing:         mode,
					"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL,
				}))
				for _, c := range []struct {
					name, file string
					payload    []byte
					// errorType is what the runtime must receive; "" is
					// success.
					errorType string
					// applied is each order's Applied count afterwards.
					applied map[string]string
				}{
					{name: "sample", file: "events/consumer.kafka.json", applied: map[string]string{"order-7": "2", "order-9": "1"}},
					{name: "sample retried", file: "events/consumer.kafka.json", applied: map[string]string{"order-7": "2", "order-9": "1"}},
					{name: "undecodable", file: "events/consumer.undecodable.json", errorType: "BatchError", applied: map[string]string{"order-8": ""}},
					{name: "AWS MSK sample", payload: awsKafkaSample(t), errorType: "BatchError"},
					{name: "relay schedule", file: "events/relay.schedule.json", errorType: "InvalidEventError"},
					{name: "null", payload: []byte("null"), errorType: "InvalidEventError"},
					{name: "garbage", payload: []byte("this is not JSON {"), errorType: "InvalidEventError"},
					{name: "empty", payload: []byte{}, errorType: "InvalidEventError"},
					{name: "7 MB", payload: []byte(`{"eventSource":"aws:kafka","records":{},"pad":"` + strings.Repeat("x", 7<<20) + `"}`), errorType: "InvalidEventError"},
					{name: "nested 20,000 deep", payload: []byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000)), errorType: "InvalidEventError"},
				} {
					payload := c.payload
					if c.file != "" {
						if payload, err = os.ReadFile(filepath.Join("..", "..", c.file)); err != nil {
							t.Fatal(err)
						}
					}
					before := items(t, ddb, table)
					resp, err := em.Invoke(t.Context(), payload)
					if err != nil {
						t.Fatal(err)
					}
					if resp.ErrorType != c.errorType {
						t.Errorf("%s: the runtime received %q %.300s, want errorType %q", c.name, resp.ErrorType, resp.Payload, c.errorType)
					}
					// A batch that failed may record its attempts; a payload
					// that is no batch writes nothing at all.
					if c.errorType == "InvalidEventError" && items(t, ddb, table) != before {
						t.Errorf("%s: a refused payload wrote to the table", c.name)
					}
					t.Logf("%s: the runtime received %q %.200s", c.name, resp.ErrorType, resp.Payload)
					for order, want := range c.applied {
						if got := applied(t, ddb, table, order); got != want {
							t.Errorf("%s: %s applied %q times, want %q", c.name, order, got, want)
						}
					}
				}
			})
		}
	})
}

// awsKafkaSample is aws-lambda-go's own sample event of an Amazon MSK
// event source mapping, from the module cache.
func awsKafkaSample(t *testing.T) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("locate aws-lambda-go: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", "kafka-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// items counts the table's items.
func items(t *testing.T, ddb *outboxlocal.DynamoDB, table string) int32 {
	t.Helper()
	out, err := ddb.Client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Count
}

// applied is the Applied count of order's item, "" when it has none.
func applied(t *testing.T, ddb *outboxlocal.DynamoDB, table, order string) string {
	t.Helper()
	pk, sk := outboxlocal.DefaultPartitionKey, outboxlocal.DefaultSortKey
	out, err := ddb.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{pk: &types.AttributeValueMemberS{Value: "ORDER#" + order}, sk: &types.AttributeValueMemberS{Value: "ORDER"}}})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := out.Item["Applied"].(*types.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}
