// Package outboxmem is an in-memory outbox.Store: one outbox table in a
// process, for tests of code built on the relay, as franz-go's kfake is a
// Kafka cluster for tests of Kafka clients. It keeps the table contract's
// rules — the lease round is the core's protocol (lease.AcquireRound) over
// conditional writes with the DynamoDB store's conditions, at tick
// resolution, messages are relayed in sequence order per bucket, and parked
// messages wait in their bucket's parked partition for an operator's
// MarkReplay (outbox.Quarantine, for PoisonQuarantine) — and
// it passes the contract suite that outboxddb passes
// (outboxtest.RunStoreTests). It imports neither testing nor an AWS SDK.
//
// Every call is atomic: a commit is never half-visible to a fetch, reads
// are never stale and nothing is throttled; tests of those go to outboxddb
// on the embedded server or on DynamoDB Local. A gap in a bucket's
// sequence (an abandoned reservation) is made with Reserve.
package outboxmem
