// Package outboxinbox gives Go consumers of Spillway's topics exactly-once
// effects on DynamoDB: the inbox half of the outbox.
//
// Spillway publishes at least once: a relay that dies between publish and
// delete, a lease lost during a slow delete or a replayed parked message
// publish a record again under the same message id (the x-outbox-message-id
// header). Inbox.Process reads that id, runs the consumer's Handler with a
// transaction under construction (Tx), adds one marker item for (consumer,
// message id) conditioned on attribute_not_exists, and commits the
// handler's writes and the marker in one TransactWriteItems. A duplicate
// fails only the marker's condition: no effect is applied twice, and the
// record is reported as Duplicate, without an error.
//
// Records come from a franz-go consumer group (Consumer: records of a
// partition in order, offsets committed only after their verdict) or from
// an AWS Lambda Kafka event source mapping (LambdaHandler).
//
// Marker items live in the consumer's table, one partition per message id
// ("{prefix}#INBOX#{message id}", sort key "INBOX"), so markers spread over
// DynamoDB's partitions like the ids themselves. They carry a TTL attribute
// (ExpiresAt, default 7 days after processing): a duplicate that arrives
// after DynamoDB deleted the marker is applied again, so the TTL must
// exceed the longest time a duplicate can take to arrive (relay lease
// duration plus the age of a parked message you may still replay).
package outboxinbox
