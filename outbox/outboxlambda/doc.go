// Package outboxlambda holds the pieces the Lambda functions share: the
// environment configuration, the relay handler (one relay lifetime per
// invocation, budgeted from the invocation's deadline), the decoding of the
// relay's trigger events (schedule, wake-up, DynamoDB Streams), the wake-up
// notifier that invokes the relay function asynchronously, and the enqueue
// handler that exposes the writer to producers that are not written in Go.
//
// The functions' mains only build clients and call into this package, so
// everything here is tested with the embedded backends of outboxlocal.
package outboxlambda
