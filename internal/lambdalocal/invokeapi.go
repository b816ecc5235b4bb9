//go:build unix

package lambdalocal

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// Invocation is one Invoke request the InvokeAPI received.
type Invocation struct {
	// Function is the FunctionName of the request path.
	Function string
	// Type is the X-Amz-Invocation-Type header (Event for wake-ups).
	Type string
	// Payload is the request body.
	Payload []byte
}

// InvokeAPI stands in for the Lambda Invoke API on loopback: it records
// every invoke and answers 202 Accepted, as Lambda answers an Event invoke.
// Point a function at it with AWS_ENDPOINT_URL_LAMBDA=URL.
type InvokeAPI struct {
	// URL is the base URL to use as the endpoint.
	URL string
	// OnInvoke, when set, is called with every invocation as it arrives.
	OnInvoke func(Invocation)

	srv *http.Server
	mu  sync.Mutex
	got []Invocation
	// stall, once closed by Close, releases the invokes Stall holds.
	stall   bool
	closing chan struct{}
}

// Stall makes the API accept every later invoke and never answer it until
// Close, as a Lambda endpoint the caller cannot get an answer from (a
// relay in a VPC without a route to the Lambda API). Invocations still
// records them.
func (a *InvokeAPI) Stall() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stall = true
}

// StartInvokeAPI listens on a free loopback port.
func StartInvokeAPI() (*InvokeAPI, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &InvokeAPI{URL: "http://" + l.Addr().String(), closing: make(chan struct{})}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve)}
	go func() { _ = a.srv.Serve(l) }()
	return a, nil
}

// serve handles POST /2015-03-31/functions/{name}/invocations.
func (a *InvokeAPI) serve(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
	name, isInvoke := strings.CutSuffix(name, "/invocations")
	if r.Method != http.MethodPost || !ok || !isInvoke {
		http.Error(w, `{"Type":"User","message":"only Invoke is served here"}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	inv := Invocation{Function: name, Type: r.Header.Get("X-Amz-Invocation-Type"), Payload: body}
	a.mu.Lock()
	a.got = append(a.got, inv)
	on, stall := a.OnInvoke, a.stall
	a.mu.Unlock()
	if on != nil {
		on(inv)
	}
	if stall {
		select {
		case <-a.closing:
		case <-r.Context().Done():
		}
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// Invocations returns the invocations received so far.
func (a *InvokeAPI) Invocations() []Invocation {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Invocation(nil), a.got...)
}

// Close stops the server and releases the stalled invokes.
func (a *InvokeAPI) Close() error {
	a.mu.Lock()
	select {
	case <-a.closing:
	default:
		close(a.closing)
	}
	a.mu.Unlock()
	return a.srv.Close()
}
