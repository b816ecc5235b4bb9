// Package simtime holds what the whole-system simulations (internal/steady,
// internal/fleetsim) share about simulated time: the driver's Agenda of
// events at simulated instants on a manual clock. The driver alternates
// between waiting until every simulated process is parked, running the
// events due, and moving the clock to the next event or process timer,
// whichever comes first; Arm makes the clock stop at the next event.
//
// Why not testing/synctest: a bubble exists only inside synctest.Test,
// which takes a *testing.T, and the steady scenario also runs from the
// operator CLI (spillway bench --scenario steady), which must not link the
// testing package. Both embedded servers could live in a bubble (kfake
// accepts a listener function and ships an in-memory VirtualNetwork; the
// DynamoDB layer is an http.Handler that can be served on net.Pipe
// connections), so a simulation run only from tests (the fleet) could move
// into bubbles and drop its child processes; the steady scenario cannot
// while the CLI runs it.
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

// Arm keeps one timer of the clock at the next event, so that the clock's
// AdvanceToNext stops there if no process's timer comes first.
func (a *Agenda) Arm(now time.Time) {
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
