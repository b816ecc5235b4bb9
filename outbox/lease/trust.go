package lease

import "time"

// The trust window: how long a relay acts on what a peer wrote. Every
// judgement of a peer goes through the functions of this file, and
// docs/protocol.md ("Trusting what peers wrote") points here rather than
// restating them.
//
//   - A heartbeat makes its relay live strictly before liveUntil, one
//     LeaseDuration after it, unless the record is stamped stopped
//     (RelayState.Active): fair shares, the holders of buckets
//     (Coordination.HeldUntil) and the claim inference all count the same
//     relays.
//   - A live peer's heartbeat is taken as its round claiming a free bucket
//     only within ClaimWindow, and only if it is dated no later than now
//     plus the fleet's clock-skew limit (claimInferred).
//   - The skew limit is KeepMargin, where its value and its reason are
//     stated.

// ClaimWindow is how long after a live peer's heartbeat a free bucket its
// round would claim counts as being claimed: a round writes its heartbeat,
// reads, and sends its claims within it. A trust check that finds a hinted
// bucket free but being claimed leaves it to that peer instead of joining:
// in a burst the relays woken together would otherwise all join, plan
// different shares from different views and refuse each other's claims.
// The claim is only inferred, from a heartbeat stamped by the peer's
// clock, so the relay reads the bucket's lease again once ClaimWindow has
// passed and joins if it is still free (ConfirmClaims).
const ClaimWindow = time.Second

// liveUntil is the end of the trust window of a heartbeat stamped seen
// under lease duration lease: the moment the leases the same round wrote
// expire.
func liveUntil(seen time.Time, lease time.Duration) time.Time { return seen.Add(lease) }

// Active reports whether the relay counts as live at now with lease
// duration l — towards fair share, as a bucket's holder, as a claimer: not
// stopped and seen strictly within the last l (liveUntil).
func (r RelayState) Active(now time.Time, l time.Duration) bool {
	return !r.Stopped && now.Before(liveUntil(r.LastSeen, l))
}

// claimInferred reports whether a live peer whose heartbeat is stamped
// last is taken, at now, to be claiming a bucket that became free at
// freedAt (its stored expiry): the heartbeat is younger than ClaimWindow,
// not older than freedAt, so the peer's round read the bucket free, and
// not dated later than now plus skew (KeepMargin), beyond which it comes
// from a clock that is wrong.
func claimInferred(last, freedAt, now time.Time, skew time.Duration) bool {
	return now.Sub(last) < ClaimWindow && !last.After(now.Add(skew)) && !last.Before(freedAt)
}
