package outboxtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// FakeRequestID is the request id of every FakeDynamoDB answer.
const FakeRequestID = "REQ123"

// FakeDynamoDB is a DynamoDB endpoint for the tracers' tests: it stores
// nothing and records the trace header of every request, so a test sees
// what an instrumented client sent. It answers ListTables with an empty list and DescribeTable with a
// ResourceNotFoundException (HTTP 400); every answer carries FakeRequestID.
type FakeDynamoDB struct {
	srv *httptest.Server

	mu      sync.Mutex
	headers []string
}

// StartFakeDynamoDB serves on a loopback port until Close.
func StartFakeDynamoDB() *FakeDynamoDB {
	s := &FakeDynamoDB{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops the server.
func (s *FakeDynamoDB) Close() { s.srv.Close() }

// Client returns a client of the server in region, with static
// credentials, one attempt per call and instrument applied to its
// configuration.
func (s *FakeDynamoDB) Client(region string, instrument func(*aws.Config)) *dynamodb.Client {
	cfg := aws.Config{
		Region:           region,
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1,
		BaseEndpoint:     aws.String(s.srv.URL),
	}
	instrument(&cfg)
	return dynamodb.NewFromConfig(cfg)
}

// TraceHeaders returns the X-Amzn-Trace-Id header of each request so far,
// "" where a request had none.
func (s *FakeDynamoDB) TraceHeaders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.headers...)
}

func (s *FakeDynamoDB) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.headers = append(s.headers, r.Header.Get("X-Amzn-Trace-Id"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", FakeRequestID)
	if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".DescribeTable") {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`)
		return
	}
	_, _ = io.WriteString(w, `{"TableNames":[]}`)
}
