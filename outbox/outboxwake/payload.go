package outboxwake

// TriggerWake is the trigger of a wake-up payload.
const TriggerWake = "wake"

// Payload is the wire shape of a wake-up: the relay function decodes
// exactly these fields (outboxlambda.EventDecoder).
type Payload struct {
	// Trigger is TriggerWake.
	Trigger string `json:"trigger"`
	// Buckets are the buckets to drain; empty means unknown (all).
	Buckets []int `json:"buckets"`
	// Hop counts the continuation wake-ups of a chain; 0 for a writer's.
	Hop int `json:"hop"`
	// Join asks the woken relay to take a share of the buckets.
	Join bool `json:"join"`
}
