package outbox

import (
	"errors"
	"testing"
	"time"
)

func TestLinger(t *testing.T) {
	t.Run("AdaptsToRecentWork", func(t *testing.T) {
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		at := func(secs ...float64) []time.Time {
			ts := make([]time.Time, len(secs))
			for i, s := range secs {
				ts[i] = t0.Add(time.Duration(s * float64(time.Second)))
			}
			return ts
		}
		defaults := RelayOptions{}.WithDefaults()
		for _, tc := range []struct {
			name string
			opts RelayOptions
			work []time.Time
			want time.Duration
		}{
			{"no work yet", defaults, nil, 2 * time.Second},
			{"seven polls are not a window", defaults, at(0, 1, 2, 3, 4, 5, 6), 2 * time.Second},
			{"a poll a second (about 1 msg/s)", defaults, at(0, 1, 2, 3, 4, 5, 6, 7), 10 * time.Second},
			{"gaps of 2.5 s on average, the bound", defaults, at(0, 2.5, 5, 7.5, 10, 12.5, 15, 17.5), 10 * time.Second},
			{"gaps of 3 s (about 0.3 msg/s)", defaults, at(0, 3, 6, 9, 12, 15, 18, 21), 2 * time.Second},
			{"a burst drained in many cycles fills one entry", defaults,
				at(0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), 2 * time.Second},
			{"bursts a minute apart", defaults, at(0, 1, 60, 61, 120, 121, 180, 181), 2 * time.Second},
			{"old work leaves the window", defaults, at(0, 100, 200, 300, 301, 302, 303, 304, 305, 306, 307, 308), 10 * time.Second},
			{"a long pause before the last poll", defaults, at(0, 1, 2, 3, 4, 5, 6, 30), 2 * time.Second},
			{"adaptation off", RelayOptions{IdleTimeout: 2 * time.Second, MaxIdleTimeout: 2 * time.Second}.WithDefaults(),
				at(0, 1, 2, 3, 4, 5, 6, 7), 2 * time.Second},
			{"the default bound follows IdleTimeout", RelayOptions{IdleTimeout: 400 * time.Millisecond}.WithDefaults(),
				at(0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5), 2 * time.Second},
			{"gaps above a quarter of a 2 s bound", RelayOptions{IdleTimeout: 400 * time.Millisecond}.WithDefaults(),
				at(0, 1, 2, 3, 4, 5, 6, 7), 400 * time.Millisecond},
			{"a 40 s bound takes gaps up to 10 s", RelayOptions{MaxIdleTimeout: 40 * time.Second}.WithDefaults(),
				at(0, 10, 20, 30, 40, 50, 60, 70), 40 * time.Second},
		} {
			var w recentWork
			for _, ts := range tc.work {
				w.record(ts, tc.opts.PollInterval/2)
			}
			if got := tc.opts.linger(&w); got != tc.want {
				t.Errorf("%s: linger %v, want %v", tc.name, got, tc.want)
			}
		}
	})

	t.Run("MaxIdleTimeoutBelowIdleTimeoutIsRefused", func(t *testing.T) {
		o := RelayOptions{RelayID: "r", IdleTimeout: 5 * time.Second, MaxIdleTimeout: 3 * time.Second}.WithDefaults()
		if err := o.Validate(); !errors.Is(err, ErrMisconfigured) {
			t.Fatalf("Validate: %v, want a misconfiguration", err)
		}
		if d := (RelayOptions{}).WithDefaults().MaxIdleTimeout; d != 10*time.Second {
			t.Fatalf("default MaxIdleTimeout %v, want 10s", d)
		}
	})
}
