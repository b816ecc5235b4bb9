package main

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// lambdaSim runs the relay function in-process the way Lambda does: a pool
// of execution environments, each created once and reused warm, at most
// max running at once (reserved concurrency); asynchronous invokes wait in a
// queue while every environment is busy and are dropped past maxEventAge,
// like the function's event invoke configuration; every invocation gets a
// deadline of timeout.
//
// It implements the Lambda Invoke call the wake-up notifier makes, so the
// enqueue path and the relays' continuation wake-ups run exactly as on AWS.
type lambdaSim struct {
	ctx         context.Context
	timeout     time.Duration
	maxEventAge time.Duration
	max         int
	newEnv      func() (*outboxlambda.RelayHandler, error)

	mu      sync.Mutex
	idle    []*outboxlambda.RelayHandler
	envs    int
	running int
	queue   []queuedEvent
	wg      sync.WaitGroup
	stats   simStats
}

type queuedEvent struct {
	payload []byte
	at      time.Time
}

// simStats counts what the simulated function did.
type simStats struct {
	Invocations   int            `json:"invocations"`
	ByTrigger     map[string]int `json:"byTrigger"`
	ByReason      map[string]int `json:"byReason"`
	Joined        int            `json:"joined"`
	Environments  int            `json:"environments"`
	Throttled     int            `json:"throttled"`
	Dropped       int            `json:"dropped"`
	Errors        int            `json:"errors"`
	ReleasesSkip  int            `json:"releasesSkipped"`
	Continuations int            `json:"continuations"`
	LastError     string         `json:"lastError,omitempty"`
}

var _ outboxlambda.Invoker = (*lambdaSim)(nil)

func newLambdaSim(ctx context.Context, max int, timeout time.Duration, newEnv func() (*outboxlambda.RelayHandler, error)) *lambdaSim {
	return &lambdaSim{ctx: ctx, timeout: timeout, maxEventAge: time.Minute, max: max, newEnv: newEnv,
		stats: simStats{ByTrigger: map[string]int{}, ByReason: map[string]int{}}}
}

// Invoke queues an asynchronous invocation; it answers 202 like Lambda.
func (s *lambdaSim) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	s.send(in.Payload)
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

// send queues one event and starts invocations while environments are free.
func (s *lambdaSim) send(payload []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, queuedEvent{payload: payload, at: time.Now()})
	if s.running >= s.max {
		s.stats.Throttled++
	}
	s.dispatchLocked()
}

func (s *lambdaSim) dispatchLocked() {
	for len(s.queue) > 0 && s.running < s.max && s.ctx.Err() == nil {
		ev := s.queue[0]
		s.queue = s.queue[1:]
		if time.Since(ev.at) > s.maxEventAge {
			s.stats.Dropped++
			continue
		}
		var env *outboxlambda.RelayHandler
		if n := len(s.idle); n > 0 {
			env, s.idle = s.idle[n-1], s.idle[:n-1]
		} else {
			var err error
			if env, err = s.newEnv(); err != nil {
				s.stats.Errors++
				s.stats.LastError = err.Error()
				continue
			}
			s.envs++
			s.stats.Environments = s.envs
		}
		s.running++
		s.wg.Add(1)
		go s.invoke(env, ev.payload)
	}
}

func (s *lambdaSim) invoke(env *outboxlambda.RelayHandler, payload []byte) {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	resp, err := env.Handle(ctx, json.RawMessage(payload))
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.idle = append(s.idle, env)
	s.stats.Invocations++
	s.stats.ByTrigger[string(resp.Trigger)]++
	if err != nil {
		s.stats.Errors++
		s.stats.LastError = err.Error()
	} else {
		s.stats.ByReason[resp.Reason]++
		if resp.Joined {
			s.stats.Joined++
		}
		if resp.ReleaseSkipped {
			s.stats.ReleasesSkip++
		}
		if resp.WakeUpSent {
			s.stats.Continuations++
		}
	}
	s.dispatchLocked()
}

// sweep sends the schedule's event every interval until ctx ends.
func (s *lambdaSim) sweep(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.send([]byte(`{"trigger":"schedule"}`))
		}
	}
}

// busy reports running or queued invocations.
func (s *lambdaSim) busy() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running + len(s.queue)
}

// wait blocks until every started invocation returned.
func (s *lambdaSim) wait() { s.wg.Wait() }

func (s *lambdaSim) snapshot() simStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.stats
	c.ByTrigger, c.ByReason = map[string]int{}, map[string]int{}
	for k, v := range s.stats.ByTrigger {
		c.ByTrigger[k] = v
	}
	for k, v := range s.stats.ByReason {
		c.ByReason[k] = v
	}
	return c
}
