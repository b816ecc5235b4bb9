package fleetsim

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// activity tells the driver when the simulated processes are all parked, so
// it may move the manual clock. Two signals, because neither is enough
// alone: calls to DynamoDB and Kafka are counted in flight (a goroutine
// waiting for the network is not runnable, yet the simulation is not
// idle), and runtime/metrics reports goroutines that are running or
// runnable (a relay computing between two calls is neither in flight nor
// parked). Timer creations and call boundaries count as progress, so a
// state that changed between two reads is never taken for quiet.
type activity struct {
	inflight atomic.Int64
	progress atomic.Uint64
	samples  []metrics.Sample
	// idle is the running+runnable+not-in-go count of a quiet process: the
	// driver itself.
	idle uint64

	mu sync.Mutex
	// quiet is closed when the last call in flight ends.
	quiet chan struct{}
}

func newActivity() *activity {
	a := &activity{samples: []metrics.Sample{
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/sched/goroutines/not-in-go:goroutines"},
	}, quiet: make(chan struct{})}
	a.idle = 1
	return a
}

func (a *activity) begin() { a.progress.Add(1); a.inflight.Add(1) }
func (a *activity) poke()  { a.progress.Add(1) }

func (a *activity) end() {
	a.progress.Add(1)
	if a.inflight.Add(-1) == 0 {
		a.mu.Lock()
		close(a.quiet)
		a.quiet = make(chan struct{})
		a.mu.Unlock()
	}
}

// waitQuiet waits until no call is in flight, at most d.
func (a *activity) waitQuiet(d time.Duration) {
	a.mu.Lock()
	quiet := a.quiet
	a.mu.Unlock()
	if a.inflight.Load() == 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-quiet:
	case <-t.C:
	}
}

// busyGoroutines returns the goroutines running, runnable or in a system
// call, the caller included.
func (a *activity) busyGoroutines() uint64 {
	metrics.Read(a.samples)
	var n uint64
	for _, s := range a.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += s.Value.Uint64()
		}
	}
	return n
}

// calibrate records how many goroutines a quiet process shows busy (the
// caller, and anything the runtime or the libraries keep in a system call):
// the least of a few readings.
func (a *activity) calibrate() {
	least := a.busyGoroutines()
	for range 50 {
		runtime.Gosched()
		least = min(least, a.busyGoroutines())
	}
	a.idle = max(least, 1)
}

// settle returns once nothing is in flight, no other goroutine is busy and
// no progress was made over three consecutive looks. Calls in flight are
// waited for with a signal; busy goroutines are polled, because no signal
// exists for "every goroutine is blocked". The polling only costs wall
// time; correctness never depends on it, because the engine must tolerate
// any delay between its steps anyway.
func (a *activity) settle(ctx context.Context, wallLimit time.Duration) error {
	deadline := time.Now().Add(wallLimit)
	stable, busy := 0, 0
	for stable < 3 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the simulated processes did not settle within %v (%d calls in flight)", wallLimit, a.inflight.Load())
		}
		if a.inflight.Load() > 0 {
			stable = 0
			// The end of the last call wakes the wait; the bound only
			// rechecks the deadline and the context.
			a.waitQuiet(100 * time.Millisecond)
			continue
		}
		p := a.progress.Load()
		if a.busyGoroutines() > a.idle {
			stable = 0
			// A goroutine computes between two calls: give it the core,
			// spinning a little before sleeping.
			if busy++; busy < 20 {
				runtime.Gosched()
			} else {
				time.Sleep(50 * time.Microsecond)
			}
			continue
		}
		runtime.Gosched()
		if a.progress.Load() == p && a.inflight.Load() == 0 && a.busyGoroutines() <= a.idle {
			stable++
		} else {
			stable, busy = 0, 0
		}
	}
	return nil
}
