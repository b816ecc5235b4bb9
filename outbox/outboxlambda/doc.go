// Package outboxlambda holds the pieces the Lambda functions share: the
// environment configuration, the relay handler (one relay lifetime per
// invocation, budgeted from the invocation's deadline), the decoding of the
// relay's trigger events (schedule, wake-up, DynamoDB Streams), and the
// enqueue handler that exposes the writer to producers that are not written
// in Go. The wake-up notifier is outboxwake's (Notifier here is an alias),
// so a Go service wakes the relay without importing this package's Kafka
// client and tracing SDKs.
//
// The functions' mains only build clients and call into this package, so
// everything here is tested with the embedded backends of outboxlocal.
package outboxlambda
