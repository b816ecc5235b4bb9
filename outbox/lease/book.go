package lease

import (
	"slices"
	"time"
)

// Book is everything a relay believes about its leases, as a value: every
// question about them ("is a round due?", "may this write start?") is a
// pure function of the book and now, and every change is a transition
// returning a new book. A relay keeps one book (the core's lease keeper
// owns it); nothing else keeps lease state.
//
// The relay trusts its owned buckets until the reference plus the lease
// duration: the reference is the start of the call that confirmed them (a
// round or a renewal), dated back to the earliest stored expiry less a
// lease duration of a lease a round left unrenewed, so the relay's view
// never outlives the table's.
type Book struct {
	timing timing
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
	standby Standby
	// settled is the settled-fleet state the last round returned; it
	// remembers the expiries the relay wrote, so it is forgotten whenever
	// something else writes them (a renewal) or ownership is in doubt.
	settled Settled
	// renewErrAt is the start of the last failed renewal: renewals during
	// a write back off from it.
	renewErrAt time.Time
}

// NewBook returns the empty book of the relay req describes: nothing
// owned, no round yet. Its margin, the least lease a write starts with, is
// KeepMargin for a relay that keeps ahead and LeaseDuration −
// RenewInterval for one that keeps every round (Request.KeepEveryRound).
func NewBook(req Request) Book {
	t := timing{lease: req.LeaseDuration, interval: req.RenewInterval, margin: KeepMargin(req.LeaseDuration, req.RenewInterval)}
	if req.KeepEveryRound {
		t.margin = req.LeaseDuration - req.RenewInterval
	}
	return Book{timing: t, owner: req.RelayID}
}

// Owned returns the buckets the book holds, ascending. The slice is never
// changed in place: a transition makes a new one.
func (b Book) Owned() []int { return b.owned }

// Attempted reports whether a round ran since the relay started or
// released its leases.
func (b Book) Attempted() bool { return b.attempted }

// AcquiredAt is the start of the last round.
func (b Book) AcquiredAt() time.Time { return b.acquiredAt }

// RoundState is what the next round of a run that completed round full
// rounds needs from this book.
func (b Book) RoundState(round int) RoundState {
	return RoundState{Round: round, Standby: b.standby, Settled: b.settled}
}

// Phase names where a book stands at some instant.
type Phase int

// Phases of a book.
const (
	// PhaseUnattempted: no round since the relay started or released.
	PhaseUnattempted Phase = iota
	// PhaseLost: the book trusts nothing; the next cycle runs a round.
	PhaseLost
	// PhaseHeld: the owned set is trusted and a write may start.
	PhaseHeld
	// PhaseRenewalDue: the owned set is trusted, but a renewal must come
	// first: only the margin is left, or the round is overdue.
	PhaseRenewalDue
	// PhaseExpired: the reference is a lease duration old.
	PhaseExpired
)

// Phase is where b stands at now.
func (b Book) Phase(now time.Time) Phase {
	switch {
	case !b.attempted:
		return PhaseUnattempted
	case b.at.IsZero():
		return PhaseLost
	case now.Sub(b.at) >= b.timing.lease:
		return PhaseExpired
	case !now.Before(b.timing.renewDue(b.at, b.acquiredAt)):
		return PhaseRenewalDue
	default:
		return PhaseHeld
	}
}

// Trusts reports whether b trusts an owned set at now.
func (b Book) Trusts(now time.Time) bool {
	ph := b.Phase(now)
	return ph == PhaseHeld || ph == PhaseRenewalDue
}

// Forced is the transition that makes the next cycle run a round.
func (b Book) Forced() Book {
	b.force = true
	return b
}

// RoundDue reports whether a round must run at now.
func (b Book) RoundDue(now time.Time) bool { return b.UntilRound(now) <= 0 }

// UntilRound is the time until the next round is due: an interval after
// the last one started, and no later than the moment the reference has
// only the margin left; at once before the first round and after a
// transition that forces one.
func (b Book) UntilRound(now time.Time) time.Duration {
	if !b.attempted || b.force {
		return 0
	}
	return b.timing.roundDue(b.at, b.acquiredAt).Sub(now)
}

// RoundStarted is the transition at the start of a round at start: the
// round is no longer due, and its schedule counts from start. expired
// reports owned leases that ran out since the last confirmation.
func (b Book) RoundStarted(start time.Time) (next Book, expired bool) {
	expired = len(b.owned) > 0 && !b.at.IsZero() && start.Sub(b.at) >= b.timing.lease
	b.attempted, b.force, b.acquiredAt = true, false, start
	return b, expired
}

