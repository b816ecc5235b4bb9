// Package economy owns the bill studies, registered with the lab as
// "cost" (RunCost: DynamoDB requests and units per message of every
// enqueue path and of relaying, next to the seed's model), "idle"
// (RunIdle: the request units per hour of an idle deployment, drain, hold
// and always-on) and "economy" (Run: the whole AWS bill per month by
// rate, Spillway counted on the steady study's runs, an always-on Fargate
// relay and the Streams → Lambda pattern as anchors). Cost and idle run
// the real relay on the in-memory form of the bench's backends
// (internal/bench); every study prices its counts with OnDemandPrices.
// docs/benchmarks.md states each study's set-up and assumptions.
package economy
