// Package outboxinbox gives Go consumers of Spillway's topics exactly-once
// effects on DynamoDB: the inbox half of the outbox.
//
// Spillway publishes at least once: a relay that dies between publish and
// delete, a lease lost during a slow delete or a replayed parked message
// publish a record again under the same message id (the x-outbox-message-id
// header). Inbox.Process reads that id and this consumer's marker for it
// (one consistent read): a marker saying the record (same fingerprint:
// topic, key, value) was applied makes it a Duplicate without running
// anything, one with another fingerprint a *FingerprintError; a marker
// proving nothing was applied (failed runs, or a dead-lettering of another
// delivery: a re-drive, see Redrive) lets it run. Otherwise too it runs the
// consumer's Handler with a transaction under construction (Tx), adds the
// marker, conditioned on no marker saying applied, and commits the
// handler's writes and the marker in one TransactWriteItems: no effect is
// applied twice, even when two processes race on one message.
//
// Records come from a franz-go consumer group (Consumer: records of a
// partition in order, offsets committed only after their verdict) or from
// an AWS Lambda Kafka event source mapping (LambdaHandler).
//
// Marker items live in the consumer's table, one partition per (consumer,
// message id) ("{prefix}#INBOX#{consumer}#{message id}", sort key
// "INBOX"), so markers spread over DynamoDB's partitions like the ids
// themselves and services sharing a prefix keep apart. They carry a TTL
// attribute (ExpiresAt, default 7 days after processing): a duplicate that
// arrives after DynamoDB deleted the marker is applied again, so the TTL
// must exceed the longest time a duplicate can take to arrive (relay lease
// duration plus the age of a parked message you may still replay).
package outboxinbox
