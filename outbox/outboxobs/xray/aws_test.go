package xray

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-xray-sdk-go/instrumentation/awsv2"
	awsxray "github.com/aws/aws-xray-sdk-go/xray"
	"github.com/aws/aws-xray-sdk-go/xraylog"

	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func newClient(t *testing.T, instrument func(*aws.Config)) (*dynamodb.Client, *outboxtest.FakeDynamoDB) {
	t.Helper()
	fake := outboxtest.StartFakeDynamoDB()
	t.Cleanup(fake.Close)
	return fake.Client("us-east-1", instrument), fake
}

func TestAWS(t *testing.T) {
	t.Run("InstrumentAWSRecordsCallsUnderASpan", func(t *testing.T) {
		d := outboxtest.NewXRayDaemon(t)
		client, fake := newClient(t, InstrumentAWS)

		ctx, end := Enable(context.Background(), "spillway-cli")
		dctx, span := Tracer{}.Start(ctx, "delete")
		if _, err := client.ListTables(dctx, &dynamodb.ListTablesInput{}); err != nil {
			t.Fatal(err)
		}
		span.End(nil)
		end(nil)

		root, raw := next(t, d)
		t.Logf("document: %s", raw)
		del := subsegments(t, root)[0]
		calls := subsegments(t, del)
		if len(calls) != 1 || calls[0]["name"] != "DynamoDB" || calls[0]["namespace"] != "aws" {
			t.Fatalf("delete span holds %v, want one DynamoDB call", names(calls))
		}
		awsData := calls[0]["aws"].(map[string]any)
		if awsData["operation"] != "ListTables" || awsData["request_id"] != outboxtest.FakeRequestID {
			t.Fatalf("call aws data = %v", awsData)
		}
		if seen := fake.TraceHeaders(); len(seen) != 1 || !strings.HasPrefix(seen[0], "Root="+root["trace_id"].(string)+";Parent="+calls[0]["id"].(string)) {
			t.Fatalf("DynamoDB saw trace header %q, want Root=%v;Parent=%v", seen, root["trace_id"], calls[0]["id"])
		}
	})

	t.Run("InstrumentAWSIsQuietWhenInactive", func(t *testing.T) {
		d := outboxtest.NewXRayDaemon(t)
		var logs bytes.Buffer
		awsxray.SetLogger(xraylog.NewDefaultLogger(&logs, xraylog.LogLevelDebug))
		t.Cleanup(func() { awsxray.SetLogger(xraylog.NewDefaultLogger(io.Discard, xraylog.LogLevelError)) })
		const complaint = "segment cannot be found"

		// Positive control: the bare SDK instrumentor complains on every call.
		bare, _ := newClient(t, func(cfg *aws.Config) { awsv2.AWSV2Instrumentor(&cfg.APIOptions) })
		if _, err := bare.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), complaint) {
			t.Fatalf("positive control: the bare instrumentor did not log %q:\n%s", complaint, logs.String())
		}
		logs.Reset()

		client, fake := newClient(t, InstrumentAWS)
		if _, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logs.String(), complaint) {
			t.Fatalf("an untraced call logged a missing context:\n%s", logs.String())
		}
		if seen := fake.TraceHeaders(); len(seen) != 1 || seen[0] != "" {
			t.Fatalf("an untraced call sent trace header %q", seen)
		}
		// Nothing was sent for the untraced calls: the sentinel comes first.
		_, end := Enable(context.Background(), "sentinel")
		end(nil)
		if doc, _ := next(t, d); doc["name"] != "sentinel" {
			t.Fatalf("first document is %v, want the sentinel", doc["name"])
		}
	})
}
