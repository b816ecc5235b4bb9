package lease

import "time"

// timing is when a relay acts on its leases: its rounds and its renewals
// before and during a publish or a delete. Both are pure functions of the
// lease reference at (see Book) and acquiredAt, the start of the last
// round.
type timing struct {
	lease, interval time.Duration
	// margin is the least lease kept ahead (KeepMargin).
	margin time.Duration
}

// roundDue is when the next acquisition round is due: an interval after
// the last one started, and no later than the moment the lease reference
// has only the margin left. A round that ran late (the relay was
// fetching, probing or sampling) and left leases unrenewed therefore
// brings the next round forward instead of pushing it past their margin.
// A zero reference (nothing trusted) leaves the interval alone.
func (t timing) roundDue(at, acquiredAt time.Time) time.Time {
	next := acquiredAt.Add(t.interval)
	if at.IsZero() {
		return next
	}
	return minTime(next, at.Add(t.lease-t.margin))
}

// renewDue is from when the relay renews its owned leases in flight
// before it publishes or deletes, and while it does: once the lease
// reference has only the margin left, whatever the time since the last
// round, or once the reference and the last round are both an interval
// old (the round is overdue, a publish or delete holds it up). So no
// publish starts, and none goes on, with less than the margin left.
func (t timing) renewDue(at, acquiredAt time.Time) time.Time {
	overdue := at.Add(t.interval)
	if acquiredAt.After(at) {
		overdue = acquiredAt.Add(t.interval)
	}
	return minTime(overdue, at.Add(t.lease-t.margin))
}
