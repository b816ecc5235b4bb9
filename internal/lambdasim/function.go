package lambdasim

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// Handler is what an execution environment runs per invocation:
// outboxlambda.RelayHandler, or a caller's environment wrapping one.
type Handler interface {
	Handle(ctx context.Context, payload json.RawMessage) (outboxlambda.RelayResponse, error)
}

// Config describes the emulated function. Its times are the time
// package's: the wall clock, or, in a simulation, a testing/synctest
// bubble's, on which the Scheduler runs its timers too.
type Config[E Handler] struct {
	// Scheduler runs the emulator's delayed steps (required).
	Scheduler Scheduler
	// Context is every invocation's parent: cancelling it cancels them,
	// and the events still queued or arriving are then discarded instead
	// of started. Default context.Background().
	Context context.Context
	// ReservedConcurrency bounds the execution environments (required,
	// at least 1).
	ReservedConcurrency int
	// Timeout is the function timeout: every invocation's deadline is its
	// start plus Timeout (required).
	Timeout time.Duration
	// MaxEventAge drops a queued event older than this instead of starting
	// it. Default 6 hours, Lambda's.
	MaxEventAge time.Duration
	// InvokeLatency is the Invoke call's round trip, StartLatency the time
	// from accepting an event to its start, ColdStart the creation of an
	// environment. Default 0 each.
	InvokeLatency, StartLatency, ColdStart time.Duration
	// NewEnv builds execution environment n (1-based, counting every
	// environment created) the way the function's init does (required).
	// An error fails the dispatch: the Scheduler's At function returns it.
	NewEnv func(n int) (E, error)
	// Started is called when an invocation starts; it may move
	// inv.Deadline earlier (a budget shorter than the timeout). Ended is
	// called when its handler returned, Killed when the deadline passed
	// with the handler still running (its context's deadline cancels it at
	// the same instant). All three are optional and must not call the
	// Function.
	Started func(inv *Invocation[E])
	Ended   func(inv *Invocation[E], resp outboxlambda.RelayResponse, err error)
	Killed  func(inv *Invocation[E])
	// KeepWarm says, when an invocation ended, how long its environment
	// stays warm while idle before Lambda reclaims it: 0 for the whole
	// run, negative to reclaim it at once (a crashed process). Default:
	// the whole run. Retired is called with every environment reclaimed.
	KeepWarm func(inv *Invocation[E]) time.Duration
	Retired  func(env E)
	// Coalesce folds an incoming event into one still queued (not
	// started), returning the merged payload and true, or false to queue
	// it on its own. Default: never; Lambda queues every event.
	Coalesce func(queued, incoming []byte) ([]byte, bool)
}

// DefaultMaxEventAge is Lambda's maximum event age.
const DefaultMaxEventAge = 6 * time.Hour

// Lambda returns an asynchronous event refused for concurrency to its queue
// and tries it again later, ThrottleRetryFirst after the first attempt and
// then twice as long each time, at most ThrottleRetryMax, until the event
// is older than the maximum event age.
const (
	ThrottleRetryFirst = time.Second
	ThrottleRetryMax   = 5 * time.Minute
)

// Invocation is one run of an environment's handler.
type Invocation[E Handler] struct {
	// Env is the execution environment that runs it; Payload the event.
	Env     E
	Payload []byte
	// Start is when the handler started, Deadline when it is killed if
	// still running.
	Start, Deadline time.Time

	slot   *slot[E]
	cancel context.CancelFunc
	done   bool // guarded by Function.mu
	killed bool // guarded by Function.mu
}

// Cancel cancels the invocation's context, as a crashed process stops
// everything it was doing; the handler's return ends the invocation.
func (inv *Invocation[E]) Cancel() { inv.cancel() }

// slot is one execution environment as Lambda tracks it.
type slot[E Handler] struct {
	env     E
	idleGen int // counts the invocations ended, to tell a reclaim is stale
	retired bool
}

// Function is the emulated relay function. It is safe for concurrent use.
type Function[E Handler] struct {
	cfg Config[E]

	mu       sync.Mutex
	limit    int // the reserved concurrency now
	created  int
	envs     []*slot[E] // live environments
	idle     []*slot[E] // most recently used last: Lambda prefers warm ones
	queue    []*queued  // accepted, not started: ready from readyAt, in order
	starting int        // environments being created
	running  int
	stats    Stats
	joined   map[string]bool
	wg       sync.WaitGroup
}

type queued struct {
	payload []byte
	sentAt  time.Time
	readyAt time.Time
	retry   time.Duration // the wait after the next refusal; 0 until the first
}

var _ outboxlambda.Invoker = (*Function[*outboxlambda.RelayHandler])(nil)

