package outboxlambda

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// invokeWithin hands payload to the relay handler as Lambda would with the
// given function timeout, for a test in a synctest bubble: the context
// carries the deadline on the bubble's clock and ends there, as Lambda
// kills the invocation. It reports whether the invocation was killed. In
// the bubble the budget, linger and polls are simulated time and the
// backends' work takes none of it: how long a loaded machine takes to
// answer cannot change what a run does.
func invokeWithin(t *testing.T, b *bundle, payload json.RawMessage, timeout time.Duration) (RelayResponse, bool) {
	t.Helper()
	ctx, kill := context.WithTimeout(t.Context(), timeout)
	defer kill()
	resp, err := b.relay.Handle(ctx, payload)
	// The clock stands still while the handler works: an invocation that
	// returned before its deadline finds the context alive.
	killed := ctx.Err() != nil
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	return resp, killed
}
