package outbox

import "time"

// maxStopReserve bounds the part of a stop kept for releasing the leases
// and handing the run back: one conditional write per held bucket at
// most, which takes milliseconds.
const maxStopReserve = time.Second

// stopPlan says when each part of a run's stop happens, on the relay's
// clock. The zero value is an unbounded stop: no deadline and no signal.
type stopPlan struct {
	// end is when the stop must be over: the run's deadline, or the
	// moment ctx ended plus the stop's window, whichever comes first.
	end time.Time
	// settleBy cuts what is still in flight (publishes, deletes, parks,
	// reads), so the release keeps its reserve before end.
	settleBy time.Time
	// returnBy bounds the release and every step after it (the look at
	// the released buckets, the wake-up), leaving half the reserve before
	// end for the host to report the run (a Lambda response).
	returnBy time.Time
}

// bounded reports whether the stop has an end.
func (p stopPlan) bounded() bool { return !p.end.IsZero() }

// planStop is the stop of a run with deadline (zero: none) and budget end,
// signalled at signaled (zero: not signalled) with window: the stop runs
// from the budget end, or from the signal, to the deadline, or to the
// signal plus its window when that comes first. The reserve is half of
// that span, at most maxStopReserve: settleBy is the reserve before the
// end, returnBy half the reserve.
func planStop(deadline, budgetEnd, signaled time.Time, window time.Duration) stopPlan {
	start, end := budgetEnd, deadline
	if !signaled.IsZero() {
		if e := signaled.Add(max(window, 0)); end.IsZero() || e.Before(end) {
			start, end = signaled, e
		}
	}
	if end.IsZero() {
		return stopPlan{}
	}
	reserve := min(max(end.Sub(start), 0)/2, maxStopReserve)
	return stopPlan{end: end, settleBy: end.Add(-reserve), returnBy: end.Add(-reserve / 2)}
}
