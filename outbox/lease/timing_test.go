package lease

import (
	"testing"
	"time"
)

// TestTiming: with the default timings (30 s lease, 10 s rounds,
// 10 s margin) the next round is due a round interval after the last one
// started, or earlier, when the lease reference (dated back to a lease the
// round left unrenewed) is down to the margin; a renewal before a publish
// is due once the reference is down to the margin whatever the time since
// the round, or once the round is overdue.
func TestTiming(t *testing.T) {
	s := time.Second
	lt := timing{lease: 30 * s, interval: 10 * s, margin: 10 * s}
	for _, c := range []struct {
		name           string
		at, acquiredAt time.Time
		round, renewal time.Time
	}{
		{"round kept everything at 0", at(0), at(0), at(10 * s), at(10 * s)},
		{"round on schedule at 10 left a lease kept at 0", at(0), at(10 * s), at(20 * s), at(20 * s)},
		// The case: a round late by 4 s leaves the lease (16 s
		// left) unrenewed; the next round comes at 20 s, not 24 s, and a
		// publish from 20 s renews first.
		{"late round at 14 left a lease kept at 0", at(0), at(14 * s), at(20 * s), at(20 * s)},
		{"late round at 14.9 left a lease kept at -0.1", at(-100 * time.Millisecond), at(14900 * time.Millisecond),
			at(19900 * time.Millisecond), at(19900 * time.Millisecond)},
		{"renewal at 5 after a round at 0", at(5 * s), at(0), at(10 * s), at(15 * s)},
		{"renewal at 12 after a round at 10 that left a lease kept at 0", at(12 * s), at(10 * s), at(20 * s), at(22 * s)},
		{"nothing trusted", time.Time{}, at(3 * s), at(13 * s), time.Time{}},
	} {
		if got := lt.roundDue(c.at, c.acquiredAt); !got.Equal(c.round) {
			t.Errorf("%s: round due at %v, want %v", c.name, got.Sub(rt), c.round.Sub(rt))
		}
		if c.at.IsZero() {
			continue
		}
		if got := lt.renewDue(c.at, c.acquiredAt); !got.Equal(c.renewal) {
			t.Errorf("%s: renewal due at %v, want %v", c.name, got.Sub(rt), c.renewal.Sub(rt))
		}
	}
	// Rounds that keep every lease (a relay of another language, or one
	// told to keep every round): the plain margin L − I changes nothing.
	plain := timing{lease: 30 * s, interval: 10 * s, margin: 20 * s}
	if got := plain.roundDue(at(0), at(0)); !got.Equal(at(10 * s)) {
		t.Errorf("plain round due at %v, want 10s", got.Sub(rt))
	}
	if got := plain.renewDue(at(0), at(0)); !got.Equal(at(10 * s)) {
		t.Errorf("plain renewal due at %v, want 10s", got.Sub(rt))
	}
}
