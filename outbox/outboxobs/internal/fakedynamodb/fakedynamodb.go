// Package fakedynamodb is a DynamoDB endpoint for the tracers' tests: it
// answers without storing anything and records the trace header of every
// request, so a test sees what an instrumented client sent.
package fakedynamodb

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

// RequestID is the request id of every answer.
const RequestID = "REQ123"

// Server answers ListTables with an empty list and DescribeTable with a
// ResourceNotFoundException (HTTP 400); every answer carries RequestID.
type Server struct {
	srv *httptest.Server

	mu      sync.Mutex
	headers []string
}

// Start serves on a loopback port until Close.
func Start() *Server {
	s := &Server{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Client returns a client of the server in region, with static
// credentials, one attempt per call and instrument applied to its
// configuration.
func (s *Server) Client(region string, instrument func(*aws.Config)) *dynamodb.Client {
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
func (s *Server) TraceHeaders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.headers...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.headers = append(s.headers, r.Header.Get("X-Amzn-Trace-Id"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", RequestID)
	if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".DescribeTable") {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`)
		return
	}
	_, _ = io.WriteString(w, `{"TableNames":[]}`)
}
