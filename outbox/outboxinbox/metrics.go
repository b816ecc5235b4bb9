package outboxinbox

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
)

// Counts are an inbox's counters.
type Counts struct {
	// Consumed counts records with a verdict: applied or duplicate.
	Consumed int64
	// Applied counts records whose transaction committed.
	Applied int64
	// Duplicates counts records whose message was applied before.
	Duplicates int64
	// Skipped counts records without a message id under SkipMissingID.
	Skipped int64
	// Failures counts runs of a record that ended in an error, an
	// undecodable Lambda record included; an interruption by the end of
	// the caller's ctx is not one.
	Failures int64
	// Conflicts counts transactions cancelled by a conflict.
	Conflicts int64
	// Mismatches counts records refused with a *FingerprintError (also
	// counted in Failures).
	Mismatches int64
	// DeadLettered counts records the consumer's OnFailure policy took
	// after MaxAttempts failures.
	DeadLettered int64
}

// Metrics counts what an inbox did and writes it as CloudWatch Embedded
// Metric Format: namespace "Spillway", dimension Consumer, the counts since
// the previous flush. It is safe for concurrent use.
type Metrics struct {
	consumer string

	mu      sync.Mutex
	total   Counts
	flushed Counts
}

func newMetrics(consumer string) *Metrics { return &Metrics{consumer: consumer} }

func (m *Metrics) add(o Outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch o {
	case Applied:
		m.total.Applied++
		m.total.Consumed++
	case Duplicate:
		m.total.Duplicates++
		m.total.Consumed++
	case Skipped:
		m.total.Skipped++
	case DeadLettered:
		m.total.DeadLettered++
	}
}

func (m *Metrics) failed() {
	m.mu.Lock()
	m.total.Failures++
	m.mu.Unlock()
}

func (m *Metrics) mismatch() {
	m.mu.Lock()
	m.total.Mismatches++
	m.mu.Unlock()
}

func (m *Metrics) conflict() {
	m.mu.Lock()
	m.total.Conflicts++
	m.mu.Unlock()
}

// Snapshot returns the counts since the inbox was made.
func (m *Metrics) Snapshot() Counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

// Flush writes the counts since the previous flush as one EMF line stamped
// now; it writes nothing when nothing happened. A failed write still
// starts a new period, so nothing is counted twice.
func (m *Metrics) Flush(w io.Writer, now time.Time) error {
	m.mu.Lock()
	d := m.total
	prev := m.flushed
	m.flushed = m.total
	m.mu.Unlock()
	values := []struct {
		name string
		v    int64
	}{
		{outboxconf.MetricRecordsConsumed, d.Consumed - prev.Consumed},
		{outboxconf.MetricDuplicatesSkipped, d.Duplicates - prev.Duplicates},
		{outboxconf.MetricConsumeFailures, d.Failures - prev.Failures},
		{outboxconf.MetricTransactionConflicts, d.Conflicts - prev.Conflicts},
		{outboxconf.MetricPayloadMismatches, d.Mismatches - prev.Mismatches},
		{outboxconf.MetricRecordsDeadLettered, d.DeadLettered - prev.DeadLettered},
	}
	doc := emf.Document{
		Timestamp:  now,
		Namespace:  outboxconf.DefaultMetricsNamespace,
		Dimensions: []emf.Dimension{{Name: outboxconf.DimensionConsumer, Value: m.consumer}},
	}
	touched := false
	for _, v := range values {
		touched = touched || v.v != 0
		doc.Metrics = append(doc.Metrics, emf.Metric{Name: v.name, Unit: outboxconf.UnitCount, Values: []float64{float64(v.v)}})
	}
	if !touched {
		return nil
	}
	if err := emf.Encode(w, doc); err != nil {
		return fmt.Errorf("outboxinbox: flush metrics: %w", err)
	}
	return nil
}
