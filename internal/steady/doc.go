// Package steady is the steady-traffic study (`make lab SCENARIO=steady`):
// a writer commits a Poisson stream, each commit may wake the relay
// function, a schedule sweeps once a minute, and relays live as Lambda
// invocations (lab.RelayFunction on the Lambda emulator: the real relay
// handler, store and notifier against the embedded DynamoDB server) in the
// caller's testing/synctest bubble. It measures lease churn per relayed
// message, latency and ownership gaps against targets. docs/benchmarks.md,
// "Steady traffic on Lambda", states the scenario, its latencies, targets,
// accounting and determinism.
package steady
