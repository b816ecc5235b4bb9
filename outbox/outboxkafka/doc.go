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
// The client sends only while the publisher flushes it (kgo.ManualFlushing),
// and a batch is handed to it whole, never while a flush runs; concurrent
// publishes share the flushes. So when a broker refuses a partition batch,
// every later record of that partition is still in the client and fails
// with it: no record overtakes a refused one, and the first deliveries of a
// key stay in the order of its batches, whatever the broker refuses. A batch
// the client's buffer (MaxBufferedRecords, MaxBufferedBytes) cannot hold is
// sent in parts, each once the part before it is acknowledged; waiting for
// room is never a failure.
//
// Every record carries the message id as its last header (by default
// x-outbox-message-id), replacing any header of that name the writer stored,
// so consumers can deduplicate the redeliveries that at-least-once delivery
// allows.
package outboxkafka
