package outbox

import "time"

// secondLookAge is how old the join check's trust check must be for the
// second look before the heartbeat (joinCheck.stillOrphaned) to be worth
// its read. The look catches a peer woken a moment earlier that claimed
// the buckets meanwhile, which takes it a lease round (three DynamoDB
// round trips): after a cold Kafka connection (100 ms and more) that has
// likely happened, after a warm one (one round trip) it has not.
const secondLookAge = 50 * time.Millisecond

// secondLookDue reports whether a relay about to join at now, whose trust
// check started at firstLook, looks at the coordination partition again.
func secondLookDue(firstLook, now time.Time) bool {
	return now.Sub(firstLook) >= secondLookAge
}

// firstSweep returns the buckets a run fetches before its forced probe of
// every owned bucket: those its join check found orphaned with a message
// at their head (known), now owned. The wake-up's message then goes out
// one probe sooner; the forced probe follows in the next cycle. Nothing
// unless the probe is forced (the run's first cycles after a claim).
func firstSweep(forced bool, known, owned []int) []int {
	if !forced {
		return nil
	}
	return intersect(known, owned)
}
