// Package bench holds the real-time scenarios of `spillway bench`, which
// measure Spillway on its embedded backends (or on external DynamoDB and
// Kafka endpoints) on the wall clock and return the figures as structured
// results: relay throughput and the CPU share spent outside the backends,
// and commit-to-acknowledgement latency.
//
// Every scenario drives the real code: outboxddb's Writer and Store through
// the AWS SDK client with outboxlocal's Counter attached, the relay engine
// (outbox.Relay.Run) and outboxkafka's Publisher. Timed figures
// (throughput, latency, CPU share) are only printed, because the machines
// that run them are shared and noisy; what they count is asserted.
//
// The scenarios register with the lab (lab.Register, lab.Scenarios,
// lab.Lookup); `spillway bench` runs them and prints their tables. Backends
// and Workload, what they run on, serve internal/economy's simulated cost
// and idle studies too, in their in-memory form; this package registers no
// simulated study, so the CLI, which links it, links none.
package bench
