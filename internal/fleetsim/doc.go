// Package fleetsim is the randomized fleet simulation: relay lifetimes
// shaped like AWS Lambda invocations (the real outboxlambda.RelayHandler on
// internal/lambdasim, built by lab.RelayFunction) and several writers share
// one outbox table on the embedded DynamoDB and one embedded Kafka cluster,
// both in memory, in a testing/synctest bubble whose clock is the simulated
// time, while the seed injects faults; the invariants below are checked
// throughout, and a trace recorder explains a failure. What a run does, its
// fault menu (the order menu: Config.OrderFaults) and how to run it are in
// docs/development.md, "Fleet simulation".
//
// # Invariants
//
//   - No loss: every message whose enqueue returned success is delivered at
//     least once; a message of a cancelled business transaction never is.
//   - Order: for each key, the first deliveries of its messages follow their
//     enqueue order (the key's writer serializes its enqueues), whatever
//     the faults: duplicates are allowed, reordering is not.
//   - Lease exclusivity. A relay's belief that it holds a bucket is modelled
//     from its store calls: a successful acquisition or renewal that started
//     when the relay's clock read a makes it hold the bucket until its own
//     clock reads a + LeaseDuration, unless a later call released or lost
//     the bucket (that ends the belief when the call started: the engine
//     never publishes while it acquires or releases). The table only lets a
//     relay X take the bucket over from R once the stored expiry E ≥ a + L
//     has passed on X's clock, and every later holder got it from X or after
//     it. So R's belief outlasts the moment the first taker X began holding
//     by at most skew(X) − skew(R) in true time. A claim of R's (its
//     conditional write on a free or expired lease item) starts a new
//     belief even while R still trusted an older lease on the bucket: no
//     one held the bucket at that write, so a taker that gave it up
//     meanwhile bounds only the older belief. The checker asserts exactly
//     that bound for every belief at every step of the simulation, and again
//     over the whole intervals at the end (with 1 ms for tick rounding).
//     With equal clocks it is strict exclusivity; with skew within the
//     tolerance it bounds the overlap by the skew. Beyond it the same bound
//     still holds (it does not depend on the relays agreeing on the
//     membership), so it is asserted there too.
//   - Refused conditional writes (counted by outboxlocal.Counter at every
//     step) are zero at every instant outside the influence of a fault or a
//     membership change (a relay joining or leaving). A cause influences
//     for Config.settle after it ended, longer by its relay's clock skew
//     ahead (cause.linger); a clock set back beyond the tolerance
//     influences until the relay's environment retires. Refusals are
//     attributed to the most recent cause otherwise and bounded per cause
//     (Report.RefusalBound).
//   - Mixed fleets: a relay that keeps every round, its clock ahead of a
//     holder's by at most Config.mixedSkewLimit, never takes over a lease
//     within a round of the holder's last round.
//   - No publish starts with less than L − 2I of its lease left on the
//     relay's clock (Report.ThinPublishes).
//   - The outbox holds no message, and no parked one, when the writers
//     have stopped and the relays have drained.
//
// Duplicates (records whose message id was delivered before) are counted and
// reported, not limited: at-least-once allows them.
//
// # Determinism
//
// Every draw derives from the seed, each from a named stream (newRand): the
// workload, the fault schedule, each invocation's budget, crash and pause,
// relay ids, the writers' idempotency tokens, the SDK's retry backoff
// (seededBackoff), each process's DynamoDB round trip (roundTrip) and the
// partitions' leaders (placeLeaders). The driver is the lab's (lab.Sim.Drive,
// with step as its per-instant hook): it runs the seed's events and the
// Lambda emulator's steps in time order, those of one instant in the order
// they were queued, and checks the invariants each time something
// happened, once every process is parked again (synctest.Wait). The
// in-memory backends answer in no simulated time, so whatever several
// goroutines send at one instant would reach them in the scheduler's order;
// the run spreads such sends over distinct instants (roundTrip,
// requestStagger, stagger, outboxddb's hashed wait before retrying
// unprocessed deletes), aims Kafka faults at one partition's batches
// (refuse), and runs on one P (Run) for the Kafka client's own goroutines.
// Two runs of a seed give the same report, the count of instants checked
// (Steps) included, and the same trace but for the embedded server's
// request ids: TestSeedReplaysExactly compares two runs of CI seed 22. The
// race detector picks among ready goroutines at random, so a run under
// -race replays the workload and the faults but not always every
// interleaving (seed 22 has given three duplicates and 13 DynamoDB attempts
// more under -race than without); exact replay is without -race.
package fleetsim
