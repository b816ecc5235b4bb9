// Package outbox is the core of Spillway, a transactional outbox that moves
// messages from an Amazon DynamoDB table to Apache Kafka.
//
// The package holds everything that must be identical across writers and
// relays in any language — the message model, the bucket hash, the header
// codec, tick timestamps, the fair-share lease planner — and the relay engine
// that drives the Store and Publisher interfaces. It imports only the standard
// library; the DynamoDB store, the Kafka publisher, telemetry and test
// backends live in subpackages that import this one, never the reverse.
//
// Time is always an input: every lease decision takes a now, read from the
// Clock each service holds; waits are the time package's. Tests run the
// services in a testing/synctest bubble, on its clock, and skew a relay's
// Clock to model a host whose wall clock is wrong.
//
// # The lease round
//
// Relays share the buckets through leases in one coordination partition,
// without talking to each other. Every LeaseRenewInterval a relay runs an
// acquisition round; the protocol lives here, in AcquireRound, and a Store
// only sends the requests it is given (LeaseIO: heartbeat, conditional lease
// writes, prune) and reads the snapshot. One round, with one clock reading
// now:
//
//  1. StartRound: a distant standby (behind one first-in-line standby per
//     bucket) rests — sends nothing — while the time since the full round
//     that made it one plus the time since its last call stays below three
//     quarters of a lease: every other round with the defaults.
//  2. Heartbeat, conditional on moving forward. A refusal means a later
//     heartbeat of this relay is stored: its clock went back.
//  3. One strongly consistent read of every lease and heartbeat — or, when
//     the previous round left the fleet settled (Settled: every bucket held
//     by an active relay at its share) less than a lease ago, of the
//     heartbeat records only; if they show the same active relays, the
//     round just keeps the relay's leases with the expiries it wrote and
//     prunes when due.
//  4. PlanRound: who is active (not stopped, seen within a lease), the fair
//     shares and the shared claim simulation (PlanLeases), so relays that
//     read the same state write disjoint leases. Keeps carry the stored
//     expiry as a version; a keep that would move the expiry backwards is
//     not sent (the keep guard), nor one whose lease still lasts KeepAhead
//     when the request carries the round interval (with the defaults each
//     lease is kept every other round, half of them in each round), unless
//     a heartbeat record without the keep-ahead mark (a relay of another
//     language) is around; no claim after a refused heartbeat;
//     heartbeat records with an empty id are skipped and counted.
//  5. Keeps, releases, claims, in that order. The conditional writes, not
//     the plan, grant ownership.
//  6. On a run's first full round and every PruneEvery-th, prune heartbeat
//     records stopped for a lease or silent for DeadAfterLeases leases.
//
// The relay runs its next round a LeaseRenewInterval after the last one,
// or sooner, once a lease a round left unrenewed is down to KeepMargin,
// and renews before and during a publish once its leases are down to it:
// the margin every lease keeps, and the fleet's clock-skew limit (see
// "Trusting what peers wrote").
//
// RoundState carries the run's round count, the standby state and the
// settled-fleet state from one round to the next; the relay keeps it. A bucket's lease, as one relay
// sees it:
//
//	        claim                          keep, renew
//	free ───────────▶ owned by me ◀─────────────────┐
//	 ▲                 │    │  └────────────────────┘
//	 │    release      │    │ no keep or renewal for a lease
//	 └─────────────────┘    ▼
//	                expired, still mine ──keep──▶ owned by me
//	 ▲                      │
//	 │                      │ a peer claims it
//	 │                      ▼
//	 └──── lapses or released ──── held by a peer
//
// And a relay's place in the fleet:
//
//	          heartbeat           share 0          rank >= bucket count
//	joining ───────────▶ sharing ◀───────▶ standby ◀──────────────────▶ distant standby
//	                        │      share > 0                             (rests every
//	                        │                                             other round)
//	                        ├─ stop: stamped stopped, leases released; peers claim at once
//	                        └─ crash: leases lapse after a lease; record pruned after ten
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
//     after ClaimWindow (ConfirmClaims). A wake-up then reads each
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
//     OwnerViewTTL after the release, for commits whose writer skipped
//     the wake-up on a view that showed this relay holding the bucket.
//  8. Wake-up: work found by 6 or 7 sends a continuation wake-up (Hop + 1,
//     up to MaxHops), so no commit waits for the schedule.
//
// # Trusting what peers wrote
//
// A relay acts on a peer's heartbeat only within the trust window: the
// peer is live for one LeaseDuration after its heartbeat unless stamped
// stopped, a heartbeat within ClaimWindow stands for a claim in flight,
// and no heartbeat or lease is believed beyond the fleet's clock-skew
// limit, KeepMargin (LeaseDuration − 2 × LeaseRenewInterval with the
// default keep-ahead rounds). The rule is stated once, in code, by
// RelayState.Active, ClaimWindow and KeepMargin, which the fair shares,
// Coordination.HeldUntil, the trust check and the writers' owner view all
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
