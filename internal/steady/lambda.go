package steady

import (
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// relayFunction is the relay function's name in the simulated account.
const relayFunction = "spillway-relay"

// schedulePayload is what the schedule's target sends.
var schedulePayload = []byte(`{"trigger":"schedule"}`)

// newLambda returns the relay function on the bubble's clock: its delayed
// steps run on the bubble's timers (sim.At), its environments are built by
// newEnv, and every invocation's start and end reach the ledger; an end
// wakes the driver, as it may end the run.
func (s *sim) newLambda() (*lambdasim.Function[*env], error) {
	lat := s.cfg.Latency
	return lambdasim.New(lambdasim.Config[*env]{
		Scheduler:           s,
		Context:             s.ctx,
		ReservedConcurrency: s.cfg.ReservedConcurrency,
		Timeout:             s.cfg.RelayTimeout,
		MaxEventAge:         s.cfg.MaxEventAge,
		InvokeLatency:       lat.Invoke,
		StartLatency:        lat.Start,
		ColdStart:           lat.ColdStart,
		NewEnv:              s.newEnv,
		Started: func(inv *lambdasim.Invocation[*env]) {
			s.ledger.started(inv.Env, s.clock.Now())
			s.tracef("%s start %s", inv.Env.relayID, inv.Payload)
		},
		Ended: func(inv *lambdasim.Invocation[*env], resp outboxlambda.RelayResponse, err error) {
			s.ledger.ended(inv.Env, s.clock.Now())
			s.poke()
			s.tracef("%s end: %s joined %v published %d rounds %d refused %d released %v work left %v wake %v err %v",
				inv.Env.relayID, resp.Reason, resp.Joined, resp.Published, resp.Rounds, resp.Refused, resp.Released, resp.WorkLeft, resp.WakeUpSent, err)
		},
	})
}
