// Package steady is the steady-traffic scenario: a writer commits
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
// Run runs inside a testing/synctest bubble, whose fake clock is the
// simulated time: every process reads outbox.SystemClock and sleeps on
// ordinary timers, and the bubble moves the clock only when every goroutine
// of the run is durably blocked. A relay computing between two requests is
// therefore never overtaken by the clock, and the figures do not depend on
// the machine's speed. Round trips take simulated time (Latency): each
// DynamoDB request sleeps its latency and is then sent to the in-memory
// server (outboxlocal.InMemory, served in the caller's goroutine), so it is
// applied at the end of its round trip; a publish sleeps the Kafka
// latency, a cold environment its start, an asynchronous invoke its
// queueing delay (the Lambda emulator's steps go to the lab's driver,
// lab.Sim, which runs them at their instants). The driver is the lab's:
// after anything that may end the run it lets the instant settle
// (synctest.Wait), runs the emulator's steps due, and checks whether the
// writes are over, every message published and the function idle.
//
// # Determinism
//
// A seed reproduces a run, the whole Report equal (TestSteady/IsDeterministic
// holds it to that). The commits (times, ids, keys, values) and the
// schedule's phase come from one generator that one goroutine draws in
// order; everything else follows from them through the fixed latencies and
// the relays' timers. Commit instants are drawn to the nanosecond, so the
// requests of processes set off by different commits do not fall on one
// instant; those that do (a relay's parallel drains of its buckets) touch
// different items, so the order the scheduler gives them changes nothing.
// The report iterates sorted keys.
//
// # Accounting
//
// Every DynamoDB request of the relays and writers passes through one
// client (a lab.Client) whose observer, the classifier, classifies it by
// partition: a write (PutItem, UpdateItem, DeleteItem) to the
// {prefix}#COORDINATION partition is a coordination write, split by kind
// (heartbeat, keep, claim, release, renew, stopped stamp, prune); a Query
// of it is a coordination read (the
// woken relay's trust check, a round's read, the stop's re-reads);
// everything else is message traffic. outboxlocal.Counter counts the same
// requests at the SDK layer, attempts and capacity units included; the
// report shows both so a retry would be visible.
package steady
