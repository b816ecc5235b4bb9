package outbox

import (
	"slices"
	"testing"
	"time"
)

func TestProbeDueProbesBusyBucketsAtTheTarget(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// Bucket 0 had work 1 s before t0, bucket 1 11 s before (quiet),
	// bucket 2 never, bucket 3 at t0.
	worked := []time.Time{ms(-1000), ms(-11000), {}, ms(0)}
	owned := []int{0, 1, 2, 3}
	for _, tc := range []struct {
		name      string
		now       time.Time
		owned     []int
		ready     []int
		all, busy time.Time
		target    time.Duration
		wantAll   bool
		wantBusy  []int
		wantNext  time.Duration
	}{
		{name: "poll due probes every owned bucket", now: ms(1000), owned: owned, all: ms(0), target: 250 * time.Millisecond, wantAll: true},
		{name: "target at the poll: today's probe only", now: ms(600), owned: owned, all: ms(0), target: time.Second, wantNext: 400 * time.Millisecond},
		{name: "target above the poll: the poll still bounds it", now: ms(600), owned: owned, all: ms(0), target: 2 * time.Second, wantNext: 400 * time.Millisecond},
		{name: "busy buckets due after the target since the poll probe", now: ms(250), owned: owned, all: ms(0), target: 250 * time.Millisecond, wantBusy: []int{0, 3}},
		{name: "not yet: wait the rest of the target", now: ms(100), owned: owned, all: ms(0), target: 250 * time.Millisecond, wantNext: 150 * time.Millisecond},
		{name: "the last busy probe counts", now: ms(400), owned: owned, all: ms(0), busy: ms(250), target: 250 * time.Millisecond, wantNext: 100 * time.Millisecond},
		{name: "busy probe due again", now: ms(500), owned: owned, all: ms(0), busy: ms(250), target: 250 * time.Millisecond, wantBusy: []int{0, 3}},
		{name: "poll nearer than the target", now: ms(900), owned: owned, all: ms(0), busy: ms(850), target: 250 * time.Millisecond, wantNext: 100 * time.Millisecond},
		{name: "ready buckets are fetched anyway", now: ms(250), owned: owned, ready: []int{3}, all: ms(0), target: 250 * time.Millisecond, wantBusy: []int{0}},
		{name: "only owned buckets", now: ms(250), owned: []int{1, 2, 3}, all: ms(0), target: 250 * time.Millisecond, wantBusy: []int{3}},
		{name: "no busy bucket: the poll", now: ms(250), owned: []int{1, 2}, all: ms(0), target: 100 * time.Millisecond, wantNext: 750 * time.Millisecond},
		{name: "busy until 10 s after the work", now: ms(9250), owned: owned, all: ms(9000), target: 250 * time.Millisecond, wantBusy: []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, busy, next := probeDue(tc.now, tc.owned, tc.ready, probeTimes{all: tc.all, busy: tc.busy, worked: worked}, time.Second, tc.target)
			if all != tc.wantAll || !slices.Equal(busy, tc.wantBusy) || next != tc.wantNext {
				t.Errorf("probeDue = %v, %v, %v; want %v, %v, %v", all, busy, next, tc.wantAll, tc.wantBusy, tc.wantNext)
			}
		})
	}
}
