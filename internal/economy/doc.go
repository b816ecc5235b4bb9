// Package economy is the whole AWS bill of an outbox at steady traffic, per
// rate: Spillway's default deployment measured, and two anchors on the same
// traffic — an always-on relay on ECS Fargate and the DynamoDB Streams →
// Lambda pattern.
//
// Spillway's figures are counted, not modelled: each rate runs the steady
// scenario (internal/steady: the real relay handler through the simulated
// Lambda service, the real writer and notifier, the embedded DynamoDB
// server, in the caller's testing/synctest bubble), with 1 KB values over
// 8 buckets and a wake-up per commit as writers send them. DynamoDB units are what the
// server reports consumed; Lambda requests are the invocations; Lambda
// duration is the invocations' simulated time at the configured memory;
// the schedule is one EventBridge Scheduler invocation a minute. Monthly
// figures scale the run to a 30-day month.
//
// The Fargate anchor's DynamoDB figures come from the same scenario with the
// relay in hold mode (1 s polls, 10 s renewals: what an always-on relay
// sends), and its compute from the task size; at 0 messages/s, where no
// relay joins in the scenario, the hold relay's requests are modelled (one
// heartbeat and a keep per bucket every renewal, one probe per bucket every
// poll). The Streams anchor is a model; Assumptions lists every assumption
// of both anchors, and the report prints them.
//
// Prices come from bench.OnDemandPrices, the one price table.
package economy
