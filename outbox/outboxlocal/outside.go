package outboxlocal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
)

// outsideTransport makes the round trips of an InMemory client of an
// external endpoint on goroutines outside any testing/synctest bubble, so
// the connections it keeps alive are no bubble's: an idle connection's
// reader waits on its socket, which a bubble cannot tell from work, and
// inside a bubble it would hold the clock until the server closed the
// connection (DynamoDB Local's Jetty does after 30 s, once per idle
// connection). Without keep-alive every request paid a new connection
// instead. The caller waits on a channel made outside the bubble, which is
// not durable blocking: the bubble's clock still stands still while a
// request is on the wire. The response body is read whole on the outside,
// so the caller touches nothing of the connection.
type outsideTransport struct {
	rt http.RoundTripper
}

// outsideCall is one round trip handed to the outside.
type outsideCall struct {
	rt    http.RoundTripper
	req   *http.Request
	reply chan outsideResult // made outside any bubble, buffered
}

type outsideResult struct {
	resp *http.Response
	err  error
}

var (
	// outsideCalls and outsideReplies are made, and served, by the package's
	// initialization, which runs outside any bubble; a goroutine started from
	// a bubble would belong to it.
	outsideCalls   = make(chan outsideCall)
	outsideReplies = make(chan chan outsideResult)
)

func init() { go serveOutside() }

// serveOutside hands out reply channels and starts each call on a goroutine
// of its own, outside any bubble.
func serveOutside() {
	next := make(chan outsideResult, 1)
	for {
		select {
		case outsideReplies <- next:
			next = make(chan outsideResult, 1)
		case c := <-outsideCalls:
			go c.run()
		}
	}
}

// RoundTrip implements http.RoundTripper. Cancelling the request's context
// returns at once; the request itself runs to its end on the outside, whose
// context must not be the caller's (a bubble's channels panic when touched
// from outside it).
func (t outsideTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	reply := <-outsideReplies
	outsideCalls <- outsideCall{rt: t.rt, req: req.WithContext(context.WithoutCancel(ctx)), reply: reply}
	select {
	case r := <-reply:
		if r.resp != nil {
			r.resp.Request = req
		}
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c outsideCall) run() {
	resp, err := c.rt.RoundTrip(c.req)
	if err == nil {
		body, readErr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if readErr != nil {
			resp, err = nil, fmt.Errorf("outboxlocal: read response of %s: %w", c.req.URL, readErr)
		} else {
			resp.Body = io.NopCloser(bytes.NewReader(body))
		}
	}
	c.reply <- outsideResult{resp: resp, err: err}
}
