package lease

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Literal times of the lease-round tables: the round runs at rt, leases
// last 30 s.
var rt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const rl = 30 * time.Second

func at(d time.Duration) time.Time { return rt.Add(d) }

func lease(b int, owner string, expires time.Time) State {
	return State{Bucket: b, Owner: owner, ExpiresAt: expires}
}

func beat(id string, seen time.Time) RelayState { return RelayState{RelayID: id, LastSeen: seen} }

func stopped(id string, seen time.Time) RelayState {
	return RelayState{RelayID: id, LastSeen: seen, Stopped: true}
}

func keepW(b int, seen time.Time) Write {
	return Write{Bucket: b, Seen: seen, Expiry: at(rl)}
}
func releaseW(b int, seen time.Time) Write {
	return Write{Bucket: b, Seen: seen, Now: rt}
}
func claimW(b int) Write { return Write{Bucket: b, Now: rt, Expiry: at(rl)} }

// wantRound is the part of a RoundPlan a table row pins; nil and empty
// slices are the same "nothing".
type wantRound struct {
	keep, release, claim []Write
	guarded, withheld    []int
	prune                []string // nil: the round does not prune
	pruneDue             bool
	rank                 int
	ignored              int
	distant              bool
}

func checkRound(t *testing.T, got RoundPlan, want wantRound) {
	t.Helper()
	eq := func(a, b []Write) bool { return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b) }
	if !eq(got.Keep, want.keep) || !eq(got.Release, want.release) || !eq(got.Claim, want.claim) {
		t.Errorf("writes keep %v release %v claim %v; want keep %v release %v claim %v",
			got.Keep, got.Release, got.Claim, want.keep, want.release, want.claim)
	}
	if !slices.Equal(got.Guarded, want.guarded) || !slices.Equal(got.Withheld, want.withheld) {
		t.Errorf("guarded %v withheld %v; want %v, %v", got.Guarded, got.Withheld, want.guarded, want.withheld)
	}
	switch {
	case (got.Prune != nil) != want.pruneDue:
		t.Errorf("prune %+v; want due=%v", got.Prune, want.pruneDue)
	case got.Prune != nil:
		w := PruneWrite{Relays: want.prune, DeadBefore: at(-10 * rl), StoppedBefore: at(-rl)}
		if !slices.Equal(got.Prune.Relays, w.Relays) || !got.Prune.DeadBefore.Equal(w.DeadBefore) || !got.Prune.StoppedBefore.Equal(w.StoppedBefore) {
			t.Errorf("prune %+v; want %+v", *got.Prune, w)
		}
	}
	if got.StandbyRank != want.rank || got.IgnoredRelays != want.ignored || got.Standby.Distant() != want.distant {
		t.Errorf("rank %d ignored %d distant %v; want %d, %d, %v",
			got.StandbyRank, got.IgnoredRelays, got.Standby.Distant(), want.rank, want.ignored, want.distant)
	}
}

