package outbox

import (
	"sync/atomic"
	"testing"
)

// CountHeaderDecodes counts DecodeHeaders calls given a blob until t ends.
// The caller must not run in parallel: the count covers every goroutine.
func CountHeaderDecodes(t testing.TB) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	decodeHook = func() { n.Add(1) }
	t.Cleanup(func() { decodeHook = nil })
	return &n
}

// FetchPageBytes is what a fetch holds while it decodes a Query page.
const FetchPageBytes = fetchPageBytes

// HeldSize is what a message counts against RelayOptions.MaxHeldBytes.
func HeldSize(m Message) int64 { return heldSize(m) }
