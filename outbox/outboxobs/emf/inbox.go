package emf

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
)

// InboxRecorder is an outboxinbox.HookConsume that counts an inbox's
// verdicts, failures and conflicts and writes them as EMF on Flush:
// namespace "Spillway" (outboxconf.DefaultMetricsNamespace), dimension
// Consumer, the six inbox counters since the previous flush. Give it to
// the inbox (outboxinbox.Options.Hooks) and to what flushes it
// (outboxinbox.ConsumerConfig.Metrics, LambdaHandler.Metrics). The zero
// value is ready; it is safe for concurrent use.
type InboxRecorder struct {
	mu sync.Mutex
	// counts are per consumer, in the order first seen: one line each.
	counts []inboxCounts
}

// inboxCounts are one consumer's counters since the previous flush.
type inboxCounts struct {
	consumer                                                          string
	consumed, duplicates, failures, conflicts, mismatches, deadLetter int64
}

var _ outboxinbox.HookConsume = (*InboxRecorder)(nil)

// of returns consumer's counters; the caller holds the lock.
func (r *InboxRecorder) of(consumer string) *inboxCounts {
	i := slices.IndexFunc(r.counts, func(c inboxCounts) bool { return c.consumer == consumer })
	if i < 0 {
		r.counts = append(r.counts, inboxCounts{consumer: consumer})
		i = len(r.counts) - 1
	}
	return &r.counts[i]
}

// OnOutcome implements outboxinbox.HookConsume: RecordsConsumed counts
// applied and duplicate records, DuplicatesSkipped the duplicates,
// RecordsDeadLettered the dead-lettered; a skipped record is none of them.
func (r *InboxRecorder) OnOutcome(consumer string, o outboxinbox.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.of(consumer)
	switch o {
	case outboxinbox.Applied:
		c.consumed++
	case outboxinbox.Duplicate:
		c.consumed++
		c.duplicates++
	case outboxinbox.DeadLettered:
		c.deadLetter++
	}
}

// OnFailure implements outboxinbox.HookConsume: ConsumeFailures, and
// PayloadMismatches for a *outboxinbox.FingerprintError.
func (r *InboxRecorder) OnFailure(consumer string, err error) {
	var fe *outboxinbox.FingerprintError
	mismatch := errors.As(err, &fe)
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.of(consumer)
	c.failures++
	if mismatch {
		c.mismatches++
	}
}

// OnConflict implements outboxinbox.HookConsume: TransactionConflicts.
func (r *InboxRecorder) OnConflict(consumer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.of(consumer).conflicts++
}

// Flush writes one EMF line per consumer that did anything since the
// previous flush, stamped now, and starts new counts whatever the outcome,
// so nothing is counted twice.
func (r *InboxRecorder) Flush(w io.Writer, now time.Time) error {
	r.mu.Lock()
	counts := r.counts
	r.counts = nil
	r.mu.Unlock()
	for _, c := range counts {
		values := []struct {
			name string
			v    int64
		}{
			{outboxconf.MetricRecordsConsumed, c.consumed},
			{outboxconf.MetricDuplicatesSkipped, c.duplicates},
			{outboxconf.MetricConsumeFailures, c.failures},
			{outboxconf.MetricTransactionConflicts, c.conflicts},
			{outboxconf.MetricPayloadMismatches, c.mismatches},
			{outboxconf.MetricRecordsDeadLettered, c.deadLetter},
		}
		doc := Document{
			Timestamp:  now,
			Namespace:  outboxconf.DefaultMetricsNamespace,
			Dimensions: []Dimension{{Name: outboxconf.DimensionConsumer, Value: c.consumer}},
		}
		touched := false
		for _, v := range values {
			touched = touched || v.v != 0
			doc.Metrics = append(doc.Metrics, Metric{Name: v.name, Unit: outboxconf.UnitCount, Values: []float64{float64(v.v)}})
		}
		if !touched {
			continue
		}
		if err := Encode(w, doc); err != nil {
			return fmt.Errorf("emf: flush inbox metrics of %s: %w", c.consumer, err)
		}
	}
	return nil
}
