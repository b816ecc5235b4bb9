// Package e2e holds Spillway's end-to-end tests: writers, the relay engine,
// the DynamoDB store and the Kafka publisher wired together with the real
// aws-sdk-go-v2 and franz-go clients, against the embedded backends of
// outboxlocal. The tests run in testing/synctest bubbles with the backends
// in memory, so relays' budgets, leases and polls run on the bubble's
// clock; the benchmarks use loopback sockets (or the external endpoints
// they point at) and the wall clock. It has no
// non-test code; run it with `go test ./internal/e2e/` and its benchmarks
// with `go test -run '^$' -bench . ./internal/e2e/`.
package e2e