func TestPlanRound(t *testing.T) {
	// TheLeaseRules walks the lease section of the table contract
	// one rule at a time, with literal times.
	t.Run("TheLeaseRules", func(t *testing.T) {
		for _, c := range []struct {
			name     string
			n        int
			me       string
			leases   []State
			relays   []RelayState
			refused  bool
			round    int
			want     wantRound
			subTicks bool
		}{{
			name: "steady state: one keep per owned bucket, expiry = now + L, the stored expiry as version",
			n:    4, me: "a",
			leases: []State{lease(0, "a", at(20*time.Second)), lease(1, "a", at(20*time.Second)),
				lease(2, "b", at(25*time.Second)), lease(3, "b", at(25*time.Second))},
			relays: []RelayState{beat("a", at(-10*time.Second)), beat("b", at(-5*time.Second))},
			round:  3,
			want:   wantRound{keep: []Write{keepW(0, at(20*time.Second)), keepW(1, at(20*time.Second))}, rank: -1},
		}, {
			name: "fresh table: claims create the leases",
			n:    2, me: "a", round: 1,
			want: wantRound{claim: []Write{claimW(0), claimW(1)}, rank: -1},
		}, {
			name: "a lease is free at its expiry tick and without an expiry",
			n:    3, me: "a", round: 1,
			leases: []State{lease(0, "b", rt), lease(1, "b", time.Time{}), lease(2, "b", at(100*time.Nanosecond))},
			relays: []RelayState{beat("b", at(-time.Second))},
			// b is active and holds only bucket 2 (100 ns left): a's share
			// is 2 and both free buckets are its.
			want: wantRound{claim: []Write{claimW(0), claimW(1)}, rank: -1},
		}, {
			name: "the relay's own expired lease is kept, a foreign expired one claimed (P11)",
			n:    4, me: "a", round: 1,
			leases: []State{lease(0, "a", at(5*time.Second)), lease(1, "a", at(-time.Second)),
				lease(2, "b", at(5*time.Second)), lease(3, "dead", at(-time.Second))},
			relays: []RelayState{beat("a", at(-10*time.Second)), beat("b", at(-10*time.Second))},
			want:   wantRound{keep: []Write{keepW(0, at(5*time.Second)), keepW(1, at(-time.Second))}, rank: -1},
		}, {
			name: "a live lease of a relay without a heartbeat is not free",
			n:    2, me: "a", round: 1,
			leases: []State{lease(1, "ghost", at(time.Second))},
			want:   wantRound{claim: []Write{claimW(0)}, rank: -1},
		}, {
			name: "over share: releases outside the range first, the stored expiry as version (P3)",
			n:    4, me: "m", round: 1,
			leases: []State{lease(0, "m", at(9*time.Second)), lease(1, "m", at(9*time.Second)),
				lease(2, "m", at(9*time.Second)), lease(3, "m", at(9*time.Second))},
			relays: []RelayState{beat("m", at(-10*time.Second)), beat("b", at(-time.Second))},
			want: wantRound{keep: []Write{keepW(2, at(9*time.Second)), keepW(3, at(9*time.Second))},
				release: []Write{releaseW(0, at(9*time.Second)), releaseW(1, at(9*time.Second))}, rank: -1},
		}, {
			name: "keep guard: a stored expiry later than this round's is not renewed, nor reported owned",
			n:    2, me: "a", round: 1,
			leases: []State{lease(0, "a", at(rl+100*time.Nanosecond)), lease(1, "a", at(rl))},
			want:   wantRound{keep: []Write{keepW(1, at(rl))}, guarded: []int{0}, rank: -1},
		}, {
			name: "refused heartbeat: keeps and releases still go, claims are withheld",
			n:    4, me: "a", refused: true, round: 1,
			leases: []State{lease(0, "a", at(5*time.Second))},
			want:   wantRound{keep: []Write{keepW(0, at(5*time.Second))}, withheld: []int{1, 2, 3}, rank: -1},
		}, {
			name: "activity is strict: a heartbeat exactly one lease old no longer counts",
			n:    2, me: "a", round: 1,
			relays: []RelayState{beat("b", at(-rl)), beat("c", at(-rl+100*time.Nanosecond))},
			// Fleet {a, c}: a's range is [0], c's [1].
			want: wantRound{claim: []Write{claimW(0)}, rank: -1},
		}, {
			name: "stopped relays stop counting at once and are stale one lease after the stamp",
			n:    2, me: "a", round: 0,
			relays: []RelayState{stopped("b", at(-time.Second)), stopped("c", at(-rl)), stopped("d", at(-rl-100*time.Nanosecond))},
			want:   wantRound{claim: []Write{claimW(0), claimW(1)}, pruneDue: true, prune: []string{"d"}, rank: -1},
		}, {
			name: "silent relays are stale after ten lease durations, not at ten",
			n:    1, me: "a", round: 0,
			relays: []RelayState{beat("b", at(-10*rl)), beat("c", at(-10*rl-100*time.Nanosecond))},
			want:   wantRound{claim: []Write{claimW(0)}, pruneDue: true, prune: []string{"c"}, rank: -1},
		}, {
			name: "prune on a run's first round, even with nothing stale",
			n:    1, me: "a", round: 0,
			want: wantRound{claim: []Write{claimW(0)}, pruneDue: true, rank: -1},
		}, {
			name: "no prune on the second to ninth round",
			n:    1, me: "a", round: 8,
			relays: []RelayState{stopped("b", at(-time.Hour))},
			want:   wantRound{claim: []Write{claimW(0)}, rank: -1},
		}, {
			name: "prune on the tenth round",
			n:    1, me: "a", round: 9,
			relays: []RelayState{stopped("b", at(-time.Hour))},
			want:   wantRound{claim: []Write{claimW(0)}, pruneDue: true, prune: []string{"b"}, rank: -1},
		}, {
			name: "prune on the twentieth round",
			n:    1, me: "a", round: 19,
			relays: []RelayState{stopped("b", at(-time.Hour))},
			want:   wantRound{claim: []Write{claimW(0)}, pruneDue: true, prune: []string{"b"}, rank: -1},
		}, {
			name: "a heartbeat record with an empty id is skipped and counted, and pruned once stale",
			n:    2, me: "a", round: 0,
			relays: []RelayState{beat("", at(-time.Second)), beat("b", at(-time.Second)), stopped("", at(-time.Hour))},
			want:   wantRound{claim: []Write{claimW(0)}, pruneDue: true, prune: []string{""}, rank: -1, ignored: 2},
		}, {
			name: "leases beyond the bucket count are ignored (left over from a larger count)",
			n:    1, me: "a", round: 1,
			leases: []State{lease(0, "a", at(time.Second)), lease(5, "a", at(time.Second))},
			want:   wantRound{keep: []Write{keepW(0, at(time.Second))}, rank: -1},
		}, {
			name: "first-in-line standby: rank below the bucket count, not distant (P7)",
			n:    1, me: "b", round: 1,
			leases: []State{lease(0, "m", at(time.Second))},
			relays: []RelayState{beat("m", at(-time.Second))},
			want:   wantRound{rank: 0},
		}, {
			name: "behind one standby per bucket: a distant standby",
			n:    1, me: "c", round: 1,
			leases: []State{lease(0, "m", at(time.Second))},
			relays: []RelayState{beat("m", at(-time.Second)), beat("b", at(-time.Second))},
			want:   wantRound{rank: 1, distant: true},
		}, {
			name: "a relay whose heartbeat was refused never becomes a distant standby",
			n:    1, me: "c", round: 1, refused: true,
			leases: []State{lease(0, "m", at(time.Second))},
			relays: []RelayState{beat("m", at(-time.Second)), beat("b", at(-time.Second))},
			want:   wantRound{rank: 1},
		}, {
			name: "now is truncated to ticks, as every stored timestamp is",
			n:    1, me: "a", round: 1, subTicks: true,
			leases: []State{lease(0, "a", at(rl))},
			want:   wantRound{keep: []Write{keepW(0, at(rl))}, rank: -1},
		}} {
			t.Run(c.name, func(t *testing.T) {
				now := rt
				if c.subTicks {
					now = rt.Add(99 * time.Nanosecond)
				}
				plan, err := PlanRound(RoundInput{
					Request:           Request{RelayID: c.me, BucketCount: c.n, LeaseDuration: rl},
					Now:               now,
					Snapshot:          Coordination{Leases: c.leases, Relays: c.relays},
					HeartbeatRecorded: !c.refused,
					State:             RoundState{Round: c.round},
				})
				if err != nil {
					t.Fatal(err)
				}
				checkRound(t, plan, c.want)
			})
		}
	})

	// DeadRelaysBucketsSplitWithoutCollision is P4 through the
	// round: three relays planning from the same snapshot claim disjoint
	// buckets.
	t.Run("DeadRelaysBucketsSplitWithoutCollision", func(t *testing.T) {
		var leases []State
		for b := range 16 {
			owner := map[int]string{0: "a", 2: "c", 3: "d"}[b/4]
			if owner != "" {
				leases = append(leases, lease(b, owner, at(10*time.Second)))
			}
		}
		snap := Coordination{Leases: leases, Relays: []RelayState{beat("a", rt), beat("c", rt), beat("d", rt), beat("b", at(-rl))}}
		want := map[string][]int{"a": {4, 5}, "c": {6}, "d": {7}}
		for id, claims := range want {
			plan, err := PlanRound(RoundInput{Request: Request{RelayID: id, BucketCount: 16, LeaseDuration: rl},
				Now: rt, Snapshot: snap, HeartbeatRecorded: true, State: RoundState{Round: 1}})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, w := range plan.Claim {
				got = append(got, w.Bucket)
			}
			if !slices.Equal(got, claims) || len(plan.Release) != 0 || len(plan.Keep) != 4 {
				t.Errorf("%s: claims %v releases %v keeps %d; want claims %v, no release, 4 keeps", id, got, plan.Release, len(plan.Keep), claims)
			}
		}
	})

	t.Run("Misconfigurations", func(t *testing.T) {
		for name, req := range map[string]Request{
			"no bucket":       {RelayID: "a", BucketCount: 0, LeaseDuration: rl},
			"negative count":  {RelayID: "a", BucketCount: -1, LeaseDuration: rl},
			"empty requester": {RelayID: "", BucketCount: 1, LeaseDuration: rl},
		} {
			if _, err := PlanRound(RoundInput{Request: req, Now: rt, HeartbeatRecorded: true}); !errors.Is(err, ErrMisconfigured) {
				t.Errorf("%s: %v, want a misconfiguration", name, err)
			}
		}
	})

	// StartRound_DistantStandbyRests follows a distant standby through its
	// rounds: it rests while rested + sinceLastCall < 3/4 L (in ticks).
	t.Run("StartRound_DistantStandbyRests", func(t *testing.T) {
		req := Request{RelayID: "c", BucketCount: 1, LeaseDuration: rl}
		distant := Standby{relayID: "c", since: Ticks(rt), lastCall: Ticks(rt), rank: 3}
		for _, c := range []struct {
			name     string
			st       Standby
			relay    string
			at       time.Time
			rest     bool
			lastCall time.Time
		}{
			{name: "not a distant standby", st: Standby{}, at: at(10 * time.Second)},
			{name: "next round, 10 s + 10 s < 22.5 s", st: distant, at: at(10 * time.Second), rest: true, lastCall: at(10 * time.Second)},
			{name: "just below the threshold", st: distant, at: at(11250*time.Millisecond - 100*time.Nanosecond), rest: true,
				lastCall: at(11250*time.Millisecond - 100*time.Nanosecond)},
			{name: "at the threshold, 11.25 s + 11.25 s", st: distant, at: at(11250 * time.Millisecond)},
			{name: "after a rest at 10 s, the round at 20 s is full (20 + 10 >= 22.5)",
				st: Standby{relayID: "c", since: Ticks(rt), lastCall: Ticks(at(10 * time.Second)), rank: 3}, at: at(20 * time.Second)},
			{name: "clock went back", st: distant, at: at(-time.Second)},
			{name: "state of another relay", st: distant, relay: "d", at: at(10 * time.Second)},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := req
				if c.relay != "" {
					r.RelayID = c.relay
				}
				got := StartRound(c.at, r, RoundState{Standby: c.st})
				if got.Rest != c.rest {
					t.Fatalf("rest %v, want %v", got.Rest, c.rest)
				}
				if !c.rest {
					if got.Standby.Distant() {
						t.Fatalf("a full round kept the standby state %+v", got.Standby)
					}
					return
				}
				if got.StandbyRank != 3 || got.Standby.lastCall != Ticks(c.lastCall) || got.Standby.since != Ticks(rt) {
					t.Fatalf("rest %+v; want rank 3, lastCall %v, since %v", got, c.lastCall, rt)
				}
			})
		}
	})

	// StartRound_EveryOtherRoundOnlyWithTheDefaultRatio runs PlanRound and
	// StartRound in turn, as a relay does, with 10 s rounds.
	t.Run("StartRound_EveryOtherRoundOnlyWithTheDefaultRatio", func(t *testing.T) {
		for _, c := range []struct {
			lease time.Duration
			want  string
		}{
			{30 * time.Second, "full rest full rest full rest"},
			{20 * time.Second, "full full full full full full"}, // 2I >= 0.75 L
		} {
			req := Request{RelayID: "c", BucketCount: 1, LeaseDuration: c.lease}
			var st RoundState
			var got []string
			for i := range 6 {
				now := at(time.Duration(i) * 10 * time.Second)
				if start := StartRound(now, req, st); start.Rest {
					st.Standby = start.Standby
					got = append(got, "rest")
					continue
				}
				snap := Coordination{Leases: []State{lease(0, "m", now.Add(c.lease))},
					Relays: []RelayState{beat("m", now), beat("b", now)}}
				plan, err := PlanRound(RoundInput{Request: req, Now: now, Snapshot: snap, HeartbeatRecorded: true, State: st})
				if err != nil {
					t.Fatal(err)
				}
				st = RoundState{Round: st.Round + 1, Standby: plan.Standby}
				got = append(got, "full")
			}
			if s := fmt.Sprint(got); s != "["+c.want+"]" {
				t.Errorf("L %v: rounds %s, want [%s]", c.lease, s, c.want)
			}
		}
	})
}
