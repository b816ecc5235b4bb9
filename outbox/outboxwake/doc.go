// Package outboxwake wakes the relay function after a commit, so a message
// is published in well under a second instead of at the relay's next
// scheduled poll. Its Notifier is an outbox.Notifier for
// outboxddb.WriterOptions.Notifier; it asynchronously invokes the relay function
// with a wake-up payload and coalesces bursts of commits.
//
// It depends only on the core, outboxconf and the AWS SDK's Lambda client,
// so a service that writes messages links neither a Kafka client nor a
// tracing SDK. WriterFromEnv builds a service's writer with this notifier
// from the same SPILLWAY_* variables the functions read; it lives here, not
// in outboxddb, so a store-only user of outboxddb links no Lambda client.
package outboxwake
