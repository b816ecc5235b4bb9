package outboxlocal

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// inMemoryTransport serves the embedded DynamoDB's requests in the caller's
// goroutine, without a socket. A call then blocks only on what the handler
// blocks on, which a testing/synctest bubble can see: with a TCP loopback
// the bubble could not tell a goroutine waiting for its answer from one
// still working, and its clock would never move.
type inMemoryTransport struct {
	handler http.Handler
}

// RoundTrip implements http.RoundTripper.
func (t inMemoryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := &responseBuffer{header: http.Header{}}
	t.handler.ServeHTTP(w, req)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.header.Set("Content-Length", strconv.Itoa(w.body.Len()))
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(&w.body),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

// responseBuffer is the http.ResponseWriter of one in-memory call.
type responseBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *responseBuffer) Header() http.Header { return w.header }

func (w *responseBuffer) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *responseBuffer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
