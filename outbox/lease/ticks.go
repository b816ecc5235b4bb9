package lease

import "time"

// Tick arithmetic. A tick is 100 ns; tick 0 is 0001-01-01T00:00:00Z, the
// epoch of .NET's DateTime and also Go's zero time.Time. Every timestamp in
// the table (CreatedAtUtc, ExpiresAtUtc, LastSeenUtc, StoppedAtUtc) is a tick
// count, so relays in any language compare the same numbers.
const (
	ticksPerSecond = int64(time.Second / 100)
	// unixEpochSeconds is the number of seconds from 0001-01-01 to
	// 1970-01-01; times 1e7 it is the 621355968000000000 of the facts.
	unixEpochSeconds = int64(62135596800)
)

// Ticks returns t as ticks: ticks = unixNanos/100 + 621355968000000000.
// Time below 100 ns is truncated towards the past (a floor, also before
// 1970), so Ticks never rounds a time up past a lease expiry. The result is
// exact for every instant from year 1 to year 9999, the range a .NET
// DateTime holds; Ticks(time.Time{}) is 0.
func Ticks(t time.Time) int64 {
	// Seconds and nanoseconds separately, because t.UnixNano overflows
	// outside 1678-2262 and truncates towards zero before 1970.
	return (t.Unix()+unixEpochSeconds)*ticksPerSecond + int64(t.Nanosecond())/100
}

// TimeFromTicks returns the UTC instant of a tick count; it inverts Ticks for
// any time with a whole number of 100 ns. TimeFromTicks(0) is the zero
// time.Time.
func TimeFromTicks(ticks int64) time.Time {
	secs, rem := ticks/ticksPerSecond, ticks%ticksPerSecond
	if rem < 0 {
		secs, rem = secs-1, rem+ticksPerSecond
	}
	return time.Unix(secs-unixEpochSeconds, rem*100).UTC()
}
