package outbox

import (
	"testing"
	"time"
)

func TestPlanStop(t *testing.T) {
	t.Run("Table", func(t *testing.T) {
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
		for _, tc := range []struct {
			name                          string
			deadline, budgetEnd, signaled time.Time
			window                        time.Duration
			want                          stopPlan
		}{
			{name: "no deadline, no signal: unbounded"},
			{name: "no deadline: a signal's window", signaled: ms(10000), window: 5 * time.Second,
				want: stopPlan{end: ms(15000), settleBy: ms(14000), returnBy: ms(14500)}},
			{name: "a 1.4 s margin: reserve 0.7 s, returned 0.35 s before the deadline", deadline: ms(4000), budgetEnd: ms(2600),
				want: stopPlan{end: ms(4000), settleBy: ms(3300), returnBy: ms(3650)}},
			{name: "a 300 ms margin: reserve 150 ms", deadline: ms(1000), budgetEnd: ms(700),
				want: stopPlan{end: ms(1000), settleBy: ms(850), returnBy: ms(925)}},
			{name: "a long margin: the reserve stops at 1 s", deadline: ms(60000), budgetEnd: ms(55000),
				want: stopPlan{end: ms(60000), settleBy: ms(59000), returnBy: ms(59500)}},
			{name: "SIGTERM in the shutdown phase: its 300 ms window, before the deadline", deadline: ms(60000), budgetEnd: ms(55000),
				signaled: ms(2000), window: 300 * time.Millisecond,
				want: stopPlan{end: ms(2300), settleBy: ms(2150), returnBy: ms(2225)}},
			{name: "a signal whose window outlasts the deadline: the deadline", deadline: ms(3000), budgetEnd: ms(2000),
				signaled: ms(2500), window: 5 * time.Second,
				want: stopPlan{end: ms(3000), settleBy: ms(2500), returnBy: ms(2750)}},
			{name: "a signal after the deadline: nothing left", deadline: ms(3000), budgetEnd: ms(2000),
				signaled: ms(3100), window: 300 * time.Millisecond,
				want: stopPlan{end: ms(3000), settleBy: ms(2500), returnBy: ms(2750)}},
			{name: "a zero window: cut at once", signaled: ms(100),
				want: stopPlan{end: ms(100), settleBy: ms(100), returnBy: ms(100)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := planStop(tc.deadline, tc.budgetEnd, tc.signaled, tc.window)
				if got != tc.want {
					t.Fatalf("planStop = %+v, want %+v", got, tc.want)
				}
				if got.bounded() && (got.settleBy.After(got.returnBy) || got.returnBy.After(got.end)) {
					t.Fatalf("out of order: %+v", got)
				}
			})
		}
	})
}