// New validates cfg and returns an idle function without environments.
func New[E Handler](cfg Config[E]) (*Function[E], error) {
	switch {
	case cfg.Scheduler == nil || cfg.NewEnv == nil:
		return nil, errors.New("lambdasim: Scheduler and NewEnv are required")
	case cfg.ReservedConcurrency < 1:
		return nil, errors.New("lambdasim: ReservedConcurrency must be at least 1")
	case cfg.Timeout <= 0:
		return nil, errors.New("lambdasim: Timeout must be positive")
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	if cfg.MaxEventAge <= 0 {
		cfg.MaxEventAge = DefaultMaxEventAge
	}
	f := &Function[E]{cfg: cfg, limit: cfg.ReservedConcurrency, stats: newStats(), joined: map[string]bool{}}
	// A throttled event waits for its retry; discarding the queue as soon
	// as the context ends keeps Wait from waiting out those retries.
	context.AfterFunc(cfg.Context, f.discardQueued)
	return f, nil
}

// discardQueued drops every event not started yet.
func (f *Function[E]) discardQueued() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range f.queue {
		f.wg.Done()
	}
	f.queue = nil
}

// Invoke is the asynchronous invoke: the caller waits for the API call's
// round trip, then the event is queued and Lambda answers 202.
func (f *Function[E]) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	if !sleep.For(f.cfg.InvokeLatency, ctx.Done()) {
		return nil, context.Cause(ctx)
	}
	f.Send(slices.Clone(in.Payload), time.Now())
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

// Send queues an event Lambda accepted at now, as the schedule's target
// does; it can start StartLatency later.
func (f *Function[E]) Send(payload []byte, now time.Time) {
	f.mu.Lock()
	if f.coalesceLocked(payload) {
		f.mu.Unlock()
		return
	}
	ready := now.Add(f.cfg.StartLatency)
	f.queue = append(f.queue, &queued{payload: payload, sentAt: now, readyAt: ready})
	f.wg.Add(1) // done when the event is dropped, discarded or its invocation ends
	f.mu.Unlock()
	f.cfg.Scheduler.At(ready, f.dispatch)
}

// coalesceLocked folds payload into a queued event if Coalesce allows.
func (f *Function[E]) coalesceLocked(payload []byte) bool {
	if f.cfg.Coalesce == nil {
		return false
	}
	for _, q := range f.queue {
		if merged, ok := f.cfg.Coalesce(q.payload, payload); ok {
			q.payload = merged
			return true
		}
	}
	return false
}

// SetReservedConcurrency changes the reserved concurrency, as
// PutFunctionConcurrency does: 0 throttles every event. Environments beyond
// the new limit are kept but start nothing while the limit is used up.
// Events refused before wait for their next retry.
func (f *Function[E]) SetReservedConcurrency(n int) {
	f.mu.Lock()
	f.limit = max(n, 0)
	f.mu.Unlock()
}

// dispatch starts the ready events while the concurrency allows, in a warm
// environment if one is idle, else in a new one. An event refused for
// concurrency is tried again after its retry delay, not as soon as an
// environment frees, as Lambda does.
func (f *Function[E]) dispatch(now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 0; i < len(f.queue); {
		ev := f.queue[i]
		switch {
		case ev.readyAt.After(now):
			i++
			continue
		case f.cfg.Context.Err() != nil:
			f.removeLocked(i)
			continue
		case now.Sub(ev.sentAt) > f.cfg.MaxEventAge:
			f.removeLocked(i)
			f.stats.Dropped++
			continue
		}
		started, err := f.startOneLocked(ev, now)
		if err != nil {
			f.removeLocked(i)
			return err
		}
		if !started {
			if ev.retry == 0 {
				ev.retry = ThrottleRetryFirst
				f.stats.Throttled++
			}
			ev.readyAt = now.Add(ev.retry)
			ev.retry = min(2*ev.retry, ThrottleRetryMax)
			f.cfg.Scheduler.At(ev.readyAt, f.dispatch)
			i++
			continue
		}
		f.queue = slices.Delete(f.queue, i, i+1)
	}
	return nil
}

// removeLocked drops queued event i without running it.
func (f *Function[E]) removeLocked(i int) {
	f.queue = slices.Delete(f.queue, i, i+1)
	f.wg.Done()
}

// startOneLocked starts ev in a warm environment or a new one, or reports
// that the concurrency is used up.
func (f *Function[E]) startOneLocked(ev *queued, now time.Time) (bool, error) {
	if f.running+f.starting >= f.limit {
		return false, nil
	}
	if n := len(f.idle); n > 0 {
		sl := f.idle[n-1]
		f.idle = f.idle[:n-1]
		f.startLocked(sl, ev, now)
		return true, nil
	}
	if len(f.envs) >= f.limit {
		return false, nil
	}
	e, err := f.cfg.NewEnv(f.created + 1)
	if err != nil {
		return false, err
	}
	f.created++
	sl := &slot[E]{env: e}
	f.envs = append(f.envs, sl)
	f.stats.Environments++
	f.starting++
	f.cfg.Scheduler.At(now.Add(f.cfg.ColdStart), func(now time.Time) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.starting--
		f.startLocked(sl, ev, now)
		return nil
	})
	return true, nil
}

