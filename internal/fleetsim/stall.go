package fleetsim

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// stallLimit is how long of wall time the driver may pass without a new
// simulated instant before the run is declared hung. A bubble whose clock
// stopped (a goroutine blocked on something not durable in synctest, such
// as a sync.Mutex held across a request that sleeps in simulated time)
// would otherwise hang until the test's timeout, which a soak sets to none.
const stallLimit = 2 * time.Minute

// stallWatch is a watchdog outside the bubble: the driver stamps every new
// simulated instant; when none came for limit of wall time, it panics
// with every goroutine's stack in the traceback, so the run fails at once with the
// blocked goroutines named instead of hanging.
type stallWatch struct {
	instants atomic.Int64
	stop     chan struct{}
}

func watchStalls(limit time.Duration) *stallWatch {
	w := &stallWatch{stop: make(chan struct{})}
	go w.watch(limit)
	return w
}

// stamp records that the driver reached a new simulated instant.
func (w *stallWatch) stamp() { w.instants.Add(1) }

func (w *stallWatch) close() { close(w.stop) }

func (w *stallWatch) watch(limit time.Duration) {
	tick := time.NewTicker(limit / 4)
	defer tick.Stop()
	seen, since := w.instants.Load(), time.Now()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		if n := w.instants.Load(); n != seen {
			seen, since = n, time.Now()
			continue
		}
		if time.Since(since) < limit {
			continue
		}
		// The panic's traceback names every goroutine and what it waits
		// on: the stack is only printed, never read.
		debug.SetTraceback("all")
		panic(fmt.Sprintf("fleetsim: the simulation stalled: no new simulated instant for %v of wall time (every goroutine below)", time.Since(since).Round(time.Second)))
	}
}
