package steady

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// activity tells the driver when every simulated process is parked on the
// clock, so it may move the clock. Neither signal alone is enough: a
// goroutine waiting for a DynamoDB response is not runnable, yet the
// simulation is not idle (hence the requests in flight), and a relay
// computing between two requests is neither in flight nor parked (hence the
// scheduler's running and runnable goroutine counts). Every use of the
// clock and every request boundary counts as progress, so a state that
// changed between two looks is never taken for quiet.
type activity struct {
	inflight atomic.Int64
	progress atomic.Uint64
	samples  []metrics.Sample
	// baseline is the busy count of a quiet process: the driver itself
	// and whatever the runtime keeps running.
	baseline uint64

	mu    sync.Mutex
	quiet chan struct{} // closed when the last request in flight ends

	dump []byte // the driver's goroutine dump buffer
}

func newActivity() *activity {
	return &activity{
		samples: []metrics.Sample{
			{Name: "/sched/goroutines/running:goroutines"},
			{Name: "/sched/goroutines/runnable:goroutines"},
		},
		baseline: 1,
		quiet:    make(chan struct{}),
		dump:     make([]byte, 1<<16),
	}
}

// begin and end bracket a request in flight.
func (a *activity) begin() {
	a.progress.Add(1)
	a.inflight.Add(1)
}

func (a *activity) end() {
	a.progress.Add(1)
	if a.inflight.Add(-1) == 0 {
		a.mu.Lock()
		close(a.quiet)
		a.quiet = make(chan struct{})
		a.mu.Unlock()
	}
}

// poke records progress that is not a request: a clock reading, a timer, an
// invocation starting or ending.
func (a *activity) poke() { a.progress.Add(1) }

// busy returns the goroutines running, runnable or outside Go (system
// calls), the caller included.
func (a *activity) busy() uint64 {
	metrics.Read(a.samples)
	var n uint64
	for _, s := range a.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += s.Value.Uint64()
		}
	}
	return n
}

// calibrate sets the baseline to the least busy count over a few looks of a
// quiet process.
func (a *activity) calibrate() {
	least := a.busy()
	for range 100 {
		runtime.Gosched()
		least = min(least, a.busy())
	}
	a.baseline = max(least, 1)
}

// waitQuiet waits until no request is in flight, at most d.
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

// settleLooks is how many consecutive quiet looks, with the processor given
// away in between, precede the exact check.
const settleLooks = 2

// settle returns once nothing is in flight and every other goroutine is
// blocked, with no progress in between. The cheap signals (requests in
// flight, the scheduler's approximate counts) filter; the decision is
// exact: a goroutine dump, taken with the world stopped, must show no other
// goroutine running, runnable or in a system call, while the requests in
// flight stayed at zero and nothing progressed around it. It fails after
// wallLimit of wall time: a process that never parks is a bug of the
// simulation.
func (a *activity) settle(ctx context.Context, wallLimit time.Duration) error {
	deadline := time.Now().Add(wallLimit)
	stable, spins := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("steady: the simulated processes did not settle within %v of wall time (%d requests in flight, %d goroutines busy)",
				wallLimit, a.inflight.Load(), a.busy())
		}
		if a.inflight.Load() > 0 {
			stable, spins = 0, 0
			a.waitQuiet(100 * time.Millisecond)
			continue
		}
		p := a.progress.Load()
		if a.busy() > a.baseline {
			stable = 0
			a.yield(&spins)
			continue
		}
		runtime.Gosched()
		if a.progress.Load() != p || a.inflight.Load() != 0 || a.busy() > a.baseline {
			stable, spins = 0, 0
			continue
		}
		if stable++; stable < settleLooks {
			continue
		}
		if a.exactlyQuiet() {
			return nil
		}
		stable = 0
		a.yield(&spins)
	}
}

// yield gives the processor to the goroutines still computing: a few
// Gosched first, then sleeps growing to a millisecond, so a loaded machine
// is not asked for a goroutine dump that will only find them still busy.
func (a *activity) yield(spins *int) {
	*spins++
	if *spins <= 8 {
		runtime.Gosched()
		return
	}
	time.Sleep(min(10*time.Microsecond<<min(*spins-8, 7), time.Millisecond))
}

// exactlyQuiet takes a goroutine dump (the runtime stops the world for it)
// and reports whether no goroutine but the caller is running, runnable or
// in a system call, with no request in flight and no progress from before
// the dump to after it, so none happened in between.
func (a *activity) exactlyQuiet() bool {
	p := a.progress.Load()
	if a.inflight.Load() != 0 {
		return false
	}
	for {
		n := runtime.Stack(a.dump, true)
		if n < len(a.dump) {
			a.dump = a.dump[:cap(a.dump)]
			if a.progress.Load() != p || a.inflight.Load() != 0 {
				return false
			}
			return onlyCallerBusy(a.dump[:n])
		}
		a.dump = make([]byte, 2*len(a.dump))
	}
}

// onlyCallerBusy reports whether every goroutine of a dump after the first
// (the caller) that runs simulation code (a frame of this module: relays,
// stores, writers, this package) is in a waiting state. Goroutines of other
// code (the runtime, a profiler, idle connections) cannot act on the
// simulation, nor can the embedded server's: it applies a request before
// answering it, and what it still does after the client has its answer
// changes nothing.
func onlyCallerBusy(dump []byte) bool {
	first := true
	for len(dump) > 0 {
		block := dump
		if i := bytes.Index(dump, []byte("\n\n")); i >= 0 {
			block, dump = dump[:i], dump[i+2:]
		} else {
			dump = nil
		}
		header := block
		if i := bytes.IndexByte(block, '\n'); i >= 0 {
			header = block[:i]
		}
		state, ok := goroutineState(header)
		if !ok {
			continue
		}
		if first {
			first = false
			continue
		}
		busy := bytes.HasPrefix(state, []byte("running")) || bytes.HasPrefix(state, []byte("runnable")) ||
			bytes.HasPrefix(state, []byte("syscall")) || bytes.HasPrefix(state, []byte("preempted"))
		if busy && bytes.Contains(block, modulePath) && !bytes.Contains(block, serverFrame) {
			return false
		}
	}
	return true
}

// modulePath marks the frames of simulation code in a goroutine dump,
// serverFrame the goroutines of an HTTP server.
var (
	modulePath  = []byte("github.com/spillway-dev/spillway/")
	serverFrame = []byte("net/http.(*conn).serve")
)

// goroutineState returns the state of a dump's header line
// ("goroutine 7 [chan receive, 2 minutes]:").
func goroutineState(line []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("goroutine "))
	if !ok {
		return nil, false
	}
	open := bytes.IndexByte(rest, '[')
	end := bytes.LastIndexByte(rest, ']')
	if open < 0 || end < open {
		return nil, false
	}
	return rest[open+1 : end], true
}
