// Package lambdasim emulates the AWS Lambda service in-process for the
// relay function: the operator CLI's demo (spillway run) runs it on the
// wall clock; the lab's studies (internal/lab: idle, steady, economy,
// the burst) and the fleet simulation run it in a testing/synctest
// bubble, whose clock the time package then reads. It runs the real outboxlambda handlers, so the enqueue path, the wake-ups,
// the continuation chain and the relay's stop all run as on AWS.
//
// What it models, as Lambda does for a function with reserved concurrency
// and an event invoke configuration:
//
//   - Asynchronous invokes (Function.Invoke, the Lambda API call the
//     wake-up notifier makes): the caller waits InvokeLatency, Lambda
//     answers 202 and queues the event; it can start StartLatency later.
//   - Execution environments: created on demand (a cold start, ColdStart
//     late) while fewer than ReservedConcurrency exist, then kept and
//     reused warm, one invocation at a time, the most recently used first.
//     An environment holds whatever NewEnv built (the handler, its store,
//     its Kafka client, its relay id and leases) across invocations.
//   - Throttling: an event that finds every environment busy and the
//     concurrency used up goes back to the queue and is tried again 1 s
//     later, then after twice as long each time up to 5 minutes, not as
//     soon as an environment frees; one older than MaxEventAge when it is
//     tried is dropped instead of started.
//   - Deadlines: an invocation's context has the deadline start + Timeout
//     (context.WithDeadline) and is cancelled when the clock reaches it:
//     the invocation is killed.
//
// The emulator starts no timer of its own for its delayed steps: they go to
// a Scheduler, the simulation's (lab.Sim in a bubble) or WallScheduler on
// the wall clock. Faults are injected through what NewEnv
// builds (the handler's store, publisher and clients), never by bypassing
// the handler.
//
// internal/lambdalocal is a different job: it hosts the real function
// binaries as processes behind the Lambda Runtime API, on the wall clock,
// for tests and scripts/invoke. This package runs handlers as goroutines,
// in a bubble when time is to be simulated.
package lambdasim
