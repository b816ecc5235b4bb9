package outboxinbox

import (
	"errors"
	"sync"
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

// Metrics counts what an inbox did since it was made: the hook every inbox
// has first (the metrics themselves are written by a hook of the caller's,
// such as outboxobs/emf.InboxRecorder). It is safe for concurrent use.
type Metrics struct {
	mu    sync.Mutex
	total Counts
}

var _ HookConsume = (*Metrics)(nil)

// OnOutcome implements HookConsume.
func (m *Metrics) OnOutcome(_ string, o Outcome) {
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

// OnFailure implements HookConsume: a *FingerprintError also counts as a
// mismatch.
func (m *Metrics) OnFailure(_ string, err error) {
	var fe *FingerprintError
	mismatch := errors.As(err, &fe)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total.Failures++
	if mismatch {
		m.total.Mismatches++
	}
}

// OnConflict implements HookConsume.
func (m *Metrics) OnConflict(string) {
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
