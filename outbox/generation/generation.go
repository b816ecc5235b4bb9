package generation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// ErrSealed marks a write refused because the generation it
// targets is sealed or drained: the writer still uses the previous key
// prefix and bucket count after the operator sealed them. Switch the writer
// to the current generation's configuration.
var ErrSealed = errors.New("outbox: generation sealed")

// ErrNotOpen marks a generation that may not be served yet: a
// relay (or drain) configured with it alone while the generation it
// replaces, named by its predecessor marker, is not drained. Serving it
// then would publish messages written after the seal ahead of older ones
// of the same keys. Configure the relay with both generations until the
// previous one is drained.
var ErrNotOpen = errors.New("outbox: generation not open yet")

// ErrPhase marks a generation command that does not fit the
// marker as stored: an unknown phase, a transition that skips or reverses
// a phase, a marker naming another successor, or no marker at all.
var ErrPhase = errors.New("outbox: generation phase")

// Phase is where a generation is in its retirement.
type Phase string

// Phases of a generation, in order. A phase only moves forward, one step at
// a time, by conditional writes.
const (
	// PhaseOpen: writers may still write; relays serve it and not its
	// successor.
	PhaseOpen Phase = "open"
	// PhaseSealed: every writer has switched; relays drain what is left.
	PhaseSealed Phase = "sealed"
	// PhaseDrained: empty and retired; relays serve only the successor.
	PhaseDrained Phase = "drained"
)

// Generation names one generation of an outbox table.
type Generation struct {
	// KeyPrefix starts every partition key of the generation.
	KeyPrefix string
	// BucketCount is the generation's bucket count.
	BucketCount int
}

// String formats g as prefix/count, e.g. "OUTBOX/8".
func (g Generation) String() string { return fmt.Sprintf("%s/%d", g.KeyPrefix, g.BucketCount) }

// Validate checks that g names a usable generation.
func (g Generation) Validate(op string) error {
	if g.KeyPrefix == "" {
		return outbox.Misconfigured(op, "generation key prefix is empty")
	}
	if g.BucketCount < 1 {
		return outbox.Misconfigured(op, "generation %s: bucket count must be >= 1", g)
	}
	return nil
}

// Marker is the marker item of a previous generation as stored.
type Marker struct {
	// Exists is false when the generation has no marker yet: a generation
	// nobody started to retire is open.
	Exists bool
	// Phase is the stored phase; empty when the marker does not exist.
	Phase Phase
	// Generation is the generation the marker belongs to.
	Generation Generation
	// Successor is the generation that replaces it.
	Successor Generation
	// OpenedAt, SealedAt and DrainedAt are when each phase began, on the
	// clock of whoever moved it; zero when not reached.
	OpenedAt, SealedAt, DrainedAt time.Time
}

// Known reports whether p is one of the three phases.
func (p Phase) Known() bool {
	return p == PhaseOpen || p == PhaseSealed || p == PhaseDrained
}

// CheckTransition reports whether a marker in phase from may move to phase
// to: only open→sealed and sealed→drained. Anything else, including an
// unknown phase, matches ErrPhase.
func CheckTransition(from, to Phase) error {
	if !from.Known() || !to.Known() {
		return fmt.Errorf("outbox: generation %q → %q: %w: phases are %q, %q and %q", from, to, ErrPhase, PhaseOpen, PhaseSealed, PhaseDrained)
	}
	if (from == PhaseOpen && to == PhaseSealed) || (from == PhaseSealed && to == PhaseDrained) {
		return nil
	}
	return fmt.Errorf("outbox: generation %s → %s: %w: a generation only moves open → sealed → drained, one step at a time", from, to, ErrPhase)
}

// PredecessorMarker is the item under a generation's own key prefix that
// names the generation it replaces. It is written with the previous
// generation's marker when a change opens, so it exists before the seal,
// and so before any message of the new generation.
type PredecessorMarker struct {
	// Exists is false when the generation replaces none.
	Exists bool
	// Predecessor is the generation it replaces.
	Predecessor Generation
}

// WriteTarget decides which generation a writer replacing previous by
// current writes to, from the previous generation's marker as last seen
// (the zero marker when none was seen): previous while it has no marker or
// an open one, current once it is sealed or drained. The seal is therefore
// the switch point: a write to previous carries a check that it is still
// open, so it commits before the seal or not at all, and a write to current
// follows a look at the sealed marker. Sealed is permanent (a phase only
// moves forward), so a writer that saw it never needs to look again. A
// marker of another generation or naming another successor is a
// misconfiguration; an unknown phase matches ErrPhase.
func WriteTarget(m Marker, previous, current Generation) (Generation, error) {
	const op = "choose the generation to write"
	if !m.Exists {
		return previous, nil
	}
	if m.Generation != previous {
		return Generation{}, outbox.Misconfigured(op, "the marker under prefix %q belongs to generation %s, the writer is configured with %s as the previous generation", previous.KeyPrefix, m.Generation, previous)
	}
	switch m.Phase {
	case PhaseOpen:
		return previous, nil
	case PhaseSealed, PhaseDrained:
		if m.Successor != current {
			return Generation{}, outbox.Misconfigured(op, "generation %s was sealed for successor %s, the writer writes %s", previous, m.Successor, current)
		}
		return current, nil
	}
	return Generation{}, fmt.Errorf("outbox: %s: generation %s: %w: stored phase %q is not one of %q, %q, %q", op, previous, ErrPhase, m.Phase, PhaseOpen, PhaseSealed, PhaseDrained)
}