// startLocked runs the handler for ev in sl's environment, with the
// deadline Lambda gives, and schedules the kill at the deadline.
func (f *Function[E]) startLocked(sl *slot[E], ev *queued, now time.Time) {
	f.running++
	ctx, cancel := context.WithCancel(f.cfg.Context)
	inv := &Invocation[E]{Env: sl.env, Payload: ev.payload, Start: now, Deadline: now.Add(f.cfg.Timeout), slot: sl, cancel: cancel}
	if f.cfg.Started != nil {
		f.cfg.Started(inv)
	}
	// The context ends at the deadline as Lambda's does; the kill
	// scheduled below counts it once if the handler has not returned.
	dctx, release := context.WithDeadline(ctx, inv.Deadline)
	go func() {
		resp, err := sl.env.Handle(dctx, json.RawMessage(ev.payload))
		// A handler cut short by its deadline's context returned before or
		// after the kill ran: killed either way, once.
		if errors.Is(dctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			f.kill(inv)
		}
		release()
		cancel()
		if f.cfg.Ended != nil {
			f.cfg.Ended(inv, resp, err)
		}
		f.finish(inv, resp, err)
	}()
	f.cfg.Scheduler.At(inv.Deadline, func(time.Time) error {
		f.kill(inv)
		return nil
	})
}

// kill kills inv at its deadline unless it ended or was killed already.
func (f *Function[E]) kill(inv *Invocation[E]) {
	f.mu.Lock()
	kill := !inv.done && !inv.killed
	inv.killed = inv.killed || kill
	f.mu.Unlock()
	if kill {
		if f.cfg.Killed != nil {
			f.cfg.Killed(inv)
		}
		inv.cancel()
	}
}

// finish frees the environment (or reclaims it) and counts the
// invocation. It starts nothing: every queued event has its dispatch
// scheduled, at its start or its next retry.
func (f *Function[E]) finish(inv *Invocation[E], resp outboxlambda.RelayResponse, err error) {
	defer f.wg.Done()
	now := time.Now()
	var keep time.Duration
	if f.cfg.KeepWarm != nil {
		keep = f.cfg.KeepWarm(inv)
	}
	sl := inv.slot
	f.mu.Lock()
	inv.done = true
	f.running--
	sl.idleGen++
	f.stats.add(resp, err, now.Sub(inv.Start), inv.killed)
	if err == nil && resp.Joined {
		f.joined[resp.RelayID] = true
		f.stats.JoinedRelays = len(f.joined)
	}
	if keep < 0 {
		f.retireLocked(sl)
	} else {
		f.idle = append(f.idle, sl)
	}
	gen := sl.idleGen
	f.mu.Unlock()
	if keep < 0 && f.cfg.Retired != nil {
		f.cfg.Retired(sl.env)
	}
	if keep > 0 {
		f.cfg.Scheduler.At(now.Add(keep), func(time.Time) error {
			f.reclaim(sl, gen)
			return nil
		})
	}
}

// reclaim retires sl if it stayed idle since invocation gen ended.
func (f *Function[E]) reclaim(sl *slot[E], gen int) {
	f.mu.Lock()
	stale := sl.retired || sl.idleGen != gen || !slices.Contains(f.idle, sl)
	if !stale {
		f.retireLocked(sl)
	}
	f.mu.Unlock()
	if !stale && f.cfg.Retired != nil {
		f.cfg.Retired(sl.env)
	}
}

// retireLocked removes sl from the environments and the idle list.
func (f *Function[E]) retireLocked(sl *slot[E]) {
	sl.retired = true
	f.envs = slices.DeleteFunc(f.envs, func(x *slot[E]) bool { return x == sl })
	f.idle = slices.DeleteFunc(f.idle, func(x *slot[E]) bool { return x == sl })
}

// Pending returns the events and invocations not finished: accepted and
// not yet started, waiting for an environment, or running.
func (f *Function[E]) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue) + f.starting + f.running
}

// Running returns the invocations started (or starting in a new
// environment) and not yet returned; events waiting in the queue are not
// counted.
func (f *Function[E]) Running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starting + f.running
}

// Wait blocks until every event sent so far was dropped, discarded or run
// to its end. Once Context is done, it returns when the invocations
// running have returned.
func (f *Function[E]) Wait() { f.wg.Wait() }

// Stats returns what the function did so far.
func (f *Function[E]) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats.clone()
}
