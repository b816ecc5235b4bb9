// Package simtime is the one model of simulated time of the whole-system
// simulations (internal/fleetsim, internal/scale's
// stepper, internal/bench's idle and cost runs, the end-to-end tests'
// manual-clock driver, the outboxddb and outboxlambda tests that run
// relays on the embedded backends): a manual clock, an Agenda of events at
// simulated instants, and Activity, the one rule that says when every
// participant of a simulation is parked so that the clock may move. A
// driver alternates between Activity.Settle (wait until every participant
// is parked), running what is due at the instant, and moving the clock to
// the next event or participant's timer, whichever comes first
// (Agenda.Advance).
//
// # The rule
//
// A simulation is quiet when, at one instant, no call to a backend is in
// flight (Activity.Begin and End bracket each one: a goroutine waiting for
// a DynamoDB or Kafka answer looks parked, yet the simulation is not idle)
// and every participant goroutine is waiting (a relay computing between two
// calls is neither in flight nor parked), with no progress (a clock reading,
// a timer, a call starting or ending: Activity.Poke and the Clock) from
// before the look to after it, so that no state went unseen in between. The
// goroutine states come from one goroutine dump, for which the runtime stops
// the world. Participants are the goroutines started inside Activity.Do or
// Go or after Activity.Join, which carry the simulation's profiler label (the
// label is inherited by every goroutine they start), so simulations running
// side by side in one process each look at their own goroutines only: all
// of them, whatever code they run (one that has not run yet shows only its
// entry function), except an embedded HTTP server's connections, which
// apply a request before they answer it. Each look stops the whole
// process, though, so simulations side by side slow each other down; the
// fleet test runs its seeds one after the other. While a simulation is
// alone in its process, the scheduler's running and runnable counts
// (runtime/metrics) spare looks that would find it busy.
// A client's calls count as in flight through Begin and End, Track,
// Publisher for a Kafka publisher, or DynamoDBOption for a DynamoDB client;
// a client that waits on the simulated clock inside a call takes that clock
// from CallClock, so the call is not in flight while it waits.
//
// The labels appear in goroutine dumps only with GODEBUG tracebacklabels=1,
// which NewActivity adds to the process's GODEBUG (it changes nothing but
// the headers of goroutine dumps and tracebacks).
//
// # Why not testing/synctest
//
// A bubble exists only inside synctest.Test, which takes a *testing.T, and
// the steady scenario also runs from the operator CLI (spillway bench
// --scenario steady), which must not link the testing package; the steady
// scenario needs this rule. Moving the test-only simulations (the fleet,
// the end-to-end tests) into bubbles would add a second mechanism rather
// than replace one: both embedded servers could be served inside a bubble
// (kfake accepts a listener function and ships an in-memory VirtualNetwork;
// the DynamoDB layer is an http.Handler that net.Pipe connections could
// reach), but the Kafka client keeps wall-clock loops (metadata refreshes,
// connection reaping) that would then run on the bubble's clock too, and
// the steady scenario would still need this rule. Unit tests whose fakes do
// no real I/O (the relay's and the Lambda emulator's) use synctest.
package simtime
