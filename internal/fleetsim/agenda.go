package fleetsim

import (
	"container/heap"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/internal/lambdasim"
)

// agenda holds the simulation's own events (the seed's writer operations,
// phases and faults, the schedule, the Lambda emulator's delayed steps).
// The driver runs them itself, one after the other, in time order and at
// one instant in the order they were queued, once every process is parked:
// what they start then does not depend on which timer goroutine the
// scheduler runs first, as it would with one bubble timer per event.
type agenda struct {
	mu     sync.Mutex
	seq    int
	events eventHeap
	// queued is told when an event was queued, so that the driver waits
	// for the earliest one.
	queued func()
}

var _ lambdasim.Scheduler = (*agenda)(nil)

type agendaEvent struct {
	at  time.Time
	seq int
	fn  func(now time.Time) error
}

// At queues fn to run at t, or at the driver's next step when t is past.
// Any goroutine may call it.
func (a *agenda) At(t time.Time, fn func(now time.Time) error) {
	a.mu.Lock()
	a.seq++
	heap.Push(&a.events, agendaEvent{at: t, seq: a.seq, fn: fn})
	a.mu.Unlock()
	if a.queued != nil {
		a.queued()
	}
}

// next returns the time of the earliest event.
func (a *agenda) next() (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.events) == 0 {
		return time.Time{}, false
	}
	return a.events[0].at, true
}

// runDue runs the events due at now, those they queue for now included; it
// reports whether it ran any, and stops at the first error.
func (a *agenda) runDue(now time.Time) (bool, error) {
	ran := false
	for {
		a.mu.Lock()
		if len(a.events) == 0 || a.events[0].at.After(now) {
			a.mu.Unlock()
			return ran, nil
		}
		ev := heap.Pop(&a.events).(agendaEvent)
		a.mu.Unlock()
		ran = true
		if err := ev.fn(now); err != nil {
			return ran, err
		}
	}
}

// eventHeap orders events by time, then by the order they were queued.
type eventHeap []agendaEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(agendaEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