// CheckServable decides whether a relay configured with current alone may
// serve it, from current's predecessor marker and the marker of the
// predecessor it names (the zero marker when p does not exist): always
// without a predecessor, otherwise only once the predecessor is drained;
// before that it returns an error matching ErrNotOpen. A
// predecessor marker whose generation's marker belongs to another bucket
// count or names another successor is a misconfiguration.
func CheckServable(p PredecessorMarker, m Marker, current Generation) error {
	const op = "check the generation may be served"
	if !p.Exists {
		return nil
	}
	prev := p.Predecessor
	switch {
	case m.Exists && m.Generation != prev:
		return outbox.Misconfigured(op, "generation %s names %s as its predecessor, whose marker says it has %d buckets", current, prev, m.Generation.BucketCount)
	case m.Exists && m.Successor != current:
		return outbox.Misconfigured(op, "generation %s names %s as its predecessor, which is being replaced by %s", current, prev, m.Successor)
	case m.Exists && m.Phase == PhaseDrained:
		return nil
	case m.Exists && m.Phase != PhaseOpen && m.Phase != PhaseSealed:
		return fmt.Errorf("outbox: %s: generation %s: %w: stored phase %q is not one of %q, %q, %q", op, prev, ErrPhase, m.Phase, PhaseOpen, PhaseSealed, PhaseDrained)
	}
	phase := "without a marker"
	if m.Exists {
		phase = string(m.Phase)
	}
	return fmt.Errorf("outbox: %s %s: %w: it replaces %s, which is %s and not drained yet; relay it with %s as the previous generation until then",
		op, current, ErrNotOpen, prev, phase, prev)
}

// Contents is a strongly consistent look at what a generation
// still holds: the buckets whose message partition, and those whose parked
// partition, holds at least one item.
type Contents struct {
	// Checked is false for the zero value: nothing was read yet.
	Checked bool
	// Messages and Parked list the non-empty buckets, ascending.
	Messages, Parked []int
}

// Empty reports a checked generation with no message and no parked message
// left.
func (c Contents) Empty() bool {
	return c.Checked && len(c.Messages) == 0 && len(c.Parked) == 0
}

// Step is what a relay serving two generations does next.
type Step string

// Steps of Plan.
const (
	// StepOpen: write the marker (open, naming the successor) first.
	StepOpen Step = "open"
	// StepServePrevious: relay the previous generation, nothing of the
	// current one.
	StepServePrevious Step = "serve-previous"
	// StepCheckEmpty: the previous generation is sealed; look (strongly
	// consistent) whether anything is left in it.
	StepCheckEmpty Step = "check-empty"
	// StepMarkDrained: sealed and empty; mark it drained.
	StepMarkDrained Step = "mark-drained"
	// StepServeCurrent: the previous generation is drained; relay only the
	// current one.
	StepServeCurrent Step = "serve-current"
)

// Plan decides what a relay configured with a previous and a
// current generation may do, from the previous generation's marker and the
// latest look at its contents (the zero Contents when none was
// taken since the marker was read). It is the whole serving rule: nothing
// of the current generation is served before the previous one is drained,
// and it is marked drained only when sealed and seen empty. A marker that
// belongs to another generation or names another successor is a
// misconfiguration; an unknown phase matches ErrPhase.
func Plan(m Marker, previous, current Generation, c Contents) (Step, error) {
	const op = "plan generations"
	if previous.KeyPrefix == current.KeyPrefix {
		return "", outbox.Misconfigured(op, "previous and current generation share the key prefix %q; a new bucket count needs a new key prefix", previous.KeyPrefix)
	}
	if !m.Exists {
		return StepOpen, nil
	}
	if m.Generation != previous {
		return "", outbox.Misconfigured(op, "the marker under prefix %q belongs to generation %s, the relay is configured with %s as the previous generation", previous.KeyPrefix, m.Generation, previous)
	}
	if m.Successor != current {
		return "", outbox.Misconfigured(op, "generation %s is being replaced by %s, the relay is configured with %s as the current generation", previous, m.Successor, current)
	}
	switch m.Phase {
	case PhaseOpen:
		return StepServePrevious, nil
	case PhaseSealed:
		switch {
		case !c.Checked:
			return StepCheckEmpty, nil
		case c.Empty():
			return StepMarkDrained, nil
		default:
			return StepServePrevious, nil
		}
	case PhaseDrained:
		return StepServeCurrent, nil
	}
	return "", fmt.Errorf("outbox: %s: generation %s: %w: stored phase %q is not one of %q, %q, %q", op, previous, ErrPhase, m.Phase, PhaseOpen, PhaseSealed, PhaseDrained)
}

// Store keeps the marker of a previous generation and looks into
// it. The DynamoDB implementation is outboxddb.Store, on the previous
// generation's key prefix: the marker is an item of its own partition,
// which relays and writers of other languages never read. Every phase
// change is one conditional write, so concurrent operators and relays
// cannot skip a phase; a refused change re-reads the marker and reports
// ErrPhase unless the marker already holds the wanted state.
type Store interface {
	// ReadGeneration reads the marker, strongly consistent.
	ReadGeneration(ctx context.Context) (Marker, error)
	// OpenGeneration writes the marker open with the given successor if
	// there is none, and returns the marker as stored.
	OpenGeneration(ctx context.Context, successor Generation) (Marker, error)
	// SealGeneration moves the marker from open to sealed. A marker already
	// sealed for the same successor is returned as is.
	SealGeneration(ctx context.Context, successor Generation) (Marker, error)
	// FinishGeneration moves the marker from sealed to drained. The caller
	// checks that the generation is empty first (Contents). A
	// marker already drained for the same successor is returned as is.
	FinishGeneration(ctx context.Context, successor Generation) (Marker, error)
	// Contents looks, strongly consistent, at the head of every
	// bucket's message and parked partition, in an order that finds a
	// message moving between the two during the look.
	GenerationContents(ctx context.Context) (Contents, error)
}
