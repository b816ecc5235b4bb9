package lambdasim

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// Handler is what an execution environment runs per invocation:
// outboxlambda.RelayHandler, or a caller's environment wrapping one.
type Handler interface {
	Handle(ctx context.Context, payload json.RawMessage) (outboxlambda.RelayResponse, error)
}

// Config describes the emulated function. Durations are on Clock.
type Config[E Handler] struct {
	// Clock tells the time of event ages and deadlines and times the
	// Invoke call's round trip (required).
	Clock outbox.Clock
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
	// NewEnv builds execution environment n (1-based) the way the
	// function's init does (required). An error fails the dispatch: the
	// Scheduler's At function returns it.
	NewEnv func(n int) (E, error)
	// Started is called when an invocation starts, Ended when its handler
	// returned; both are optional and must not call the Function.
	Started func(inv *Invocation[E])
	Ended   func(inv *Invocation[E], resp outboxlambda.RelayResponse, err error)
}

// DefaultMaxEventAge is Lambda's maximum event age.
const DefaultMaxEventAge = 6 * time.Hour

// Invocation is one run of an environment's handler.
type Invocation[E Handler] struct {
	// Env is the execution environment that runs it; Payload the event.
	Env     E
	Payload []byte
	// SentAt is when Lambda accepted the event, Start when the handler
	// started, Deadline when it is killed if still running.
	SentAt, Start, Deadline time.Time

	cancel context.CancelFunc
	done   bool // guarded by Function.mu
	killed bool // guarded by Function.mu
}

// Function is the emulated relay function. It is safe for concurrent use.
type Function[E Handler] struct {
	cfg Config[E]

	mu       sync.Mutex
	envs     []E
	idle     []E // most recently used last: Lambda prefers warm ones
	ready    []*queued
	arriving int // accepted events still in their start delay
	starting int // environments being created
	running  int
	stats    Stats
	joined   map[string]bool
	wg       sync.WaitGroup
}

type queued struct {
	payload   []byte
	sentAt    time.Time
	throttled bool
}

var _ outboxlambda.Invoker = (*Function[*outboxlambda.RelayHandler])(nil)

// New validates cfg and returns an idle function without environments.
func New[E Handler](cfg Config[E]) (*Function[E], error) {
	switch {
	case cfg.Clock == nil || cfg.Scheduler == nil || cfg.NewEnv == nil:
		return nil, errors.New("lambdasim: Clock, Scheduler and NewEnv are required")
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
	return &Function[E]{cfg: cfg, stats: newStats(), joined: map[string]bool{}}, nil
}

// Invoke is the asynchronous invoke: the caller waits for the API call's
// round trip, then the event is queued and Lambda answers 202.
func (f *Function[E]) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	if !outbox.Sleep(f.cfg.Clock, f.cfg.InvokeLatency, ctx.Done()) {
		return nil, context.Cause(ctx)
	}
	f.Send(slices.Clone(in.Payload), f.cfg.Clock.Now())
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

// Send queues an event Lambda accepted at now, as the schedule's target
// does; it reaches the function StartLatency later.
func (f *Function[E]) Send(payload []byte, now time.Time) {
	f.mu.Lock()
	f.arriving++
	f.mu.Unlock()
	f.wg.Add(1) // done when the event is dropped, discarded or its invocation ends
	ev := &queued{payload: payload, sentAt: now}
	f.cfg.Scheduler.At(now.Add(f.cfg.StartLatency), func(now time.Time) error {
		f.mu.Lock()
		f.arriving--
		f.ready = append(f.ready, ev)
		f.mu.Unlock()
		return f.dispatch(now)
	})
}

// dispatch starts the ready events while environments allow.
func (f *Function[E]) dispatch(now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.ready) > 0 {
		ev := f.ready[0]
		if f.cfg.Context.Err() != nil {
			f.ready = f.ready[1:]
			f.wg.Done()
			continue
		}
		if now.Sub(ev.sentAt) > f.cfg.MaxEventAge {
			f.ready = f.ready[1:]
			f.stats.Dropped++
			f.wg.Done()
			continue
		}
		if n := len(f.idle); n > 0 {
			e := f.idle[n-1]
			f.idle = f.idle[:n-1]
			f.ready = f.ready[1:]
			f.startLocked(e, ev, now)
			continue
		}
		if len(f.envs) < f.cfg.ReservedConcurrency {
			e, err := f.cfg.NewEnv(len(f.envs) + 1)
			if err != nil {
				f.ready = f.ready[1:]
				f.wg.Done()
				return err
			}
			f.envs = append(f.envs, e)
			f.stats.Environments++
			f.starting++
			f.ready = f.ready[1:]
			f.cfg.Scheduler.At(now.Add(f.cfg.ColdStart), func(now time.Time) error {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.starting--
				f.startLocked(e, ev, now)
				return nil
			})
			continue
		}
		if !ev.throttled {
			ev.throttled = true
			f.stats.Throttled++
		}
		break
	}
	return nil
}

// startLocked runs the handler for ev in e, with the deadline Lambda gives,
// and schedules the kill at the deadline.
func (f *Function[E]) startLocked(e E, ev *queued, now time.Time) {
	f.running++
	ctx, cancel := context.WithCancel(f.cfg.Context)
	inv := &Invocation[E]{Env: e, Payload: ev.payload, SentAt: ev.sentAt, Start: now, Deadline: now.Add(f.cfg.Timeout), cancel: cancel}
	if f.cfg.Started != nil {
		f.cfg.Started(inv)
	}
	dctx := deadlineContext{Context: ctx, clock: f.cfg.Clock, deadline: inv.Deadline}
	go func() {
		resp, err := e.Handle(dctx, json.RawMessage(ev.payload))
		cancel()
		if f.cfg.Ended != nil {
			f.cfg.Ended(inv, resp, err)
		}
		f.finish(inv, resp, err)
	}()
	f.cfg.Scheduler.At(inv.Deadline, func(time.Time) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !inv.done {
			inv.killed = true
			inv.cancel()
		}
		return nil
	})
}

// finish frees the environment, counts the invocation and lets the next
// ready event start.
func (f *Function[E]) finish(inv *Invocation[E], resp outboxlambda.RelayResponse, err error) {
	now := f.cfg.Clock.Now()
	f.mu.Lock()
	inv.done = true
	f.running--
	f.idle = append(f.idle, inv.Env)
	f.stats.add(resp, err, now.Sub(inv.Start), inv.killed)
	if err == nil && resp.Joined {
		f.joined[resp.RelayID] = true
		f.stats.JoinedRelays = len(f.joined)
	}
	waiting := len(f.ready) > 0
	f.mu.Unlock()
	if waiting {
		f.cfg.Scheduler.At(now, f.dispatch)
	}
	f.wg.Done()
}

// Pending returns the events and invocations not finished: accepted and
// not yet started, waiting for an environment, or running.
func (f *Function[E]) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.arriving + len(f.ready) + f.starting + f.running
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
