package outboxlocal

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TracesPath is where OTLP/HTTP exporters send spans.
const TracesPath = "/v1/traces"

// maxBody bounds one export request (the collector's default is 20 MiB).
const maxBody = 20 << 20

// OTLPReceiver receives OTLP/HTTP trace exports on loopback: the trace
// collector of the local mode (`spillway run`) and of the tracing tests. It is safe for concurrent use.
type OTLPReceiver struct {
	// URL is the base URL to put in OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	server *http.Server
	mu     sync.Mutex
	spans  []*tracepb.Span
	count  int
}

// StartOTLPReceiver listens on a free port of 127.0.0.1.
func StartOTLPReceiver() (*OTLPReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("outboxlocal: OTLP receiver: listen: %w", err)
	}
	r := &OTLPReceiver{URL: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+TracesPath, r.export)
	r.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.server.Serve(ln) }()
	return r, nil
}

// Spans returns the spans received so far, in arrival order.
func (r *OTLPReceiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Requests returns how many export requests were accepted.
func (r *OTLPReceiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Close stops the server.
func (r *OTLPReceiver) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.server.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("outboxlocal: OTLP receiver: close: %w", err)
	}
	return nil
}

// export decodes one ExportTraceServiceRequest, as the OTLP/HTTP
// specification describes: protobuf body, optionally gzip-compressed.
func (r *OTLPReceiver) export(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("content type %q: only application/x-protobuf is accepted", ct), http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.count++
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	r.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}
