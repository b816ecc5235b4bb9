// Package outboxkafka publishes outbox messages to Apache Kafka with the
// franz-go client.
//
// A Publisher owns one client for its whole life, so a warm Lambda execution
// environment reuses connections across invocations. Whatever options the
// caller passes, the client acknowledges with acks=all, keeps idempotent
// writes on, never produces transactionally and places records with the
// outbox partitioner: an explicit partition wins, any non-nil key (an empty
// one included) goes to murmur2(key) mod partitions exactly as Kafka's Java
// client places it, and only keyless records are spread. These settings are
// what let the relay delete an acknowledged prefix of a batch: a prefix is
// durable, and a failure of one record fails every later record of its
// partition.
//
// Every record carries the message id as its last header (by default
// x-outbox-message-id), replacing any header of that name the writer stored,
// so consumers can deduplicate the redeliveries that at-least-once delivery
// allows.
package outboxkafka
