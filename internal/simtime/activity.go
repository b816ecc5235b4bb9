package simtime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// labelKey is the profiler label that marks a simulation's participants.
const labelKey = "spillway-simulation"

var (
	// serial numbers the activities, for their labels.
	serial atomic.Uint64
	// live counts the simulations running (with a goroutine inside Do or
	// joined): a lone simulation may use the process-wide scheduler counts
	// as a filter before the exact look.
	live atomic.Int64
	// labelsOnce turns the labels on in goroutine dumps.
	labelsOnce sync.Once
)

// Activity tells a simulation's driver when every participant is parked, so
// that it may move the clock (the rule is in the package doc). It is safe
// for concurrent use; Settle is the driver's alone.
type Activity struct {
	label    string
	needle   []byte // the label as a dump header shows it
	inflight atomic.Int64
	progress atomic.Uint64
	entered  atomic.Int64 // goroutines inside Do or joined

	mu    sync.Mutex
	quiet chan struct{} // closed when the last call in flight ends

	// The driver's own state.
	samples  []metrics.Sample
	baseline uint64 // the busy count of a quiet process; 0 until measured
	dump     []byte
}

// NewActivity returns the activity of a new simulation with no participant
// yet.
func NewActivity() *Activity {
	labelsOnce.Do(func() {
		_ = os.Setenv("GODEBUG", os.Getenv("GODEBUG")+",tracebacklabels=1")
	})
	label := strconv.FormatUint(serial.Add(1), 10)
	return &Activity{
		label:  label,
		needle: []byte(strconv.Quote(labelKey) + ": " + strconv.Quote(label)),
		quiet:  make(chan struct{}),
		samples: []metrics.Sample{
			{Name: "/sched/goroutines/running:goroutines"},
			{Name: "/sched/goroutines/runnable:goroutines"},
		},
		dump: make([]byte, 1<<16),
	}
}

// Do runs the simulation f: f's goroutine, while f runs, and every
// goroutine started from it are participants.
func (a *Activity) Do(ctx context.Context, f func(context.Context)) {
	a.enter()
	defer a.leave()
	pprof.Do(ctx, pprof.Labels(labelKey, a.label), f)
}

// Go runs f on a new goroutine as the simulation, like Do.
func (a *Activity) Go(ctx context.Context, f func(context.Context)) {
	a.enter()
	// Started inside Do, the goroutine carries the label from its creation
	// on.
	a.Do(ctx, func(ctx context.Context) {
		go func() {
			defer a.leave()
			f(ctx)
		}()
	})
}

// Join makes the calling goroutine from now on, and every goroutine it
// starts, a participant, for a test whose own goroutine runs simulated
// processes; leave ends the simulation (the goroutine keeps its label).
func (a *Activity) Join(ctx context.Context) (labelled context.Context, leave func()) {
	a.enter()
	ctx = pprof.WithLabels(ctx, pprof.Labels(labelKey, a.label))
	pprof.SetGoroutineLabels(ctx)
	return ctx, sync.OnceFunc(a.leave)
}

func (a *Activity) enter() {
	if a.entered.Add(1) == 1 {
		live.Add(1)
	}
}

func (a *Activity) leave() {
	if a.entered.Add(-1) == 0 {
		live.Add(-1)
	}
}

// Begin and End bracket a call to a backend in flight.
func (a *Activity) Begin() {
	a.progress.Add(1)
	a.inflight.Add(1)
}

// End ends a call that Begin started.
func (a *Activity) End() {
	a.progress.Add(1)
	if a.inflight.Add(-1) == 0 {
		a.mu.Lock()
		close(a.quiet)
		a.quiet = make(chan struct{})
		a.mu.Unlock()
	}
}

// Track runs fn as one call in flight.
func Track[T any](a *Activity, fn func() (T, error)) (T, error) {
	a.Begin()
	defer a.End()
	return fn()
}

// Poke records progress that is not a call: an event scheduled, an
// invocation starting or ending (the Clock pokes for clock uses).
func (a *Activity) Poke() { a.progress.Add(1) }

// InFlight returns the number of calls in flight.
func (a *Activity) InFlight() int64 { return a.inflight.Load() }

// settleLooks is how many consecutive quiet looks, with the processor given
// away in between, precede the exact look.
const settleLooks = 2

