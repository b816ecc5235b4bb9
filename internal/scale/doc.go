// Package scale measures the coordination plane of large fleets: every
// relay's acquisition round reads the {prefix}#COORDINATION partition (one
// lease item per bucket, one heartbeat per relay; only the heartbeats while
// the fleet is settled) and writes its heartbeat and keeps to it (the
// seed's relays keep every owned lease every round, Spillway's each lease
// every other round), and that single partition key serves at most 3,000
// read units and 1,000 write units per second.
//
// A run starts a fleet of relays in hold mode together on an empty table
// (each at a seeded instant within the first renew interval), lets it
// settle, and measures a number of settled renew intervals: read and write
// units per simulated second (mean and busiest second), Query pages and
// bytes per round, refused writes and the rounds the start took.
//
// The study (RunStudy) is one of the lab's simulated studies (internal/lab,
// `make lab SCENARIO=scale`): Run and RunBurst run only inside a
// testing/synctest bubble, whose clock is the simulation's, with the
// participants and timing of lab.Sim, so a seed fixes every figure.
//
// # What runs for real
//
// Every relay is a real outboxddb.Store (its own, as one relay process
// holds one) running AcquireLeases, with the real planner, at its instants
// of the bubble's clock. Rounds run one after another in simulated time
// order: a round's requests are charged to the second it started in.
//
// # The burst
//
// RunBurst measures a burst of commits that each wake the relay function:
// relay invocations (at most the reserved concurrency at once; Lambda
// retries the rest with a growing delay) run the real relay handler
// (outboxlambda.RelayHandler) in drain mode, each execution environment
// with its relay id and outboxddb.Store (lab.RelayFunction) — the trust
// check, its second look after the publisher's initialisation, rounds,
// polls, the idle stop, the graceful release and the continuation wake-up
// for released buckets that got commits meanwhile — and a one-minute
// schedule sweeps what is left. The relay function runs on the Lambda
// emulator (internal/lambdasim): its queue, cold starts, warm environments
// and throttling with Lambda's retry schedule. Every request to the
// coordination partition takes a round trip of the bubble's clock before
// it is applied, so concurrent rounds read and write in the order their
// requests would land. The commits are held in memory (the stores'
// message calls answer from there at once) and publishing is instant: the
// burst measures the coordination plane, not the message partitions or
// Kafka.
//
// # The model
//
// The embedded DynamoDB server, though served in memory, spends a large
// fleet's run on the SDK's serialization and signing and on minidyn's
// Query, which evaluates the key condition against every item of the
// table: the study's fleets on it take about twenty times as long as on
// the model (measured on two cores: 273 s against 13 s for the whole
// study), with the same table. So the large fleets run on an in-memory
// model of the table (model.go) that answers exactly the requests of the
// lease protocol — Query of a partition in 1 MB pages, conditional
// PutItem, UpdateItem and DeleteItem with the protocol's expressions, their
// conditions evaluated by minidyn's interpreter, the embedded server's own —
// and charges them with outboxlocal.Counter's capacity rules. Anything else is refused with an
// error rather than answered approximately. The tests run the same fleets,
// and a script of refused heartbeats, prunes and releases, on both the
// embedded server and the model and require identical counts; the study
// (RunStudy) checks the same at 64 buckets and 16 relays before it reports
// any figure.
package scale
