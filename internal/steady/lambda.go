package steady

import (
	"fmt"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// newLambda returns the relay function on the bubble's clock: the lab's
// driver runs its delayed steps (lab.Sim.At), each environment runs the
// real relay handler with a store that reports to the ledger and a
// publisher that stands in for Kafka, and every invocation's start and end
// reach the ledger; an end wakes the driver, as it may end the run.
func (s *sim) newLambda() (*lambdasim.Function[*lab.RelayEnv], error) {
	lat := s.cfg.Latency
	return lab.NewRelayFunction(lab.RelayFunction{
		Sim: s.lab,
		Lambda: lambdasim.Config[*lab.RelayEnv]{
			ReservedConcurrency: s.cfg.Buckets,
			Timeout:             s.cfg.RelayTimeout,
			MaxEventAge:         maxEventAge,
			InvokeLatency:       lat.Invoke,
			StartLatency:        lat.Start,
			ColdStart:           lat.ColdStart,
			Started: func(inv *lambdasim.Invocation[*lab.RelayEnv]) {
				s.ledger.started(envOf(inv.Env), s.clock.Now())
			},
			Ended: func(inv *lambdasim.Invocation[*lab.RelayEnv], _ outboxlambda.RelayResponse, _ error) {
				s.ledger.ended(envOf(inv.Env), s.clock.Now())
				s.lab.Poke()
			},
		},
		Config:  s.fn,
		Client:  s.client,
		RelayID: func(n int) string { return fmt.Sprintf("spillway-relay-%02d", n) },
		// Every record is acknowledged after one produce round trip, and
		// the ledger records when.
		Publisher: func(*lab.RelayEnv) outbox.Publisher {
			return &lab.Publisher{InitLatency: lat.KafkaInit, PingLatency: lat.Kafka, Latency: lat.Kafka, Acked: s.ledger.acked}
		},
		Store: s.newEnvStore,
		HandlerConfig: func(re *lab.RelayEnv, hc *outboxlambda.RelayHandlerConfig) {
			hc.Hooks = append(hc.Hooks, roundHook{s, envOf(re)})
			if s.bell != nil {
				hc.Doorbell = s.bell.Listener()
			}
		},
		Continuations: true,
	})
}
