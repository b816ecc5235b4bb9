package outbox

import (
	"slices"
	"testing"
	"time"
)

func TestJoinPlan(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

	t.Run("SecondLookOnlyAfterASlowStart", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			now  time.Time
			want bool
		}{
			{"a warm start, one Kafka round trip after the first look", ms(10), false},
			{"just under the age", ms(49), false},
			{"at the age", ms(50), true},
			{"a cold start's connection", ms(350), true},
		} {
			if got := secondLookDue(t0, tc.now); got != tc.want {
				t.Errorf("%s: secondLookDue(t0, t0+%v) = %v, want %v", tc.name, tc.now.Sub(t0), got, tc.want)
			}
		}
	})

	t.Run("FirstSweepFetchesTheKnownBucketsItHolds", func(t *testing.T) {
		for _, tc := range []struct {
			name         string
			forced       bool
			known, owned []int
			want         []int
		}{
			{"the woken bucket, claimed", true, []int{3}, []int{0, 1, 2, 3}, []int{3}},
			{"only those claimed", true, []int{3, 5}, []int{4, 5, 6, 7}, []int{5}},
			{"none claimed: the forced probe", true, []int{3}, []int{4, 5}, nil},
			{"nothing known: the forced probe", true, nil, []int{0, 1}, nil},
			{"not forced: the probes decide", false, []int{3}, []int{3}, nil},
		} {
			if got := firstSweep(tc.forced, tc.known, tc.owned); !slices.Equal(got, tc.want) {
				t.Errorf("%s: firstSweep = %v, want %v", tc.name, got, tc.want)
			}
		}
	})
}
