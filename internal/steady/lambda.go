package steady

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// relayFunction is the relay function's name in the simulated account.
const relayFunction = "spillway-relay"

// schedulePayload is what the schedule's target sends.
var schedulePayload = []byte(`{"trigger":"schedule"}`)

// lambdaService simulates the relay function's asynchronous invocations in
// simulated time: an accepted event starts Latency.Start later in a warm
// idle environment, or in a new one after Latency.ColdStart while fewer than
// ReservedConcurrency exist; otherwise it waits (throttled) for an
// environment to come free, and is dropped once older than MaxEventAge.
// Environments live for the whole run. Every invocation's deadline is its
// start plus RelayTimeout; one still running then is cancelled (killed).
//
// It implements the Lambda Invoke call of the writers' and relays'
// notifiers. Its state changes only in the driver's goroutine, except that
// an invocation ending frees its environment.
type lambdaService struct {
	s *sim

	mu       sync.Mutex
	envs     []*env
	idle     []*env // most recently used last: Lambda prefers warm ones
	ready    []*queuedEvent
	arriving int // accepted events still in their start delay
	starting int // environments being created
	running  int
	stats    lambdaStats
}

type queuedEvent struct {
	payload   []byte
	sentAt    time.Time
	throttled bool
}

// invocation is one run of the handler.
type invocation struct {
	env      *env
	start    time.Time
	deadline time.Time
	cancel   context.CancelFunc
	done     bool // guarded by lambdaService.mu
	killed   bool
}

// lambdaStats counts what the simulated function did.
type lambdaStats struct {
	Invocations    int
	ByTrigger      map[string]int
	ByReason       map[string]int
	WakeUps        int // invocations by a wake-up
	WakeNotJoined  int // wake-up invocations that exited without joining
	Joined         int // invocations that joined the fleet
	JoinedRelays   map[string]bool
	Environments   int
	Throttled      int
	Dropped        int
	Killed         int
	Errors         int
	LastError      string
	ReleaseSkipped int
	Continuations  int
	// Busy sums every invocation's duration, JoinedBusy that of the
	// invocations that joined: the function time Lambda bills.
	Busy, JoinedBusy time.Duration
}

var _ outboxlambda.Invoker = (*lambdaService)(nil)

func newLambdaService(s *sim) *lambdaService {
	return &lambdaService{s: s, stats: lambdaStats{ByTrigger: map[string]int{}, ByReason: map[string]int{}, JoinedRelays: map[string]bool{}}}
}

// Invoke is the asynchronous invoke: the caller waits for the API call's
// round trip, then the event is queued and Lambda answers 202.
func (l *lambdaService) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	if !outbox.Sleep(l.s.clock, l.s.cfg.Latency.Invoke, ctx.Done()) {
		return nil, context.Cause(ctx)
	}
	l.accept(slices.Clone(in.Payload), l.s.clock.Now())
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

// accept queues an event sent at now; it reaches the function Start later.
func (l *lambdaService) accept(payload []byte, now time.Time) {
	l.mu.Lock()
	l.arriving++
	l.mu.Unlock()
	ev := &queuedEvent{payload: payload, sentAt: now}
	l.s.at(now.Add(l.s.cfg.Latency.Start), func(now time.Time) error {
		l.mu.Lock()
		l.arriving--
		l.ready = append(l.ready, ev)
		l.mu.Unlock()
		_, err := l.dispatch(now)
		return err
	})
}

// dispatch starts the ready events while environments allow and reports
// whether it changed anything. It runs in the driver's goroutine.
func (l *lambdaService) dispatch(now time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	for len(l.ready) > 0 {
		ev := l.ready[0]
		if now.Sub(ev.sentAt) > l.s.cfg.MaxEventAge {
			l.ready = l.ready[1:]
			l.stats.Dropped++
			changed = true
			continue
		}
		if n := len(l.idle); n > 0 {
			e := l.idle[n-1]
			l.idle = l.idle[:n-1]
			l.ready = l.ready[1:]
			l.startLocked(e, ev, now)
			changed = true
			continue
		}
		if len(l.envs) < l.s.cfg.ReservedConcurrency {
			e, err := l.s.newEnv(len(l.envs) + 1)
			if err != nil {
				return changed, err
			}
			l.envs = append(l.envs, e)
			l.stats.Environments++
			l.starting++
			l.ready = l.ready[1:]
			changed = true
			l.s.at(now.Add(l.s.cfg.Latency.ColdStart), func(now time.Time) error {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.starting--
				l.startLocked(e, ev, now)
				return nil
			})
			continue
		}
		if !ev.throttled {
			ev.throttled = true
			l.stats.Throttled++
		}
		break
	}
	return changed, nil
}

// startLocked runs the handler for ev in e, with the deadline Lambda gives.
func (l *lambdaService) startLocked(e *env, ev *queuedEvent, now time.Time) {
	l.running++
	ctx, cancel := context.WithCancel(l.s.ctx)
	inv := &invocation{env: e, start: now, deadline: now.Add(l.s.cfg.RelayTimeout), cancel: cancel}
	l.s.ledger.started(e, inv)
	l.s.act.poke()
	dctx := deadlineContext{Context: ctx, clock: l.s.clock, deadline: inv.deadline}
	l.s.tracef("%s start %s", e.relayID, ev.payload)
	l.s.wg.Add(1)
	go func() {
		defer l.s.wg.Done()
		resp, err := e.handler.Handle(dctx, json.RawMessage(ev.payload))
		cancel()
		l.s.ledger.ended(e)
		l.finish(inv, resp, err)
	}()
	l.s.at(inv.deadline, func(time.Time) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !inv.done {
			inv.killed = true
			inv.cancel()
		}
		return nil
	})
}

// finish frees the environment and counts the invocation. The driver starts
// the next ready event at its next step.
func (l *lambdaService) finish(inv *invocation, resp outboxlambda.RelayResponse, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s.act.poke()
	l.s.tracef("%s end: %s joined %v published %d rounds %d refused %d released %v work left %v wake %v err %v",
		inv.env.relayID, resp.Reason, resp.Joined, resp.Published, resp.Rounds, resp.Refused, resp.Released, resp.WorkLeft, resp.WakeUpSent, err)
	inv.done = true
	l.running--
	l.idle = append(l.idle, inv.env)
	st := &l.stats
	st.Invocations++
	took := l.s.clock.Now().Sub(inv.start)
	st.Busy += took
	if resp.Joined {
		st.JoinedBusy += took
	}
	st.ByTrigger[string(resp.Trigger)]++
	if inv.killed {
		st.Killed++
	}
	if err != nil {
		st.Errors++
		st.LastError = err.Error()
		return
	}
	st.ByReason[resp.Reason]++
	if resp.Trigger == outboxlambda.SourceWake {
		st.WakeUps++
		if !resp.Joined {
			st.WakeNotJoined++
		}
	}
	if resp.Joined {
		st.Joined++
		st.JoinedRelays[resp.RelayID] = true
	}
	if resp.ReleaseSkipped {
		st.ReleaseSkipped++
	}
	if resp.WakeUpSent {
		st.Continuations++
	}
}

// busy reports events or invocations not finished.
func (l *lambdaService) busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.arriving > 0 || len(l.ready) > 0 || l.starting > 0 || l.running > 0
}

func (l *lambdaService) snapshot() lambdaStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stats
	st.ByTrigger = maps.Clone(l.stats.ByTrigger)
	st.ByReason = maps.Clone(l.stats.ByReason)
	st.JoinedRelays = maps.Clone(l.stats.JoinedRelays)
	return st
}
