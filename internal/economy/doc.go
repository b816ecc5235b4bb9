// Package economy owns Spillway's bill studies, simulated in the lab's
// testing/synctest bubble and registered with the lab as "cost", "idle" and
// "economy", from one message's requests to the whole bill:
//
//   - cost (RunCost): the DynamoDB requests and capacity units per message
//     of every enqueue path and of relaying, and a relay run's fixed ones,
//     counted by outboxlocal's Counter and set next to the seed's model;
//   - idle (RunIdle): the request units per hour of an idle deployment in
//     drain mode with its schedule, in hold mode, and always on, with the
//     real relay engine (in Lambda, the relay function's real handler on
//     the emulator);
//   - economy (Run): the whole AWS bill of an outbox at steady traffic, per
//     rate: Spillway's default deployment measured, and two anchors on the
//     same traffic — an always-on relay on ECS Fargate and the DynamoDB
//     Streams → Lambda pattern.
//
// The cost and idle studies run on the in-memory form of the bench's
// backends (internal/bench), on which `spillway bench` runs its real-time
// scenarios; the CLI does not link this package.
//
// In the economy study, Spillway's figures are counted, not modelled: each
// rate runs the steady scenario (internal/steady: the real relay handler
// through the simulated Lambda service, the real writer and notifier, the
// embedded DynamoDB server, in the caller's testing/synctest bubble), with
// 1 KB values over 8 buckets and a wake-up per commit as writers send them.
// DynamoDB units are what the server reports consumed; Lambda requests are
// the invocations; Lambda duration is the invocations' simulated time at the
// configured memory; the schedule is one EventBridge Scheduler invocation a
// minute. Monthly figures scale the run to a 30-day month.
//
// The Fargate anchor's DynamoDB figures come from the same scenario with the
// relay in hold mode (1 s polls, 10 s renewals: what an always-on relay
// sends), and its compute from the task size; at 0 messages/s, where no
// relay joins in the scenario, the hold relay's requests are modelled (one
// heartbeat and a keep per bucket every renewal, one probe per bucket every
// poll). The Streams anchor is a model; Assumptions lists every assumption
// of both anchors, and the report prints them.
//
// Every study prices its counts with OnDemandPrices, the one price table.
package economy
