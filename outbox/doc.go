// Package outbox is the core of Spillway, a transactional outbox that moves
// messages from an Amazon DynamoDB table to Apache Kafka.
//
// The package holds everything that must be identical across writers and
// relays in any language — the message model, the bucket hash, the header
// codec; the lease protocol is package lease — and the relay engine that
// drives the Store and Publisher interfaces. It imports only the standard
// library and package lease; the DynamoDB store, the Kafka publisher,
// telemetry and test backends live in subpackages that import this one,
// never the reverse.
//
// Time is always an input: every lease decision takes a now, read from the
// Clock each service holds; waits are the time package's. Tests run the
// services in a testing/synctest bubble, on its clock, and skew a relay's
// Clock to model a host whose wall clock is wrong.
//
// # The lease round
//
// Relays share the buckets through leases in one coordination partition,
// without talking to each other. The protocol (the acquisition round, its
// planner and fair shares, the claim window, ticks) is package lease; the
// relay runs a round every LeaseRenewInterval, or sooner when a lease it
// left unrenewed is down to lease.KeepMargin, and its Store sends the
// round through lease.AcquireRound. The relay keeps the round state
// (lease.RoundState) from one round to the next.
//
// # A relay run
//
// Relay.Run is one lifetime of a relay, given a RunInput; EventStop and
// RunResult.Reason say how it ended:
//
//  1. Join check. A direct run, and a wake-up asking to join, join at
//     once. A schedule sweep probes every bucket (PendingBuckets, plus
//     parked messages asked to be replayed); a wake-up looks at its hinted
//     buckets. The trust check (ReadUncovered, or ReadUnheld for a
//     continuation wake-up) leaves to live peers the buckets they hold or
//     are claiming; a bucket left only to an inferred claim is read again
//     after lease.ClaimWindow (ConfirmClaims). A wake-up then reads each
//     orphaned bucket's head strongly consistent, since it may announce
//     work already drained. Nothing left: StopNothingPending or
//     StopPeerLive, and the run wrote nothing.
//  2. Generation gate: a relay with a GenerationGate claims nothing while
//     its generation may not be served (CheckServable): StopFatal.
//  3. Publisher init (Publisher.Init), within the budget: a relay that
//     cannot reach Kafka claims nothing and leaves its share to peers
//     that can (StopFatal).
//  4. Second look: the trust check again, as a cold init lasts long
//     enough for a relay woken a moment earlier to claim the buckets.
//  5. Cycles: an acquisition round when due (The lease round), a probe of
//     the owned buckets every PollInterval, and drains of the ready ones:
//     fetch a batch, decode its header blobs once
//     (Message.DecodedHeaders), renew the leases if due, publish while
//     renewing, delete the acknowledged prefix. A failed cycle is backed
//     off and retried; a misconfiguration ends the run (StopFatal). The
//     run ends at its budget — the deadline minus StopMargin, at most a
//     third of the time left — (StopBudget), when ctx ends
//     (StopCancelled), or in drain mode after lingering idle
//     (IdleTimeout, MaxIdleTimeout under steady traffic) with no pending
//     bucket outside its set lacking a live owner (StopDrained).
//  6. Stop protocol, for a run that joined: stamp the heartbeat stopped
//     and release every lease, so peers claim at once — or, when that no
//     longer fits before the deadline, leave the leases to lapse
//     (EventReleaseSkipped). Then read the heads of the owned and
//     released buckets, strongly consistent.
//  7. Watch: when they hold nothing, read the released buckets again
//     lease.OwnerViewTTL after the release, for commits whose writer skipped
//     the wake-up on a view that showed this relay holding the bucket.
//  8. Wake-up: work found by 6 or 7 sends a continuation wake-up (Hop + 1,
//     up to MaxHops), so no commit waits for the schedule.
//
// # Trusting what peers wrote
//
// A relay acts on a peer's heartbeat only within the trust window: the
// peer is live for one LeaseDuration after its heartbeat unless stamped
// stopped, a heartbeat within lease.ClaimWindow stands for a claim in flight,
// and no heartbeat or lease is believed beyond the fleet's clock-skew
// limit, lease.KeepMargin (LeaseDuration − 2 × LeaseRenewInterval with the
// default keep-ahead rounds). The rule is stated once, in code, by
// lease.RelayState.Active, lease.ClaimWindow and lease.KeepMargin, which the fair shares,
// lease.Coordination.HeldUntil, the trust check and the writers' owner view all
// use.
//
// # Changing the bucket count
//
// A generation of an outbox is one key prefix with one bucket count. The
// bucket count of a table cannot change in place: a key's bucket depends on
// it, so messages of one key written before and after a change would sit in
// two buckets that relays drain independently, and could overtake each
// other. Changing it means starting a new generation under a new key prefix
// on the same table and retiring the old one:
//
//	open ──seal──▶ sealed ──(every bucket empty) finish──▶ drained
//
// The old (previous) generation carries a marker item with its phase and
// its successor; the new one a predecessor marker naming the old one. While
// it is open, writers configured with both generations keep writing the old
// one, each write checking that it is still open (WriteTarget); relays
// serve only the previous one. The seal is the switch point: from then on
// nothing may be written to the old generation (Go writers that check the
// marker are refused with ErrGenerationSealed) and writers with both
// generations write the new one. So every commit to the old generation
// precedes every commit to the new one. The relay that finds it sealed and
// every bucket empty — messages and parked messages — marks it drained, and
// only then do relays serve the new generation; a relay configured with the
// new generation alone refuses it until then (CheckServable,
// ErrGenerationNotOpen). So each key's messages are published in commit
// order across the change, for writers that serialize their commits per
// key.
//
// PlanGenerations is the rule, GenerationRelay runs it over two relays, and
// a GenerationStore keeps the marker.
package outbox
