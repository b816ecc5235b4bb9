package outboxlambda

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

type closingPublisher struct {
	closed atomic.Int32
}

func (*closingPublisher) Init(context.Context) error { return nil }
func (p *closingPublisher) Publish(_ context.Context, msgs []outbox.Message) (int, error) {
	return len(msgs), nil
}
func (p *closingPublisher) Close() { p.closed.Add(1) }

// countingFlusher writes one line per flush.
type countingFlusher struct{ flushes atomic.Int32 }

func (f *countingFlusher) Flush(w io.Writer, _ time.Time) error {
	f.flushes.Add(1)
	_, err := io.WriteString(w, `{"_aws":{}}`+"\n")
	return err
}

func TestShutdown(t *testing.T) {
	t.Parallel()
	// On SIGTERM the functions write the metrics gathered since the last
	// invocation and the relay closes its Kafka client.
	t.Run("WritesTheLastMetricsAndClosesTheKafkaClient", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		pub := &closingPublisher{}
		relayMetrics, enqueueMetrics := &countingFlusher{}, &countingFlusher{}
		var relayOut, enqueueOut bytes.Buffer
		relay, err := NewRelayHandler(RelayHandlerConfig{Config: b.cfg, FunctionName: "outbox-relay", Store: b.relayStore,
			Publisher: pub, Logger: testLogger(t), Metrics: relayMetrics, MetricsOutput: &relayOut})
		if err != nil {
			t.Fatal(err)
		}
		enqueue, err := NewEnqueueHandler(EnqueueHandlerConfig{Config: b.cfg, Writer: &recordingWriter{}, Logger: testLogger(t),
			Getenv: env(nil), Metrics: enqueueMetrics, MetricsOutput: &enqueueOut})
		if err != nil {
			t.Fatal(err)
		}
		relay.Shutdown()
		enqueue.Shutdown()
		if pub.closed.Load() != 1 {
			t.Errorf("Kafka client closed %d times, want once", pub.closed.Load())
		}
		if relayMetrics.flushes.Load() != 1 || relayOut.Len() == 0 {
			t.Errorf("relay metrics flushed %d times (%d bytes written), want once", relayMetrics.flushes.Load(), relayOut.Len())
		}
		if enqueueMetrics.flushes.Load() != 1 || enqueueOut.Len() == 0 {
			t.Errorf("enqueue metrics flushed %d times (%d bytes written), want once", enqueueMetrics.flushes.Load(), enqueueOut.Len())
		}
	})
}
