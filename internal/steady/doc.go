// Package steady is the steady-traffic scenario: writers commit
// a steady stream of messages, every commit wakes the relay function, a
// schedule sweeps once a minute, and relays live as AWS Lambda invocations
// do (a timeout, a stop margin, warm execution environments reused, at most
// the reserved concurrency at once). It measures what that costs in lease
// churn: coordination writes and reads per relayed message, wake-ups that
// exited without joining, relays that joined, handovers, refused
// conditional writes, commit-to-publish latency and how long a bucket with
// pending messages went without a live owner.
//
// # What runs for real
//
// The relay function's handler (outboxlambda.RelayHandler, one per
// execution environment, with its own relay id, store and continuation
// notifier, configured through outboxlambda.LoadConfig like the function),
// the DynamoDB store and writer (outboxddb) against the embedded DynamoDB
// server (outboxlocal), and the wake-up notifier (outboxlambda.Notifier)
// whose Lambda Invoke call the Lambda emulator (internal/lambdasim) answers.
// Kafka is an
// in-memory publisher that acknowledges every record and records when,
// on the simulated clock: Kafka's cost is not what this scenario measures.
//
// # Simulated time
//
// Everything reads one outboxlocal.ManualClock. Round trips take simulated
// time (Latency): each DynamoDB request waits its latency on the clock and
// is then sent (so it is applied at the end of its round trip), a publish
// waits the Kafka latency, a cold environment its start, an asynchronous
// invoke its queueing delay. A small discrete-event driver moves the clock
// to the next event or timer only when every simulated process is parked
// on the clock, by the one rule of internal/simtime: no DynamoDB request in
// flight, and no goroutine of the simulation running simulation code that
// is running, runnable or in a system call, read from a goroutine dump
// taken with the world stopped and bracketed by checks that nothing
// progressed around it. A relay computing between two requests is
// therefore never overtaken by the clock, the figures do not depend on the
// machine's speed, and a seed reproduces a run: only which of two requests
// sent at the same simulated instant lands first is up to the scheduler.
//
// # Accounting
//
// Every DynamoDB request of the relays and writers passes through one
// wrapper (simClient) that classifies it by partition: a write (PutItem,
// UpdateItem, DeleteItem) to the {prefix}#COORDINATION partition is a
// coordination write, split by kind (heartbeat, keep, claim, release,
// renew, stopped stamp, prune); a Query of it is a coordination read (the
// woken relay's trust check, a round's read, the stop's re-reads);
// everything else is message traffic. outboxlocal.Counter counts the same
// requests at the SDK layer, attempts and capacity units included; the
// report shows both so a retry would be visible.
package steady
