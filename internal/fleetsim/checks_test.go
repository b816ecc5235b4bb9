package fleetsim

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
)

// The checkers are what the simulation's verdict rests on: each must flag
// the violation it exists for, and accept what the protocol allows.

const testLease = 20 * time.Second

// bubbleClock is true time in a test's bubble, moved by sleeping.
type bubbleClock struct{}

func (bubbleClock) Now() time.Time          { return trueNow() }
func (bubbleClock) Advance(d time.Duration) { time.Sleep(d) }

// leaseFixture must be called in a bubble (synctest.Test).
func leaseFixture() (bubbleClock, *leaseBook, func(skew time.Duration) *hostClock) {
	return bubbleClock{}, newLeaseBook(testLease), newHostClock
}

// acquire records a successful round of relay at the current instant that
// claimed nothing it already held.
func acquire(lb *leaseBook, relay string, c *hostClock, clock bubbleClock, owned ...int) {
	now := clock.Now()
	lb.acquired(relay, c, c.Now(), now, now, owned, nil)
}

func TestChecks(t *testing.T) {
	t.Run("LeaseBook_FlagsATakeoverBeforeTheLeaseRanOut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock, lb, host := leaseFixture()
			r, s := host(0), host(0)
			acquire(lb, "r", r, clock, 3)
			clock.Advance(10 * time.Second)
			acquire(lb, "s", s, clock, 3)
			clock.Advance(time.Second)
			v := lb.checkAt(clock.Now())
			if v == nil || v.bucket != 3 || v.first.relay != "r" || v.second.relay != "s" {
				t.Fatalf("checkAt = %v, want r's belief overlapping s's takeover", v)
			}
			if v, _ := lb.checkAll(); v == nil || v.overlap != 10*time.Second {
				t.Fatalf("checkAll = %v, want an overlap of the 10 s r still held", v)
			}
		})
	})

	t.Run("LeaseBook_AcceptsWhatTheTakerSkewExplains", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock, lb, host := leaseFixture()
			// s's clock is 5 s ahead: it sees r's lease expire 5 s early.
			r, s := host(0), host(5*time.Second)
			acquire(lb, "r", r, clock, 1)
			clock.Advance(testLease - 5*time.Second)
			acquire(lb, "s", s, clock, 1)
			clock.Advance(4 * time.Second)
			if v := lb.checkAt(clock.Now()); v != nil {
				t.Fatalf("checkAt flagged %v", v)
			}
			if v, overlaps := lb.checkAll(); v != nil || overlaps != 1 {
				t.Fatalf("checkAll = %v with %d overlaps, want one overlap within the skew", v, overlaps)
			}
			// One second more than the skew explains is a violation.
			clock2, lb2, host2 := leaseFixture()
			r2, s2 := host2(0), host2(5*time.Second)
			acquire(lb2, "r", r2, clock2, 1)
			clock2.Advance(testLease - 6*time.Second)
			acquire(lb2, "s", s2, clock2, 1)
			if v, _ := lb2.checkAll(); v == nil || v.overlap != 6*time.Second {
				t.Fatalf("checkAll = %v, want an overlap of 6 s against 5 s of skew", v)
			}
		})
	})

	t.Run("LeaseBook_TheFirstTakerBoundsTheOverlapWithLaterHolders", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock, lb, host := leaseFixture()
			// x, 8 s ahead, takes the bucket over 8 s early and hands it at once
			// to y, whose clock is right: r's belief overlapping y is explained by
			// x's skew, not y's.
			r, x, y := host(0), host(8*time.Second), host(0)
			acquire(lb, "r", r, clock, 2)
			clock.Advance(testLease - 8*time.Second)
			acquire(lb, "x", x, clock, 2)
			lb.dropped("x", clock.Now())
			clock.Advance(time.Second)
			acquire(lb, "y", y, clock, 2)
			clock.Advance(time.Second)
			if v := lb.checkAt(clock.Now()); v != nil {
				t.Fatalf("checkAt flagged %v", v)
			}
			if v, _ := lb.checkAll(); v != nil {
				t.Fatalf("checkAll flagged %v", v)
			}
		})
	})

	t.Run("LeaseBook_AClaimStartsTheBeliefAfresh", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// x, 8 s ahead, takes r's bucket over 8 s early and releases it a
			// second later; 2 s after that r, still trusting its old lease, writes
			// the bucket again (a claim of the free bucket, or a keep), and the
			// checks come 10 s later.
			takenBack := func(claimed bool) (*leaseBook, time.Time) {
				clock, lb, host := leaseFixture()
				r, x := host(0), host(8*time.Second)
				acquire(lb, "r", r, clock, 6)
				clock.Advance(testLease - 8*time.Second)
				acquire(lb, "x", x, clock, 6)
				clock.Advance(time.Second)
				lb.dropped("x", clock.Now())
				clock.Advance(2 * time.Second)
				if claimed {
					now := clock.Now()
					lb.acquired("r", r, r.Now(), now, now, []int{6}, []int{6})
				} else {
					acquire(lb, "r", r, clock, 6)
				}
				clock.Advance(10 * time.Second)
				return lb, clock.Now()
			}
			// Claimed: r's old belief overlapped x only until the claim, and the
			// 13 s from x's takeover to the check are not an overlap with anyone.
			lb, at := takenBack(true)
			if v := lb.checkAt(at); v != nil {
				t.Fatalf("checkAt flagged %v", v)
			}
			if v, overlaps := lb.checkAll(); v != nil || overlaps != 1 {
				t.Fatalf("checkAll = %v with %d overlaps, want r's first belief overlapping x within the skew", v, overlaps)
			}
			// Kept rather than claimed, the same belief outlasts x's takeover by
			// more than x's skew explains.
			if lb, at := takenBack(false); lb.checkAt(at) == nil {
				t.Fatal("checkAt accepted a kept belief outlasting the takeover by 13 s against 8 s of skew")
			}
		})
	})

	t.Run("LeaseBook_BeliefsBegunAtOneInstant_MayBeInEitherOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock, lb, host := leaseFixture()
			// Both claim a freed bucket at once: the one 25 s behind first (its
			// lease is expired at once on a clock more than L ahead), then the
			// other.
			behind, right := host(-25*time.Second), host(0)
			acquire(lb, "right", right, clock, 0)
			acquire(lb, "behind", behind, clock, 0)
			clock.Advance(5 * time.Second)
			if v := lb.checkAt(clock.Now()); v != nil {
				t.Fatalf("checkAt flagged %v", v)
			}
			if v, _ := lb.checkAll(); v != nil {
				t.Fatalf("checkAll flagged %v", v)
			}
		})
	})

	t.Run("LeaseBook_ReleaseAndRefusedRenewalEndTheBelief", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock, lb, host := leaseFixture()
			r, s := host(0), host(0)
			acquire(lb, "r", r, clock, 0, 1)
			clock.Advance(2 * time.Second)
			lb.dropped("r", clock.Now()) // release
			acquire(lb, "s", s, clock, 0, 1)
			clock.Advance(time.Second)
			if v := lb.checkAt(clock.Now()); v != nil {
				t.Fatalf("checkAt flagged %v after a release", v)
			}
			// A renewal extends the belief from the renewal's start.
			clock.Advance(15 * time.Second)
			lb.renewed("s", s.Now(), clock.Now(), []int{0, 1})
			clock.Advance(10 * time.Second)
			if _, held := lb.left("s", 0, clock.Now()); !held {
				t.Fatal("renewed belief lapsed")
			}
			if v, _ := lb.checkAll(); v != nil {
				t.Fatalf("checkAll flagged %v", v)
			}
		})
	})

	t.Run("LeaseBook_AHostClockSetBackLengthensTheBelief", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock, lb, host := leaseFixture()
			start := clock.Now()
			r := host(0)
			acquire(lb, "r", r, clock, 4)
			clock.Advance(5 * time.Second)
			r.step(-7 * time.Second)
			// r reads ref + L at true 27 s, not 20 s.
			clock.Advance(21 * time.Second)
			if _, held := lb.left("r", 4, clock.Now()); !held {
				t.Fatal("belief ended on the true clock, not on the host's")
			}
			b := lb.open["r"][4]
			if got := lb.endOf(b).Sub(start); got != 27*time.Second {
				t.Fatalf("belief ends at %v, want 27s", got)
			}
		})
	})

	t.Run("HostClock_TrueTimeReaching", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := trueNow()
			c := newHostClock(3 * time.Second)
			time.Sleep(10 * time.Second)
			c.step(-5 * time.Second)
			at := func(d time.Duration) time.Time { return start.Add(d) }
			for _, tc := range []struct {
				from, target, want time.Duration
			}{
				{0, 5 * time.Second, 2 * time.Second},   // before the step: skew +3
				{0, 12 * time.Second, 9 * time.Second},  // read before the step
				{0, 14 * time.Second, 16 * time.Second}, // the step sets 13 back to 8: 14 is read at 16
				{11 * time.Second, 9 * time.Second, 11 * time.Second},
			} {
				if got := c.trueTimeReaching(at(tc.from), at(tc.target)); !got.Equal(at(tc.want)) {
					t.Errorf("trueTimeReaching(%v, %v) = %v, want %v", tc.from, tc.target, got.Sub(start), tc.want)
				}
			}
		})
	})

	t.Run("Config_TolerableSkewIsTheLeastALeaseHasLeftAtARound", func(t *testing.T) {
		for _, tc := range []struct {
			lease, interval, want time.Duration
		}{
			{30 * time.Second, 10 * time.Second, 9 * time.Second},  // kept every other round: L − 2I
			{60 * time.Second, 20 * time.Second, 19 * time.Second}, // likewise
			{20 * time.Second, 15 * time.Second, 4 * time.Second},  // no round skips a keep: L − I
		} {
			c := Config{LeaseDuration: tc.lease, RenewInterval: tc.interval}
			if got := c.tolerableSkew(); got != tc.want {
				t.Errorf("L %v, I %v: tolerableSkew = %v, want %v", tc.lease, tc.interval, got, tc.want)
			}
		}
	})

	t.Run("CauseBook_ExplainsUntilSettleAfterTheEnd", func(t *testing.T) {
		b := newCauseBook(30 * time.Second)
		start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		at := func(d time.Duration) time.Time { return start.Add(d) }
		c := b.open(causeThrottle, 0, at(10*time.Second))
		b.instant(causeJoin, 0, at(20*time.Second))
		b.closeAt(c, at(25*time.Second))
		// s's clock ran 8 s ahead: the leases it left lapse 8 s later.
		b.instant(causeLeave, 8*time.Second, at(100*time.Second))
		b.instant(causeCrash, -3*time.Second, at(200*time.Second))
		for _, tc := range []struct {
			t    time.Duration
			want string
		}{
			{5 * time.Second, ""},
			{12 * time.Second, causeThrottle},
			{30 * time.Second, causeJoin}, // the most recent cause
			{52 * time.Second, causeThrottle},
			{56 * time.Second, ""},
			{138 * time.Second, causeLeave},
			{139 * time.Second, ""},
			{230 * time.Second, causeCrash}, // a clock behind lingers no less
			{231 * time.Second, ""},
		} {
			got := ""
			if c := b.explain(at(tc.t)); c != nil {
				got = c.kind
			}
			if got != tc.want {
				t.Errorf("explain(%v) = %q, want %q", tc.t, got, tc.want)
			}
		}
	})

	t.Run("CheckRecords", func(t *testing.T) {
		wl, m := deliveryFixture()
		for _, tc := range []struct {
			name      string
			recs      []*kgo.Record
			invariant string
			dups      int
		}{
			{"in order", records(m[0], m[1], m[3], m[2]), "", 0},
			// A redelivered prefix: first deliveries still in order.
			{"duplicates", records(m[0], m[1], m[0], m[1], m[2], m[3]), "", 2},
			// 2,3,1 after dedup: the documented consequence of a failing head
			// row, and exactly what the order check must refuse.
			{"out of order", records(m[1], m[2], m[0], m[3]), "per-key order", 0},
			{"loss", records(m[0], m[2], m[3]), "no loss", 0},
			{"loss of the last", records(m[0], m[1], m[3]), "no loss", 0},
			{"phantom", records(m[0], m[1], m[2], m[3], m[4]), "no phantom", 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dc, v := checkRecords(wl, tc.recs, outbox.DefaultMessageIDHeaderName)
				switch {
				case tc.invariant == "" && v != nil:
					t.Fatalf("flagged %v", v)
				case tc.invariant != "" && (v == nil || v.Invariant != tc.invariant):
					t.Fatalf("got %v, want a %q violation", v, tc.invariant)
				case v == nil && dc.duplicates != tc.dups:
					t.Fatalf("%d duplicates, want %d", dc.duplicates, tc.dups)
				}
			})
		}
		// What a refused partition batch leaves when a later record of its
		// key was handed over after the refusal: the later record, then the
		// refused one retried, then the later one again. Duplicates are
		// allowed; the first deliveries #1, #0 are not.
		if _, v := checkRecords(wl, records(m[1], m[0], m[1], m[2], m[3]), outbox.DefaultMessageIDHeaderName); v == nil || v.Invariant != "per-key order" {
			t.Fatalf("got %v, want a per-key order violation for a refused record retried behind a later one", v)
		}
		// A message whose every attempt failed ambiguously may or may not be
		// delivered.
		m[2].state = msgUncertain
		if _, v := checkRecords(wl, records(m[0], m[1], m[3]), outbox.DefaultMessageIDHeaderName); v != nil {
			t.Fatalf("uncertain message required: %v", v)
		}
	})

	t.Run("Violation_NamesTheSeedAndTheReplay", func(t *testing.T) {
		v := &Violation{Seed: 42, Invariant: "per-key order", Detail: "x", duration: 6 * time.Minute, Trace: []string{"T+ 1.000s publish"}}
		msg := v.Error()
		for _, want := range []string{"seed 42", "make soak SEED=42 DURATION=6m0s", "T+ 1.000s publish"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q lacks %q", msg, want)
			}
		}
	})

	t.Run("LeaseBook_CheckMixedFlagsATakeoverOfALeaseItsRoundLeftUnrenewed_OnceTheRoundCouldSeeTheTaker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const interval = 5 * time.Second
			limit := Config{LeaseDuration: testLease, RenewInterval: interval}.mixedSkewLimit()
			run := func(left time.Duration, xFirst bool) *leaseViolation {
				clock, lb, host := leaseFixture()
				// r's round at 0 leaves bucket 1 with left of its lease; x keeps
				// every round, its clock 12 s ahead (between L − 2I and L − I),
				// and had a round before r's unless xFirst.
				r, x := host(0), host(12*time.Second)
				lb.markPlain("x")
				if !xFirst {
					now := clock.Now()
					lb.acquired("x", x, x.Now(), now, now, nil, nil)
					clock.Advance(time.Millisecond)
				}
				now := clock.Now()
				lb.acquired("r", r, r.Now().Add(left-testLease), now, now, []int{1}, nil)
				// x claims as soon as the stored expiry has passed on its clock.
				clock.Advance(max(left-12*time.Second, 0) + time.Second)
				now = clock.Now()
				lb.acquired("x", x, x.Now(), now, now, []int{1}, []int{1})
				clock.Advance(testLease)
				v, _ := lb.checkMixed(interval, limit)
				return v
			}
			// Left unrenewed with 8 s: x takes it a second later, while r still
			// trusts it for 7 s.
			if v := run(8*time.Second, false); v == nil || v.first.relay != "r" || v.second.relay != "x" {
				t.Fatalf("checkMixed = %v, want x's takeover of r's unrenewed lease", v)
			}
			// Renewed (the whole lease left): x sees it expire only 8 s later,
			// after r's next round was due; not the mixed fleet's fault.
			if v := run(testLease, false); v != nil {
				t.Fatalf("checkMixed flagged %v", v)
			}
			// x's very first round: r's round could not see x's heartbeat,
			// the limit docs/order.md states for relays of other languages.
			if v := run(8*time.Second, true); v != nil {
				t.Fatalf("checkMixed flagged a first-round claim: %v", v)
			}
		})
	})
}

// deliveryFixture is a workload of key k with messages #0..#2, a keyless
// message, and a rejected one.
func deliveryFixture() (*workload, []*logicalMsg) {
	wl := &workload{byID: map[outbox.MessageID]*logicalMsg{}}
	var ms []*logicalMsg
	for i := range 5 {
		m := &logicalMsg{id: outbox.NewMessageID(), keyName: "k", index: i, state: msgCommitted}
		switch i {
		case 3:
			m.keyName, m.index = "", -1
		case 4:
			m.index, m.state = -1, msgRejected
		}
		wl.msgs = append(wl.msgs, m)
		wl.byID[m.id] = m
		ms = append(ms, m)
	}
	return wl, ms
}

func records(ms ...*logicalMsg) []*kgo.Record {
	var out []*kgo.Record
	for i, m := range ms {
		out = append(out, &kgo.Record{Topic: "t", Offset: int64(i), Headers: []kgo.RecordHeader{
			{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(m.id.String())},
		}})
	}
	return out
}
