package outboxlambda

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// MetricsInterval is how often a relay invocation writes its metrics while
// it runs. CloudWatch alarms evaluate one-minute periods: a relay that wrote
// only at its end would report a failure once per run, up to 15 minutes
// late, and a period without a document is missing data to every alarm.
const MetricsInterval = time.Minute

// MetricsFlusher writes the metrics gathered since its previous flush, e.g.
// as CloudWatch Embedded Metric Format lines (*emf.Recorder): counts are
// deltas since that flush, gauges their current value. Handlers flush at
// the end of every invocation, since Lambda freezes the process between
// invocations and nothing may stay buffered, and the relay handler also
// every MetricsInterval of a run.
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

// periodic flushes every MetricsInterval on the sink's clock until the
// returned stop is called; stop waits for a flush in progress, so the
// caller's final flush comes after every periodic one.
func (s metricsSink) periodic(ctx context.Context, log *slog.Logger) (stop func()) {
	if s.flusher == nil {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			t := time.NewTimer(MetricsInterval)
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
				s.flush(ctx, log)
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
