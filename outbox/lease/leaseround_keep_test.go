package lease

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLeaseRoundKeep(t *testing.T) {
	t.Run("KeepAheadAndKeepMargin", func(t *testing.T) {
		for _, c := range []struct{ lease, interval, ahead, margin time.Duration }{
			{30 * time.Second, 10 * time.Second, 15 * time.Second, 10 * time.Second}, // the defaults: a keep every other round
			{60 * time.Second, 20 * time.Second, 30 * time.Second, 20 * time.Second},
			{60 * time.Second, 10 * time.Second, 45 * time.Second, 40 * time.Second}, // L − 1.5 I, margin L − 2 I
			{30 * time.Second, 0, 0, 0},                                              // no interval: the contract's plain round
			{15 * time.Second, 10 * time.Second, 0, 5 * time.Second},                 // 1.5 intervals reach the lease: L − I
			{20 * time.Second, 10 * time.Second, 15 * time.Second, 10 * time.Second}, // never reached on schedule: keeps every round
			{18 * time.Second, 10 * time.Second, 15 * time.Second, 8 * time.Second},  // margin at most L − I
			{30 * time.Second, -time.Second, 0, 0},                                   // nonsense interval: plain round
			{100 * time.Millisecond, 10 * time.Millisecond, 85 * time.Millisecond, 80 * time.Millisecond},
		} {
			if got := KeepAhead(c.lease, c.interval); got != c.ahead {
				t.Errorf("KeepAhead(%v, %v) = %v; want %v", c.lease, c.interval, got, c.ahead)
			}
			if got := KeepMargin(c.lease, c.interval); got != c.margin {
				t.Errorf("KeepMargin(%v, %v) = %v; want %v", c.lease, c.interval, got, c.margin)
			}
		}
	})

	// PlanRound_LeavesALeaseThatStillLastsUnrenewed: with the relay's round
	// interval in the request, an owned lease with at least KeepAhead left is
	// owned without a write; the guard for a clock set back still wins.
	t.Run("PlanRound_LeavesALeaseThatStillLastsUnrenewed", func(t *testing.T) {
		s := time.Second
		leases := []State{lease(0, "a", at(20*s)), lease(1, "a", at(15*s)), lease(2, "a", at(15*s-100)),
			lease(3, "a", at(-s)), lease(4, "a", at(31*s)), lease(5, "a", at(26*s)), lease(6, "a", at(26*s))}
		relays := []RelayState{beat("a", at(-10*s))}
		for _, c := range []struct {
			name      string
			interval  time.Duration
			keep      []Write
			unrenewed []Write
		}{{
			// rt's round slot (rt / 10 s) is even: of the leases the next
			// round would have to keep (less than 25 s left), even buckets are
			// kept one round early.
			name:      "10 s rounds: 15 s or more left is left alone, unless it is the bucket's turn",
			interval:  10 * s,
			keep:      []Write{keepW(0, at(20*s)), keepW(2, at(15*s-100)), keepW(3, at(-s))},
			unrenewed: []Write{{Bucket: 1, Seen: at(15 * s)}, {Bucket: 5, Seen: at(26 * s)}, {Bucket: 6, Seen: at(26 * s)}},
		}, {
			name:     "no interval: every owned lease is kept",
			interval: 0,
			keep: []Write{keepW(0, at(20*s)), keepW(1, at(15*s)), keepW(2, at(15*s-100)), keepW(3, at(-s)),
				keepW(5, at(26*s)), keepW(6, at(26*s))},
		}, {
			name:     "20 s rounds: 30 s needed, so everything is kept",
			interval: 20 * s,
			keep: []Write{keepW(0, at(20*s)), keepW(1, at(15*s)), keepW(2, at(15*s-100)), keepW(3, at(-s)),
				keepW(5, at(26*s)), keepW(6, at(26*s))},
		}} {
			t.Run(c.name, func(t *testing.T) {
				plan, err := PlanRound(RoundInput{
					Request: Request{RelayID: "a", BucketCount: 7, LeaseDuration: rl, RenewInterval: c.interval},
					Now:     rt, Snapshot: Coordination{Leases: leases, Relays: relays}, HeartbeatRecorded: true, State: RoundState{Round: 3},
				})
				if err != nil {
					t.Fatal(err)
				}
				eq := func(a, b []Write) bool { return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b) }
				if !eq(plan.Keep, c.keep) || !eq(plan.Unrenewed, c.unrenewed) || !slices.Equal(plan.Guarded, []int{4}) {
					t.Errorf("keep %v unrenewed %v guarded %v; want %v, %v, [4]", plan.Keep, plan.Unrenewed, plan.Guarded, c.keep, c.unrenewed)
				}
			})
		}
	})

	// AcquireRound_DefaultTimings_KeepHalfTheLeasesEachRound runs a lone
	// relay's rounds every 10 s with a 30 s lease: it claims, then keeps each
	// lease every other round, half of them in each round (one kept a round
	// early once), full rounds and settled rounds alike; it owns every bucket
	// at every round, and no lease has less than 10 s left when a round
	// starts.
	t.Run("AcquireRound_DefaultTimings_KeepHalfTheLeasesEachRound", func(t *testing.T) {
		io := newTableIO()
		req := Request{RelayID: "a", BucketCount: 2, LeaseDuration: rl, RenewInterval: 10 * time.Second}
		var st RoundState
		var got []string
		for i := range 8 {
			now := at(time.Duration(i) * 10 * time.Second)
			for b, l := range io.leases {
				if left := l.ExpiresAt.Sub(now); left < 10*time.Second {
					t.Fatalf("round %d: bucket %d has %v left", i, b, left)
				}
			}
			acq, err := AcquireRound(context.Background(), io, nil, now, req, st)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(acq.Owned, []int{0, 1}) {
				t.Fatalf("round %d owns %v", i, acq.Owned)
			}
			switch {
			case len(acq.Unrenewed) == 0 && !acq.UnrenewedExpiry.IsZero(),
				len(acq.Unrenewed) > 0 && !acq.UnrenewedExpiry.Equal(now.Add(20*time.Second)):
				t.Errorf("round %d: unrenewed %v until %v", i, acq.Unrenewed, acq.UnrenewedExpiry.Sub(rt))
			}
			st.Round++
			st.Standby, st.Settled = acq.Standby, acq.Settled
			got = append(got, io.takeCalls())
		}
		want := []string{
			"a heartbeat, snapshot, claim 0, claim 1",
			"a heartbeat, snapshot, keep 1", // settles; bucket 1's turn: a round early
			// The settled state is dated back by the relay id's offset, so
			// the first settled round already reads everything again.
			"a heartbeat, snapshot, keep 0",
			"a heartbeat, heartbeats, keep 1",
			"a heartbeat, heartbeats, keep 0",
			"a heartbeat, snapshot, keep 1",
			"a heartbeat, heartbeats, keep 0",
			"a heartbeat, heartbeats, keep 1",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("rounds:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	// AcquireRound_UnmarkedPeer_MakesEveryRoundKeepEveryLease: relay a
	// keeps ahead; b is a relay of another language (its heartbeat carries no
	// keep-ahead mark) whose clock runs 12 s ahead, within the
	// LeaseDuration − LeaseRenewInterval (20 s) such relays are promised. While
	// b is live, a keeps every lease every round, so on b's clock none of a's
	// leases is ever expired when a's next round is due: b never claims a
	// lease a still trusts.
	t.Run("AcquireRound_UnmarkedPeer_MakesEveryRoundKeepEveryLease", func(t *testing.T) {
		const skew = 12 * time.Second
		io := newTableIO()
		req := Request{RelayID: "a", BucketCount: 4, LeaseDuration: rl, RenewInterval: 10 * time.Second}
		var st RoundState
		for i := range 8 {
			now := at(time.Duration(i) * 10 * time.Second)
			// b's round just before a's, on b's clock.
			io.relays["b"] = RelayState{RelayID: "b", LastSeen: now.Add(skew - time.Second)}
			for b, l := range io.leases {
				if l.Owner == "a" && !l.ExpiresAt.After(now.Add(skew)) {
					t.Fatalf("round %d: b's clock sees a's lease on bucket %d expired (%v left on a's)", i, b, l.ExpiresAt.Sub(now))
				}
			}
			acq, err := AcquireRound(context.Background(), io, nil, now, req, st)
			if err != nil {
				t.Fatal(err)
			}
			if len(acq.Owned) != 2 {
				t.Fatalf("round %d owns %v, want its share of 2", i, acq.Owned)
			}
			st.Round++
			st.Standby, st.Settled = acq.Standby, acq.Settled
		}
	})

	// UnmarkedRelays: the heartbeat records without the keep-ahead mark
	// that make a round keep every lease are those the prune would not remove
	// yet, other than the relay's own.
	t.Run("UnmarkedRelays", func(t *testing.T) {
		s := time.Second
		marked := func(r RelayState) RelayState { r.KeepsAhead = true; return r }
		relays := []RelayState{
			beat("a", at(-s)),                       // the relay itself
			beat("live", at(-29*s)),                 // active
			beat("ahead", at(12*s)),                 // active, clock ahead
			marked(beat("spillway", at(-s))),        // keeps ahead
			stopped("stopping", at(-29*s)),          // stopped less than a lease ago
			stopped("gone", at(-31*s)),              // stopped a lease ago: stale
			beat("silent", at(-299*s)),              // silent for fewer than 10 leases
			beat("dead", at(-301*s)),                // silent for more: stale
			{RelayID: "", LastSeen: at(-s)},         // names no relay
			marked(stopped("spillway-stopped", rt)), // keeps ahead
		}
		got := unmarkedRelays(relays, "a", Ticks(rt), durationTicks(rl))
		if want := []string{"live", "ahead", "stopping", "silent"}; !slices.Equal(got, want) {
			t.Errorf("unmarked %v, want %v", got, want)
		}
	})

	// AcquireRound_KeepEveryRound: a request that keeps every round (as
	// RelayOptions.KeepEveryRound asks, like a relay of another language)
	// keeps every owned lease in every round and writes its heartbeat without
	// the keep-ahead mark, so its peers keep every round too.
	t.Run("AcquireRound_KeepEveryRound", func(t *testing.T) {
		io := newTableIO()
		req := Request{RelayID: "a", BucketCount: 2, LeaseDuration: rl, RenewInterval: 10 * time.Second, KeepEveryRound: true}
		var st RoundState
		for i := range 4 {
			acq, err := AcquireRound(context.Background(), io, nil, at(time.Duration(i)*10*time.Second), req, st)
			if err != nil {
				t.Fatal(err)
			}
			if len(acq.Unrenewed) > 0 || io.relays["a"].KeepsAhead {
				t.Fatalf("round %d: unrenewed %v, heartbeat marked %v", i, acq.Unrenewed, io.relays["a"].KeepsAhead)
			}
			st.Round++
			st.Standby, st.Settled = acq.Standby, acq.Settled
			if calls := io.takeCalls(); i > 0 && !strings.HasSuffix(calls, "keep 0, keep 1") {
				t.Errorf("round %d: %s; want both leases kept", i, calls)
			}
		}
		req.KeepEveryRound = false
		if _, err := AcquireRound(context.Background(), io, nil, at(40*time.Second), req, st); err != nil || !io.relays["a"].KeepsAhead {
			t.Errorf("a relay that keeps ahead wrote its heartbeat without the mark (%v)", err)
		}
	})
}
