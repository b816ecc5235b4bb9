package outboxwake

import "github.com/spillway-dev/spillway/outbox"

// Payload is the wire shape of a wake-up: the relay function decodes
// exactly these fields (outboxlambda.EventDecoder).
type Payload struct {
	// Trigger is outbox.TriggerWake, the run's trigger the payload asks
	// for.
	Trigger outbox.Trigger `json:"trigger"`
	// Buckets are the buckets to drain; empty means unknown (all).
	Buckets []int `json:"buckets"`
	// Hop counts the continuation wake-ups of a chain; 0 for a writer's.
	Hop int `json:"hop"`
	// Join asks the woken relay to take a share of the buckets.
	Join bool `json:"join"`
}
