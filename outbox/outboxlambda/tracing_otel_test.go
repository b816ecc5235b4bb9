//go:build !spillway.nootel

package outboxlambda

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxobs/otel"
)

func TestTracingOTel(t *testing.T) {
	t.Parallel()
	// AFailedSpanExportIsLoggedNotReturned: with the otel mode's collector
	// down, the batch's result still reaches the runtime, failed or not,
	// and the export's failure is a log line.
	t.Run("AFailedSpanExportIsLoggedNotReturned", func(t *testing.T) {
		t.Parallel()
		recv, err := outboxlocal.StartOTLPReceiver()
		if err != nil {
			t.Fatal(err)
		}
		_ = recv.Close()
		p, err := otel.New(t.Context(), otel.Config{Endpoint: recv.URL, FlushTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
		payload, err := os.ReadFile(filepath.Join("..", "..", "events", "consumer.kafka.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range []error{batchError{}, nil} {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			k := KafkaHandler{Tracing: OTelTracing{Provider: p, Logger: log}, Logger: log, Handle: func(ctx context.Context, _ events.KafkaEvent) error {
				_, span := p.Tracer().Start(ctx, "apply")
				span.End(batch)
				return batch
			}}
			_, err := k.Invoke(t.Context(), payload)
			if (batch == nil) != (err == nil) || !strings.Contains(logs.String(), "exporting the invocation's spans failed") {
				t.Errorf("batch %v: Invoke error %v; logs:\n%s", batch, err, logs.String())
			}
		}
	})

}