// Settle returns once every participant is parked (the package doc's
// rule). The cheap signals filter (calls in flight, progress, and, for a
// simulation alone in its process, the scheduler's counts); the decision
// is the exact look. It fails after wallLimit of wall time (a participant
// that never parks is a bug of the simulation) or when ctx ends.
func (a *Activity) Settle(ctx context.Context, wallLimit time.Duration) error {
	if a.baseline == 0 {
		a.calibrate()
	}
	deadline := time.Now().Add(wallLimit)
	stable, spins := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("simtime: the simulated processes did not settle within %v of wall time (%d calls in flight)",
				wallLimit, a.inflight.Load())
		}
		if a.inflight.Load() > 0 {
			stable, spins = 0, 0
			a.waitQuiet(100 * time.Millisecond)
			continue
		}
		p := a.progress.Load()
		if a.othersBusy() {
			stable = 0
			a.yield(&spins)
			continue
		}
		runtime.Gosched()
		if a.progress.Load() != p || a.inflight.Load() != 0 || a.othersBusy() {
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

// waitQuiet waits until no call is in flight, at most d.
func (a *Activity) waitQuiet(d time.Duration) {
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

// othersBusy reports, for a simulation alone in its process, whether the
// scheduler counts more goroutines running or runnable than a quiet
// process; beside another simulation it says nothing.
func (a *Activity) othersBusy() bool {
	return live.Load() == 1 && a.busy() > a.baseline
}

// busy returns the goroutines running or runnable, the caller included.
func (a *Activity) busy() uint64 {
	metrics.Read(a.samples)
	var n uint64
	for _, s := range a.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += s.Value.Uint64()
		}
	}
	return n
}

// calibrate sets the baseline to the least busy count over a few looks.
func (a *Activity) calibrate() {
	least := a.busy()
	for range 100 {
		runtime.Gosched()
		least = min(least, a.busy())
	}
	a.baseline = max(least, 1)
}

// yield gives the processor to the participants still computing: a few
// Gosched first, then sleeps growing to a millisecond, so a loaded machine
// is not asked for a goroutine dump that would only find them still busy.
func (a *Activity) yield(spins *int) {
	*spins++
	if *spins <= 8 {
		runtime.Gosched()
		return
	}
	time.Sleep(min(10*time.Microsecond<<min(*spins-8, 7), time.Millisecond))
}

// exactlyQuiet takes a goroutine dump (the runtime stops the world for it)
// and reports whether no participant but the caller is busy, with no call in
// flight and no progress from before the dump to after it, so none
// happened in between.
func (a *Activity) exactlyQuiet() bool {
	p := a.progress.Load()
	if a.inflight.Load() != 0 {
		return false
	}
	for {
		n := runtime.Stack(a.dump, true)
		if n < len(a.dump) {
			if a.progress.Load() != p || a.inflight.Load() != 0 {
				return false
			}
			return !a.participantBusy(a.dump[:n])
		}
		a.dump = make([]byte, 2*len(a.dump))
	}
}

// participantBusy reports whether a goroutine of a dump after the first (the
// caller) is a busy participant: it carries the simulation's label and is
// not an HTTP server's connection, and its state is one of busyStates
// rather than a wait for the simulation. Its frames do not matter: a goroutine
// that has not run yet shows only its entry function, which may be the
// standard library's (sync.WaitGroup.Go).
func (a *Activity) participantBusy(dump []byte) bool {
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
		if !bytes.Contains(header, a.needle) || bytes.Contains(block, serverFrame) {
			continue
		}
		for _, busy := range busyStates {
			if bytes.HasPrefix(state, busy) {
				return true
			}
		}
	}
	return false
}

// busyStates are the goroutine states of a dump in which a goroutine goes
// on without anything else of the simulation happening first: computing,
// in a system call, or waiting for the runtime (a garbage collection it
// assists or waits for, or a semaphore: one that starts a collection waits
// for the dump's own stop of the world). A goroutine waiting for a mutex is
// one of them too: it goes on once the holder unlocks, and no holder waits
// on the simulation while it holds one (one that did would keep Settle
// from returning, which it reports). The holder need not be a participant:
// a pooled connection's goroutine may still be finishing a call that has
// already answered.
var busyStates = [][]byte{
	[]byte("running"), []byte("runnable"), []byte("syscall"), []byte("preempted"), []byte("GC "), []byte("semacquire"),
	[]byte("sync.Mutex.Lock"), []byte("sync.RWMutex.Lock"), []byte("sync.RWMutex.RLock"),
}

// serverFrame marks the connections of an HTTP server in a goroutine dump.
var serverFrame = []byte("net/http.(*conn).serve")

// goroutineState returns the state of a dump's header line
// (`goroutine 7 [chan receive, 2 minutes labels:{...}]:`).
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
