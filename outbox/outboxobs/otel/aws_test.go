package otel

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func attributes(s *tracepb.Span) map[string]string {
	got := map[string]string{}
	for _, kv := range s.Attributes {
		v := kv.Value
		if v.GetStringValue() != "" {
			got[kv.Key] = v.GetStringValue()
		} else {
			got[kv.Key] = v.String()
		}
	}
	return got
}

func TestAWS(t *testing.T) {
	t.Run("InstrumentAWSRecordsEachOperationUnderTheCallersSpan", func(t *testing.T) {
		p, recv := newProvider(t)
		fake := outboxtest.StartFakeDynamoDB()
		t.Cleanup(fake.Close)
		client := fake.Client("eu-west-1", p.InstrumentAWS)

		// Outside a root: no span, no header.
		if _, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
			t.Fatal(err)
		}
		ctx, end := p.Start(t.Context(), "cli")
		if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("missing")}); err == nil {
			t.Fatal("DescribeTable of a missing table succeeded")
		}
		if err := end(nil); err != nil {
			t.Fatal(err)
		}
		spans := recv.Spans()
		if len(spans) != 3 || spans[0].Name != "DynamoDB.ListTables" || spans[1].Name != "DynamoDB.DescribeTable" || spans[2].Name != "cli" {
			names := []string{}
			for _, s := range spans {
				names = append(names, s.Name)
			}
			t.Fatalf("exported %v, want DynamoDB.ListTables, DynamoDB.DescribeTable, cli", names)
		}
		list, describe, root := spans[0], spans[1], spans[2]
		for _, s := range []*tracepb.Span{list, describe} {
			if s.Kind != tracepb.Span_SPAN_KIND_CLIENT || string(s.ParentSpanId) != string(root.SpanId) {
				t.Errorf("%s: kind %v, parent %x; want a client span under the root %x", s.Name, s.Kind, s.ParentSpanId, root.SpanId)
			}
		}
		got := attributes(list)
		for k, want := range map[string]string{"rpc.system.name": "aws-api", "rpc.method": "DynamoDB/ListTables", "cloud.region": "eu-west-1",
			"aws.request_id": outboxtest.FakeRequestID, "http.response.status_code": "int_value:200"} {
			if got[k] != want {
				t.Errorf("ListTables attribute %s = %q, want %q", k, got[k], want)
			}
		}
		if list.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("ListTables status %v", list.Status)
		}
		got = attributes(describe)
		if describe.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(describe.Status.GetMessage(), "ResourceNotFoundException") ||
			got["error.type"] == "" || got["http.response.status_code"] != "int_value:400" {
			t.Errorf("DescribeTable status %v, attributes %v; want the error", describe.Status, got)
		}
		// Each call sent the X-Ray header of its own span; the first, outside
		// a root, sent none.
		tid := hex.EncodeToString(root.TraceId)
		headers := fake.TraceHeaders()
		if len(headers) != 3 || headers[0] != "" {
			t.Fatalf("trace headers %q, want none and then two", headers)
		}
		for i, s := range []*tracepb.Span{list, describe} {
			want := "Root=1-" + tid[:8] + "-" + tid[8:] + ";Parent=" + hex.EncodeToString(s.SpanId) + ";Sampled=1"
			if headers[i+1] != want {
				t.Errorf("%s sent %q, want %q", s.Name, headers[i+1], want)
			}
		}
	})
}
