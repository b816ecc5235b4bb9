package outboxlambda

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// MetricsFlusher writes the metrics gathered during an invocation, e.g. as
// CloudWatch Embedded Metric Format lines (*emf.Recorder). Handlers flush
// once at the end of every invocation: Lambda freezes the process between
// invocations, so nothing may stay buffered.
type MetricsFlusher interface {
	Flush(w io.Writer, now time.Time) error
}

// metricsSink flushes a MetricsFlusher to its output; the zero value does
// nothing.
type metricsSink struct {
	flusher MetricsFlusher
	out     io.Writer
	clock   outbox.Clock
}

func newMetricsSink(f MetricsFlusher, out io.Writer, clock outbox.Clock) metricsSink {
	if out == nil {
		out = os.Stdout
	}
	return metricsSink{flusher: f, out: out, clock: clock}
}

func (s metricsSink) flush(ctx context.Context, log *slog.Logger) {
	if s.flusher == nil {
		return
	}
	if err := s.flusher.Flush(s.out, s.clock.Now()); err != nil {
		log.WarnContext(ctx, "writing metrics failed", "error", err)
	}
}