// Installed is the transition after a round that started at start
// returned acq: the owned set is trusted from start, or from earlier when
// the round left leases unrenewed, as they last only until their stored
// expiry, which an earlier round wrote a lease duration before it.
func (b Book) Installed(start time.Time, acq Acquisition) Book {
	b.standby, b.settled = acq.Standby, acq.Settled
	b.owned = slices.Clone(acq.Owned)
	b.at = start
	if !acq.UnrenewedExpiry.IsZero() {
		b.at = minTime(start, acq.UnrenewedExpiry.Add(-b.timing.lease))
	}
	return b
}

// Refused is the transition after a round the relay's configuration
// refused (a misconfiguration): the owned set stays as it was, and the
// standby and settled states are acq's.
func (b Book) Refused(acq Acquisition) Book {
	b.standby, b.settled = acq.Standby, acq.Settled
	return b
}

// RoundFailed is the transition after a round that failed: ownership is
// unknown, so the book trusts nothing and the next cycle runs a round.
func (b Book) RoundFailed(acq Acquisition) Book {
	return b.Refused(acq).Lost()
}

// Renewed is the transition after a renewal that started at start and
// was accepted at now. A response that arrives after the trusted lease ran
// out proves nothing about the time in between: the book is lost then,
// and ok is false.
func (b Book) Renewed(start, now time.Time) (next Book, ok bool) {
	b.settled = Settled{} // the renewal wrote other expiries
	if b.at.IsZero() || now.Sub(b.at) >= b.timing.lease {
		return b.Lost(), false
	}
	b.at = start
	return b, true
}

// RenewFailed is the transition after a renewal that started at start
// and failed without an answer: the last confirmation stands, and
// renewals during a write back off from start.
func (b Book) RenewFailed(start time.Time) Book {
	b.settled = Settled{}
	b.renewErrAt = start
	return b
}

// Lost is the transition when the relay stops trusting its leases (a
// refused renewal, an expiry, a write the table refused for the lease):
// the table is the authority, and the next cycle runs a round.
func (b Book) Lost() Book {
	b.owned, b.at, b.force, b.settled = nil, time.Time{}, true, Settled{}
	return b
}

// Without is the transition when the table refused a write of bucket for
// its lease: the bucket leaves the owned set (the others stay trusted) and
// the next cycle runs a round to learn who holds it.
func (b Book) Without(bucket int) Book {
	b.owned = slices.DeleteFunc(slices.Clone(b.owned), func(x int) bool { return x == bucket })
	b.force, b.settled = true, Settled{}
	return b
}

// Stopping is the transition as the relay starts to release its leases:
// it is no standby any more, whatever the release's outcome.
func (b Book) Stopping() Book {
	b.standby = Standby{}
	return b
}

// Released is the transition at the end of a joined run: everything is
// forgotten, and the next run starts with a round. The standby state goes
// too: a released relay rejoins as a newcomer.
func (b Book) Released() Book {
	return Book{timing: b.timing, owner: b.owner}
}

// Grant is a permit for one write of one bucket, asked for at the moment
// the write starts: the relay holds Bucket until ValidUntil, and the write
// carries the lease into the table as a condition that its lease item
// still names Owner and expires after Beyond (the write's start plus the
// margin).
type Grant struct {
	Bucket     int
	Owner      string
	ValidUntil time.Time
	Beyond     time.Time
}

// Grant answers whether a write of bucket may start at now. It returns the
// grant in PhaseHeld; in PhaseRenewalDue the relay renews first and asks
// again; in every other phase, or for a bucket the book does not hold
// (PhaseLost then), the write is refused before it is sent.
func (b Book) Grant(bucket int, now time.Time) (Grant, Phase) {
	ph := b.Phase(now)
	if ph != PhaseHeld && ph != PhaseRenewalDue {
		return Grant{}, ph
	}
	if !slices.Contains(b.owned, bucket) {
		return Grant{}, PhaseLost
	}
	return Grant{Bucket: bucket, Owner: b.owner, ValidUntil: b.at.Add(b.timing.lease), Beyond: now.Add(b.timing.margin)}, ph
}

// RenewalWait is how long a write may run before the book needs a
// renewal, or renewNow. After a failed renewal it waits backoff (at most
// half the remaining lease) before trying again.
func (b Book) RenewalWait(now time.Time, backoff time.Duration) (wait time.Duration, renewNow bool) {
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
