package otel

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// fakeDynamoDB answers ListTables with an empty list, or with a
// ResourceNotFoundException for DescribeTable, and records the trace
// headers it received.
type fakeDynamoDB struct {
	mu      sync.Mutex
	headers []string
}

func (f *fakeDynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Get("X-Amzn-Trace-Id"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", "REQ123")
	if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".DescribeTable") {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`)
		return
	}
	_, _ = io.WriteString(w, `{"TableNames":[]}`)
}

func (f *fakeDynamoDB) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.headers...)
}

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

func TestInstrumentAWSRecordsEachOperationUnderTheCallersSpan(t *testing.T) {
	p, recv := newProvider(t)
	fake := &fakeDynamoDB{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	cfg := aws.Config{
		Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1, BaseEndpoint: aws.String(srv.URL),
	}
	p.InstrumentAWS(&cfg)
	client := dynamodb.NewFromConfig(cfg)

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
		"aws.request_id": "REQ123", "http.response.status_code": "int_value:200"} {
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
	headers := fake.seen()
	if len(headers) != 3 || headers[0] != "" {
		t.Fatalf("trace headers %q, want none and then two", headers)
	}
	for i, s := range []*tracepb.Span{list, describe} {
		want := "Root=1-" + tid[:8] + "-" + tid[8:] + ";Parent=" + hex.EncodeToString(s.SpanId) + ";Sampled=1"
		if headers[i+1] != want {
			t.Errorf("%s sent %q, want %q", s.Name, headers[i+1], want)
		}
	}
}
