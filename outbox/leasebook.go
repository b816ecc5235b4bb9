package outbox

import (
	"slices"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// leaseBook is everything a relay believes about its leases, as a value:
// every question about them ("is a round due?", "may this write start?")
// is a pure function of the book and now, and every change is a pure
// transition returning a new book. One leaseKeeper owns the relay's book;
// nothing else keeps lease state.
//
// The relay trusts the owned buckets until at + lease: at is captured
// before the call that confirmed them (a round or a renewal), so its view
// never outlives the table's.
type leaseBook struct {
	timing leaseTiming
	owner  string
	owned  []int
	// at is the lease reference; zero when nothing is trusted.
	at time.Time
	// acquiredAt is the start of the last round; the next one is due an
	// interval later (renewals do not move it).
	acquiredAt time.Time
	attempted  bool
	// force makes the next cycle run a round whatever its schedule.
	force bool
	// standby is the distant-standby state the last round returned; it
	// outlives a run, as the rest check measures between calls, and is
	// forgotten when the relay releases its leases.
	standby lease.Standby
	// settled is the settled-fleet state the last round returned; it
	// remembers the expiries the relay wrote, so it is forgotten whenever
	// something else writes them (a renewal) or ownership is in doubt.
	settled lease.Settled
	// renewErrAt is the start of the last failed renewal: renewals during
	// a write back off from it.
	renewErrAt time.Time
}

// leasePhase names where a book stands at some instant.
type leasePhase int

const (
	// phaseUnattempted: no round since the relay started or released.
	phaseUnattempted leasePhase = iota
	// phaseLost: the book trusts nothing; the next cycle runs a round.
	phaseLost
	// phaseHeld: the owned set is trusted and a write may start.
	phaseHeld
	// phaseRenewalDue: the owned set is trusted, but a renewal must come
	// first: only the margin is left, or the round is overdue.
	phaseRenewalDue
	// phaseExpired: the reference is a lease duration old.
	phaseExpired
)

// phase is where b stands at now.
func (b leaseBook) phase(now time.Time) leasePhase {
	switch {
	case !b.attempted:
		return phaseUnattempted
	case b.at.IsZero():
		return phaseLost
	case now.Sub(b.at) >= b.timing.lease:
		return phaseExpired
	case !now.Before(b.timing.renewDue(b.at, b.acquiredAt)):
		return phaseRenewalDue
	default:
		return phaseHeld
	}
}

// trusts reports whether b trusts an owned set at now.
func (b leaseBook) trusts(now time.Time) bool {
	ph := b.phase(now)
	return ph == phaseHeld || ph == phaseRenewalDue
}

// forced is the transition that makes the next cycle run a round.
func (b leaseBook) forced() leaseBook {
	b.force = true
	return b
}

// roundDue reports whether a round must run at now.
func (b leaseBook) roundDue(now time.Time) bool { return b.untilRound(now) <= 0 }

// untilRound is the time until the next round is due (leaseTiming.roundDue).
func (b leaseBook) untilRound(now time.Time) time.Duration {
	if !b.attempted || b.force {
		return 0
	}
	return b.timing.roundDue(b.at, b.acquiredAt).Sub(now)
}

// roundStarted is the transition at the start of a round at start: the
// round is no longer due, and its schedule counts from start. expired
// reports owned leases that ran out since the last confirmation.
func (b leaseBook) roundStarted(start time.Time) (next leaseBook, expired bool) {
	expired = len(b.owned) > 0 && !b.at.IsZero() && start.Sub(b.at) >= b.timing.lease
	b.attempted, b.force, b.acquiredAt = true, false, start
	return b, expired
}

// installed is the transition after a round that started at start
// returned acq: the owned set is trusted from start, or from earlier when
// the round left leases unrenewed, as they last only until their stored
// expiry, which an earlier round wrote a lease duration before it.
func (b leaseBook) installed(start time.Time, acq lease.Acquisition) leaseBook {
	b.standby, b.settled = acq.Standby, acq.Settled
	b.owned = slices.Clone(acq.Owned)
	b.at = start
	if !acq.UnrenewedExpiry.IsZero() {
		b.at = minTime(start, acq.UnrenewedExpiry.Add(-b.timing.lease))
	}
	return b
}

// roundFailed is the transition after a round that failed: ownership is
// unknown, so the book trusts nothing and the next cycle runs a round.
func (b leaseBook) roundFailed(acq lease.Acquisition) leaseBook {
	b.standby, b.settled = acq.Standby, acq.Settled
	return b.lost()
}

// renewed is the transition after a renewal that started at start and
// was accepted at now. A response that arrives after the trusted lease ran
// out proves nothing about the time in between: the book is lost then,
// and ok is false.
func (b leaseBook) renewed(start, now time.Time) (next leaseBook, ok bool) {
	b.settled = lease.Settled{} // the renewal wrote other expiries
	if b.at.IsZero() || now.Sub(b.at) >= b.timing.lease {
		return b.lost(), false
	}
	b.at = start
	return b, true
}

// renewFailed is the transition after a renewal that started at start
// and failed without an answer: the last confirmation stands, and
// renewals during a write back off from start.
func (b leaseBook) renewFailed(start time.Time) leaseBook {
	b.settled = lease.Settled{}
	b.renewErrAt = start
	return b
}

// lost is the transition when the relay stops trusting its leases (a
// refused renewal, an expiry, a write the table refused for the lease):
// the table is the authority, and the next cycle runs a round.
func (b leaseBook) lost() leaseBook {
	b.owned, b.at, b.force, b.settled = nil, time.Time{}, true, lease.Settled{}
	return b
}

// without is the transition when the table refused a write of bucket for
// its lease: the bucket leaves the owned set (the others stay trusted) and
// the next cycle runs a round to learn who holds it.
func (b leaseBook) without(bucket int) leaseBook {
	b.owned = slices.DeleteFunc(slices.Clone(b.owned), func(x int) bool { return x == bucket })
	b.force, b.settled = true, lease.Settled{}
	return b
}

// released is the transition at the end of a joined run: everything is
// forgotten, and the next run starts with a round. The standby state goes
// too: a released relay rejoins as a newcomer.
func (b leaseBook) released() leaseBook {
	return leaseBook{timing: b.timing, owner: b.owner}
}

// leaseGrant is a permit for one write of one bucket, asked for at the
// moment the write starts: the relay holds the bucket until validUntil,
// at least margin after at.
type leaseGrant struct {
	bucket     int
	owner      string
	at         time.Time
	validUntil time.Time
	margin     time.Duration
}

// check is the grant as a conditional write carries it into the table:
// the lease item must still name the owner and expire after the margin.
func (g leaseGrant) check() LeaseCheck {
	return LeaseCheck{Owner: g.owner, Beyond: g.at.Add(g.margin)}
}

// grant answers whether a write of bucket may start at now. It returns the
// grant in phaseHeld; in phaseRenewalDue the relay renews first and asks
// again; in every other phase, or for a bucket the book does not hold, the
// write is refused before it is sent.
func (b leaseBook) grant(bucket int, now time.Time) (leaseGrant, leasePhase) {
	ph := b.phase(now)
	if ph != phaseHeld && ph != phaseRenewalDue {
		return leaseGrant{}, ph
	}
	if !slices.Contains(b.owned, bucket) {
		return leaseGrant{}, phaseLost
	}
	return leaseGrant{bucket: bucket, owner: b.owner, at: now, validUntil: b.at.Add(b.timing.lease), margin: b.timing.margin}, ph
}

// renewalWait is how long a write may run before the book needs a
// renewal, or renewNow. After a failed renewal it waits backoff (at most
// half the remaining lease) before trying again.
func (b leaseBook) renewalWait(now time.Time, backoff time.Duration) (wait time.Duration, renewNow bool) {
	if b.at.IsZero() {
		return 0, false
	}
	remaining := b.timing.lease - now.Sub(b.at)
	if remaining <= 0 {
		return 0, false
	}
	due := b.timing.renewDue(b.at, b.acquiredAt).Sub(now)
	if due > 0 {
		return max(min(due, remaining/2), time.Millisecond), false
	}
	if pause := min(backoff, remaining/2); b.renewErrAt.After(b.at) && now.Sub(b.renewErrAt) < pause {
		return max(pause-now.Sub(b.renewErrAt), time.Millisecond), false
	}
	return 0, true
}
