package outboxinbox

import (
	"io"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// HookConsume receives an inbox's verdicts, failures and conflicts, for an
// Inbox built with it in Options.Hooks. It is called synchronously on the
// goroutine processing the record and must be safe for concurrent use and
// fast; a panic in it is not recovered. outboxobs/emf.InboxRecorder
// implements it and writes the inbox's metrics.
type HookConsume interface {
	// OnOutcome: a record of consumer got its verdict: Applied, Duplicate,
	// Skipped or DeadLettered.
	OnOutcome(consumer string, o Outcome)
	// OnFailure: a run of a record of consumer ended in err: a
	// *FingerprintError, a *MissingIDError, a *ConflictError, the
	// handler's error, or a Lambda record that could not be decoded. An
	// interruption by the end of the caller's ctx is not reported.
	OnFailure(consumer string, err error)
	// OnConflict: a transaction of consumer was cancelled by a conflict
	// with another write; the handler runs again, up to MaxAttempts.
	OnConflict(consumer string)
}

// Flusher writes what a hook aggregated since its previous flush, stamped
// now (outboxobs/emf.InboxRecorder).
type Flusher interface {
	Flush(w io.Writer, now time.Time) error
}

// hooks are an inbox's hooks, its own counts first.
type hooks struct {
	consumer string
	all      []HookConsume
}

func newHooks(consumer string, counts *Metrics, hs []outbox.Hook) (hooks, error) {
	h := hooks{consumer: consumer, all: []HookConsume{counts}}
	for i, x := range hs {
		k, ok := x.(HookConsume)
		if !ok {
			return hooks{}, outbox.Misconfigured("new inbox", "Hooks[%d] (%T) does not implement outboxinbox.HookConsume", i, x)
		}
		h.all = append(h.all, k)
	}
	return h, nil
}

func (h hooks) outcome(o Outcome) {
	for _, k := range h.all {
		k.OnOutcome(h.consumer, o)
	}
}

func (h hooks) failure(err error) {
	for _, k := range h.all {
		k.OnFailure(h.consumer, err)
	}
}

func (h hooks) conflict() {
	for _, k := range h.all {
		k.OnConflict(h.consumer)
	}
}
