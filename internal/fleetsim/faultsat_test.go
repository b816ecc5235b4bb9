package fleetsim

import (
	"testing"
	"time"
)

func TestFaultsAt(t *testing.T) {
	// A relay draws no fault of its own (crash, pause, large skew) in a steady
	// phase nor in the last faultQuietBefore of a churn phase a steady phase
	// follows: seed 1234 with ORDER_FAULTS=all let a relay that joined 3 s
	// before the steady phase carry a large skew 80 s into it, and a pause
	// 57 s, which left the steady phase no quiet window and failed the
	// vacuity guard. The churn phase the writes end in keeps its faults to
	// the end.
	t.Run("KeepTheEndOfAChurnPhaseQuiet", func(t *testing.T) {
		t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
		s := &sim{cfg: Config{WriteDuration: 6 * time.Minute}, start: t0,
			phases: []phase{{start: 0, end: 2 * time.Minute}, {start: 2 * time.Minute, end: 4*time.Minute + 30*time.Second, steady: true},
				{start: 4*time.Minute + 30*time.Second, end: 6 * time.Minute}}}
		for _, c := range []struct {
			at   time.Duration
			want bool
		}{
			{0, true},
			{time.Minute + 39*time.Second, true},
			{time.Minute + 40*time.Second, false}, // faultQuietBefore before the steady phase
			{time.Minute + 57*time.Second, false},
			{2 * time.Minute, false},
			{4*time.Minute + 29*time.Second, false},
			{4*time.Minute + 30*time.Second, true},
			{5*time.Minute + 59*time.Second, true}, // the last churn phase keeps its faults
			{7 * time.Minute, true},                // the drain after the writes
		} {
			if got := s.faultsAt(t0.Add(c.at)); got != c.want {
				t.Errorf("faultsAt(T+%v) = %v, want %v", c.at, got, c.want)
			}
		}
	})
}
