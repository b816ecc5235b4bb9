package fleetsim

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// traceEvent is one line of the trace: what happened at a simulated instant.
type traceEvent struct {
	at     time.Duration // since the start of the simulation
	kind   string
	relay  string
	bucket int // -1: no single bucket
	text   string
}

func (e traceEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "T+%9.3fs %-14s", e.at.Seconds(), e.kind)
	if e.relay != "" {
		fmt.Fprintf(&b, " %s", e.relay)
	}
	if e.bucket >= 0 {
		fmt.Fprintf(&b, " b%d", e.bucket)
	}
	if e.text != "" {
		b.WriteString(" ")
		b.WriteString(e.text)
	}
	return b.String()
}

// tracer records the events of a run. Its events are the material of a
// failure report: the seed replays the workload and the faults, the trace
// explains the interleaving that this run happened to take.
type tracer struct {
	start time.Time
	// added is told of every event: the driver checks the instant.
	added func()

	mu     sync.Mutex
	events []traceEvent
}

func (t *tracer) add(kind, relay string, bucket int, format string, args ...any) {
	e := traceEvent{at: trueNow().Sub(t.start), kind: kind, relay: relay, bucket: bucket, text: fmt.Sprintf(format, args...)}
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
	t.added()
}

// excerpt returns at most limit events, the latest ones, that keep says
// concern the violation.
func (t *tracer) excerpt(limit int, keep func(traceEvent) bool) []traceEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []traceEvent
	for i := len(t.events) - 1; i >= 0 && len(out) < limit; i-- {
		if keep(t.events[i]) {
			out = append(out, t.events[i])
		}
	}
	slices.Reverse(out)
	return out
}

// writeFile writes every event to path.
func (t *tracer) writeFile(path string) error {
	var b strings.Builder
	t.mu.Lock()
	for _, e := range t.events {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	t.mu.Unlock()
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
