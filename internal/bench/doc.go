// Package bench measures Spillway on its embedded backends (or on external
// DynamoDB and Kafka endpoints) and returns the figures as structured
// results: relay throughput and the CPU share spent outside the backends,
// DynamoDB requests and capacity units per message for every enqueue path
// and for relaying, the request units an idle deployment spends per hour,
// and commit-to-acknowledgement latency.
//
// Every scenario drives the real code: outboxddb's Writer and Store through
// the AWS SDK client with outboxlocal's Counter attached, the relay engine
// (outbox.Relay.Run) and outboxkafka's Publisher. Counted figures (requests,
// units) are deterministic and asserted by this package's tests; timed
// figures (throughput, latency, CPU share) are only printed, because the
// machines that run them are shared and noisy.
//
// Scenarios are registered by name (Register, Scenarios, Lookup);
// `spillway bench` runs them and prints their tables.
package bench
