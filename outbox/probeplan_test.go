package outbox

import (
	"slices"
	"testing"
	"time"
)

func TestProbeDue(t *testing.T) {
	t.Run("ProbesBusyBucketsAtTheTarget", func(t *testing.T) {
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
		// Bucket 0 had work 1 s before t0, bucket 1 11 s before (quiet),
		// bucket 2 never, bucket 3 at t0.
		worked := []time.Time{ms(-1000), ms(-11000), {}, ms(0)}
		owned := []int{0, 1, 2, 3}
		for _, tc := range []struct {
			name       string
			now        time.Time
			owned      []int
			ready      []int
			poll, busy time.Time
			target     time.Duration
			want       probePlan
		}{
			{name: "poll and busy due: every owned bucket", now: ms(1000), owned: owned, poll: ms(0), busy: ms(900), target: 100 * time.Millisecond,
				want: probePlan{buckets: owned, poll: true, busy: true}},
			{name: "poll due, busy not: the quiet buckets", now: ms(1000), owned: owned, poll: ms(0), busy: ms(900), target: 250 * time.Millisecond,
				want: probePlan{buckets: []int{1, 2}, poll: true}},
			{name: "target at the poll: every bucket at the poll, as without the dial", now: ms(1000), owned: owned, poll: ms(0), busy: ms(900), target: time.Second,
				want: probePlan{buckets: owned, poll: true}},
			{name: "target at the poll: nothing between polls", now: ms(600), owned: owned, poll: ms(0), target: time.Second,
				want: probePlan{next: 400 * time.Millisecond}},
			{name: "target above the poll: the poll still bounds it", now: ms(600), owned: owned, poll: ms(0), target: 2 * time.Second,
				want: probePlan{next: 400 * time.Millisecond}},
			{name: "busy buckets due at the target", now: ms(250), owned: owned, poll: ms(0), busy: ms(0), target: 250 * time.Millisecond,
				want: probePlan{buckets: []int{0, 3}, busy: true}},
			{name: "not yet: wait the rest of the target", now: ms(100), owned: owned, poll: ms(0), busy: ms(0), target: 250 * time.Millisecond,
				want: probePlan{next: 150 * time.Millisecond}},
			{name: "the busy cadence ignores the poll probe", now: ms(1225), owned: owned, poll: ms(1000), busy: ms(900), target: 225 * time.Millisecond,
				want: probePlan{buckets: []int{0, 3}, busy: true}},
			{name: "poll nearer than the target", now: ms(900), owned: owned, poll: ms(0), busy: ms(850), target: 250 * time.Millisecond,
				want: probePlan{next: 100 * time.Millisecond}},
			{name: "ready buckets are fetched anyway, probed at the poll", now: ms(250), owned: owned, ready: []int{3}, poll: ms(0), busy: ms(0), target: 250 * time.Millisecond,
				want: probePlan{buckets: []int{0}, busy: true}},
			{name: "only owned buckets", now: ms(250), owned: []int{1, 2, 3}, poll: ms(0), busy: ms(0), target: 250 * time.Millisecond,
				want: probePlan{buckets: []int{3}, busy: true}},
			{name: "no busy bucket: the poll", now: ms(250), owned: []int{1, 2}, poll: ms(0), busy: ms(0), target: 100 * time.Millisecond,
				want: probePlan{next: 750 * time.Millisecond}},
			{name: "busy until 10 s after the work", now: ms(9250), owned: owned, poll: ms(9000), busy: ms(9000), target: 250 * time.Millisecond,
				want: probePlan{buckets: []int{3}, busy: true}},
			{name: "a never-probed relay: everything due", now: ms(0), owned: owned, target: 250 * time.Millisecond,
				want: probePlan{buckets: owned, poll: true, busy: true}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := probeDue(tc.now, tc.owned, tc.ready, probeTimes{poll: tc.poll, busy: tc.busy, worked: worked}, time.Second, tc.target)
				if !slices.Equal(got.buckets, tc.want.buckets) || got.poll != tc.want.poll || got.busy != tc.want.busy || got.next != tc.want.next {
					t.Errorf("probeDue = %+v; want %+v", got, tc.want)
				}
			})
		}
	})
}
