package outboxlambda

import (
	"context"
	"sync"
	"time"
)

// shutdownTimeout bounds the work done on SIGTERM: Lambda allows a function
// with only internal extensions 500 ms between SIGTERM and SIGKILL.
const shutdownTimeout = 450 * time.Millisecond

// shutdownStop is the stop a SIGTERM gives a relay run in progress
// (outbox.RunInput.StopTimeout): what is in flight settles for half of it
// (200 ms) and the leases are released before three quarters of it (300
// ms), leaving the rest of shutdownTimeout for the metrics and the Kafka
// client.
const shutdownStop = 400 * time.Millisecond

// closer is a Publisher that holds connections worth closing (the franz-go
// publisher).
type closer interface{ Close() }

// Shutdown is the relay function's SIGTERM callback (register it with
// aws-lambda-go's lambda.WithEnableSIGTERM). Lambda sends SIGTERM when it
// shuts an execution environment down, after a timeout among other times,
// possibly while an invocation still runs: Shutdown stops that run, which
// lets what is in flight settle and releases its leases conditionally
// within shutdownStop, so peers take the buckets over at once instead of
// after LeaseDuration. It then writes the metrics gathered since the last
// flush and closes the Kafka client, which ends a publish still waiting
// for its broker (nothing of its outcome is acted on). It never blocks
// longer than the shutdown phase.
func (h *RelayHandler) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	h.log.InfoContext(ctx, "relay function shutting down")
	if !h.active.stop(shutdownStop) {
		h.log.WarnContext(ctx, "the relay run still waits for a write after its stop; its leases are released, closing the Kafka client under it")
	}
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

// activeRun is the relay run an invocation has in progress, for Shutdown
// to stop.
type activeRun struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// begin registers a run on ctx: it returns the run's context, which stop
// cancels, and the function that ends the registration once the run has
// returned.
func (a *activeRun) begin(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	a.mu.Lock()
	a.cancel, a.done = cancel, done
	a.mu.Unlock()
	return ctx, func() {
		a.mu.Lock()
		a.cancel, a.done = nil, nil
		a.mu.Unlock()
		close(done)
		cancel()
	}
}

// stop cancels the run in progress, if any, and waits at most wait for it
// to return; false when it had not.
func (a *activeRun) stop(wait time.Duration) bool {
	a.mu.Lock()
	cancel, done := a.cancel, a.done
	a.mu.Unlock()
	if cancel == nil {
		return true
	}
	cancel()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
