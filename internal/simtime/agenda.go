package simtime

import (
	"container/heap"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Agenda is a queue of functions to run at simulated instants, in time
// order and, at one instant, in the order they were added. Any goroutine
// may add to it; the driver runs what is due. It is safe for concurrent
// use.
type Agenda struct {
	clock *outboxlocal.ManualClock

	mu      sync.Mutex
	events  eventHeap
	seq     uint64
	armed   outbox.Timer
	armedAt time.Time
}

// NewAgenda returns an empty agenda on clock.
func NewAgenda(clock *outboxlocal.ManualClock) *Agenda { return &Agenda{clock: clock} }

// At adds fn to run at t (at once when t is not after the driver's now).
func (a *Agenda) At(t time.Time, fn func(now time.Time) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	heap.Push(&a.events, event{at: t, seq: a.seq, fn: fn})
}

// Next returns the instant of the earliest event, false when none is left.
func (a *Agenda) Next() (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.events) == 0 {
		return time.Time{}, false
	}
	return a.events[0].at, true
}

// RunDue runs the functions due at now, including those they add for now,
// and reports whether any ran. It stops at the first error.
func (a *Agenda) RunDue(now time.Time) (bool, error) {
	ran := false
	for {
		a.mu.Lock()
		if len(a.events) == 0 || a.events[0].at.After(now) {
			a.mu.Unlock()
			return ran, nil
		}
		ev := heap.Pop(&a.events).(event)
		a.mu.Unlock()
		if err := ev.fn(now); err != nil {
			return ran, err
		}
		ran = true
	}
}

// Advance moves the clock to the next event or to the next timer of a
// participant, whichever comes first, firing the timers due then. It
// reports false, without moving, when neither exists: nothing can ever
// happen again. The driver calls it once every participant is parked.
func (a *Agenda) Advance(now time.Time) bool {
	a.arm(now)
	return a.clock.AdvanceToNext()
}

// arm keeps one timer of the clock at the next event, so that the clock's
// AdvanceToNext stops there if no participant's timer comes first.
func (a *Agenda) arm(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.events) == 0 {
		return
	}
	head := a.events[0].at
	if a.armed != nil && a.armedAt.Equal(head) {
		return
	}
	if a.armed != nil {
		a.armed.Stop()
	}
	a.armed, a.armedAt = a.clock.NewTimer(head.Sub(now)), head
}

// event is one entry of the agenda.
type event struct {
	at  time.Time
	seq uint64
	fn  func(now time.Time) error
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
