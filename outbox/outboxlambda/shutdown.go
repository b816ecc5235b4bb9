package outboxlambda

import (
	"context"
	"time"
)

// shutdownTimeout bounds the work done on SIGTERM: Lambda allows a function
// with only internal extensions 500 ms between SIGTERM and SIGKILL.
const shutdownTimeout = 400 * time.Millisecond

// closer is a Publisher that holds connections worth closing (the franz-go
// publisher).
type closer interface{ Close() }

// Shutdown is the relay function's SIGTERM callback (register it with
// aws-lambda-go's lambda.WithEnableSIGTERM): it writes the metrics gathered
// since the last invocation's flush and closes the Kafka client, which
// flushes nothing of its own (every publish waits for its acks) but ends its
// connections cleanly. It never blocks longer than the shutdown phase.
func (h *RelayHandler) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	h.log.InfoContext(ctx, "relay function shutting down")
	h.metrics.flush(ctx, h.log)
	if c, ok := h.pub.(closer); ok {
		done := make(chan struct{})
		go func() {
			c.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			h.log.WarnContext(ctx, "the Kafka client did not close before the shutdown deadline")
		}
	}
}

// Shutdown is the enqueue function's SIGTERM callback: it writes the metrics
// gathered since the last flush.
func (h *EnqueueHandler) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	h.metrics.flush(ctx, h.log)
}
