// Package lease is Spillway's lease protocol: the acquisition round, its
// planner and fair shares, the trust and claim-window rules, and the tick
// timestamps the table stores. It imports only the standard library and
// nothing of Spillway, so the seam points one way: the relay engine
// (package outbox) and every store (outboxddb, outboxmem) call into it,
// and a store never calls back into the engine.
//
// Time is always an input: every decision takes a now.
//
// # The lease round
//
// Relays share the buckets through leases in one coordination partition,
// without talking to each other. Every LeaseRenewInterval a relay runs an
// acquisition round; the protocol lives here, in AcquireRound, and a store
// only sends the requests it is given (IO: heartbeat, conditional lease
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
// "Trusting what peers wrote" in package outbox).
//
// RoundState carries the run's round count, the standby state and the
// settled-fleet state from one round to the next; the relay keeps it.
// A bucket's lease, as one relay sees it:
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
package lease
