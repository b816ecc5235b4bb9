package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// parseLeases reads a compact lease table: one word per bucket, "-" for no
// owner, "x" for a live lease of x, "x*" for an expired lease of x.
func parseLeases(spec string) []BucketLease {
	var ls []BucketLease
	for _, w := range strings.Fields(spec) {
		switch {
		case w == "-":
			ls = append(ls, BucketLease{})
		case strings.HasSuffix(w, "*"):
			ls = append(ls, BucketLease{Owner: strings.TrimSuffix(w, "*"), Expired: true})
		default:
			ls = append(ls, BucketLease{Owner: w})
		}
	}
	return ls
}

// expectPlan is the part of a Plan a worked example pins; nil slices
// and empty slices are the same "nothing".
type expectPlan struct {
	keep, release, claim []int
	standbyRank          int
}

func checkPlan(t *testing.T, what string, got Plan, want expectPlan) {
	t.Helper()
	if !slices.Equal(got.Keep, want.keep) || !slices.Equal(got.Release, want.release) ||
		!slices.Equal(got.Claim, want.claim) || got.StandbyRank != want.standbyRank {
		t.Errorf("%s: plan keep %v release %v claim %v standby %d; want keep %v release %v claim %v standby %d",
			what, got.Keep, got.Release, got.Claim, got.StandbyRank, want.keep, want.release, want.claim, want.standbyRank)
	}
}

func mustPlan(t *testing.T, n int, active []string, requester string, leases []BucketLease) Plan {
	t.Helper()
	p, err := PlanLeases(n, active, requester, leases)
	if err != nil {
		t.Fatalf("PlanLeases(%s): %v", requester, err)
	}
	return p
}

// applyPlan performs a plan's writes on leases as if every conditional
// write were accepted (the worked examples have no races).
func applyPlan(t *testing.T, leases []BucketLease, requester string, p Plan) {
	t.Helper()
	for _, b := range p.Keep {
		leases[b] = BucketLease{Owner: requester}
	}
	for _, b := range p.Release {
		leases[b] = BucketLease{}
	}
	for _, b := range p.Claim {
		if l := leases[b]; l.Owner != "" && !l.Expired {
			t.Fatalf("%s claims bucket %d held by %s", requester, b, l.Owner)
		}
		leases[b] = BucketLease{Owner: requester}
	}
}

func TestPlanLeases(t *testing.T) {
	t.Parallel()
	t.Run("WorkedExamples", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name      string
			n         int
			active    []string
			leases    string
			requester string
			want      expectPlan
		}{
			{"P1 steady state a", 8, []string{"relay-a", "relay-b"}, "relay-a relay-a relay-a relay-a relay-b relay-b relay-b relay-b", "relay-a",
				expectPlan{keep: []int{0, 1, 2, 3}, standbyRank: -1}},
			{"P1 steady state b", 8, []string{"relay-a", "relay-b"}, "relay-a relay-a relay-a relay-a relay-b relay-b relay-b relay-b", "relay-b",
				expectPlan{keep: []int{4, 5, 6, 7}, standbyRank: -1}},
			{"P3 joiner ranks before the incumbent: m hands back b's range", 8, []string{"m", "b"}, "m m m m m m m m", "m",
				expectPlan{keep: []int{4, 5, 6, 7}, release: []int{0, 1, 2, 3}, standbyRank: -1}},
			{"P3 b waits for the hand-back", 8, []string{"m", "b"}, "m m m m m m m m", "b",
				expectPlan{standbyRank: -1}},
			{"P4 dead relay's buckets: a", 16, []string{"a", "c", "d"}, "a a a a - - - - c c c c d d d d", "a",
				expectPlan{keep: []int{0, 1, 2, 3}, claim: []int{4, 5}, standbyRank: -1}},
			{"P4 dead relay's buckets: c", 16, []string{"a", "c", "d"}, "a a a a - - - - c c c c d d d d", "c",
				expectPlan{keep: []int{8, 9, 10, 11}, claim: []int{6}, standbyRank: -1}},
			{"P4 dead relay's buckets: d", 16, []string{"a", "c", "d"}, "a a a a - - - - c c c c d d d d", "d",
				expectPlan{keep: []int{12, 13, 14, 15}, claim: []int{7}, standbyRank: -1}},
			{"P5 fresh table a", 8, []string{"a", "b", "c"}, "- - - - - - - -", "a", expectPlan{claim: []int{0, 1, 2}, standbyRank: -1}},
			{"P5 fresh table b", 8, []string{"a", "b", "c"}, "- - - - - - - -", "b", expectPlan{claim: []int{3, 4, 5}, standbyRank: -1}},
			{"P5 fresh table c", 8, []string{"a", "b", "c"}, "- - - - - - - -", "c", expectPlan{claim: []int{6, 7}, standbyRank: -1}},
			{"P6 remainder stays with holders: a keeps outside its range", 8, []string{"a", "b", "c"}, "b b b c c c a a", "a",
				expectPlan{keep: []int{6, 7}, standbyRank: -1}},
			{"P6 b keeps all three", 8, []string{"a", "b", "c"}, "b b b c c c a a", "b", expectPlan{keep: []int{0, 1, 2}, standbyRank: -1}},
			{"P6 c keeps all three", 8, []string{"a", "b", "c"}, "b b b c c c a a", "c", expectPlan{keep: []int{3, 4, 5}, standbyRank: -1}},
			{"P7 incumbent keeps", 4, []string{"pod-m", "pod-n", "pod-o", "pod-p", "pod-q", "pod-a"}, "pod-m pod-n pod-o pod-p", "pod-n",
				expectPlan{keep: []int{1}, standbyRank: -1}},
			{"P7 joiner pod-a takes nothing", 4, []string{"pod-m", "pod-n", "pod-o", "pod-p", "pod-q", "pod-a"}, "pod-m pod-n pod-o pod-p", "pod-a",
				expectPlan{standbyRank: 0}},
			{"P7 joiner pod-q takes nothing", 4, []string{"pod-m", "pod-n", "pod-o", "pod-p", "pod-q", "pod-a"}, "pod-m pod-n pod-o pod-p", "pod-q",
				expectPlan{standbyRank: 1}},
			{"P8 freed bucket goes to the first standby", 4, []string{"pod-m", "pod-n", "pod-p", "pod-q", "pod-a"}, "pod-m pod-n - pod-p", "pod-a",
				expectPlan{claim: []int{2}, standbyRank: -1}},
			{"P8 second standby claims nothing", 4, []string{"pod-m", "pod-n", "pod-p", "pod-q", "pod-a"}, "pod-m pod-n - pod-p", "pod-q",
				expectPlan{standbyRank: 0}},
			{"P8 incumbent claims nothing", 4, []string{"pod-m", "pod-n", "pod-p", "pod-q", "pod-a"}, "pod-m pod-n - pod-p", "pod-m",
				expectPlan{keep: []int{0}, standbyRank: -1}},
			{"P11 own expired lease is kept", 4, []string{"a", "b"}, "a a* b dead*", "a", expectPlan{keep: []int{0, 1}, standbyRank: -1}},
			{"P11 foreign expired lease is free", 4, []string{"a", "b"}, "a a* b dead*", "b", expectPlan{keep: []int{2}, claim: []int{3}, standbyRank: -1}},
			{"P12 requester not yet visible is counted", 8, []string{"a"}, "a a a a - - - -", "b", expectPlan{claim: []int{4, 5, 6, 7}, standbyRank: -1}},
			{"live lease of a relay without heartbeat is not free", 4, []string{"a"}, "gone gone - -", "a", expectPlan{claim: []int{2, 3}, standbyRank: -1}},
			{"expired lease of a relay without heartbeat is free", 4, []string{"a"}, "gone* gone - -", "a", expectPlan{claim: []int{0, 2, 3}, standbyRank: -1}},
			{"under share claims its own range first", 8, []string{"a", "b"}, "- - - - - - - a", "a",
				expectPlan{keep: []int{7}, claim: []int{0, 1, 2}, standbyRank: -1}},
			{"over share releases outside the range first", 6, []string{"a", "b", "c"}, "a a a a - a", "a",
				expectPlan{keep: []int{0, 1}, release: []int{2, 3, 5}, standbyRank: -1}},
			{"standby that still owns a lease is not a standby", 2, []string{"a", "b", "c"}, "b c*", "a",
				expectPlan{claim: []int{1}, standbyRank: -1}},
			{"more relays than buckets: incumbent keeps one and hands back the rest", 2, []string{"a", "b", "c"}, "c c", "c",
				expectPlan{keep: []int{1}, release: []int{0}, standbyRank: -1}},
			{"joiner takes the remainder from nobody when an incumbent holds it", 5, []string{"a", "b"}, "b b b - -", "a",
				expectPlan{claim: []int{3, 4}, standbyRank: -1}},
		} {
			plan := mustPlan(t, c.n, c.active, c.requester, parseLeases(c.leases))
			checkPlan(t, c.name, plan, c.want)
		}
	})

	t.Run("P2ScaleOutJoinerRanksAfterIncumbent", func(t *testing.T) {
		t.Parallel()
		leases := parseLeases("a a a a a a a a")
		active := []string{"a", "b"}
		// Round 1: b sees shares 4/4 and nothing free: it writes no lease.
		p := mustPlan(t, 8, active, "b", leases)
		checkPlan(t, "round 1, b", p, expectPlan{standbyRank: -1})
		if !maps.Equal(p.Shares, map[string]int{"a": 4, "b": 4}) {
			t.Fatalf("round 1 shares %v", p.Shares)
		}
		applyPlan(t, leases, "b", p)
		// Round 2: a sees b and hands back b's range.
		p = mustPlan(t, 8, active, "a", leases)
		checkPlan(t, "round 2, a", p, expectPlan{keep: []int{0, 1, 2, 3}, release: []int{4, 5, 6, 7}, standbyRank: -1})
		applyPlan(t, leases, "a", p)
		// Round 3: b claims it.
		p = mustPlan(t, 8, active, "b", leases)
		checkPlan(t, "round 3, b", p, expectPlan{claim: []int{4, 5, 6, 7}, standbyRank: -1})
		applyPlan(t, leases, "b", p)
		p = mustPlan(t, 8, active, "a", leases)
		checkPlan(t, "settled, a", p, expectPlan{keep: []int{0, 1, 2, 3}, standbyRank: -1})
	})

	t.Run("P9SurplusIncumbent", func(t *testing.T) {
		t.Parallel()
		leases := parseLeases("c c")
		active := []string{"a", "b", "c"}
		p := mustPlan(t, 2, active, "c", leases)
		checkPlan(t, "c", p, expectPlan{keep: []int{1}, release: []int{0}, standbyRank: -1})
		// Before c's release lands, a and b find nothing free.
		checkPlan(t, "a before", mustPlan(t, 2, active, "a", leases), expectPlan{standbyRank: -1})
		checkPlan(t, "b before", mustPlan(t, 2, active, "b", leases), expectPlan{standbyRank: 0})
		applyPlan(t, leases, "c", p)
		pa := mustPlan(t, 2, active, "a", leases)
		checkPlan(t, "a after", pa, expectPlan{claim: []int{0}, standbyRank: -1})
		checkPlan(t, "b after", mustPlan(t, 2, active, "b", leases), expectPlan{standbyRank: 0})
		applyPlan(t, leases, "a", pa)
		checkPlan(t, "c settled", mustPlan(t, 2, active, "c", leases), expectPlan{keep: []int{1}, standbyRank: -1})
	})

	t.Run("P10MinimalMovementOnJoin", func(t *testing.T) {
		t.Parallel()
		leases := parseLeases("b b c c d d e f")
		active := []string{"a", "b", "c", "d", "e", "f"}
		releases := map[string][]int{}
		for round := 1; ; round++ {
			if round > 5 {
				t.Fatalf("no fair split after 5 rounds: %v", leases)
			}
			// Every relay reads the same state, then all write.
			plans := map[string]Plan{}
			for _, id := range active {
				plans[id] = mustPlan(t, 8, active, id, leases)
			}
			moved := false
			for _, id := range active {
				p := plans[id]
				releases[id] = append(releases[id], p.Release...)
				moved = moved || len(p.Release)+len(p.Claim) > 0
				applyPlan(t, leases, id, p)
			}
			if !moved {
				break
			}
		}
		total := 0
		for id, r := range releases {
			total += len(r)
			if id != "d" && len(r) > 0 {
				t.Errorf("%s released %v; only d should release", id, r)
			}
		}
		if total != 1 || len(releases["d"]) != 1 {
			t.Fatalf("releases %v; want exactly one bucket, by d", releases)
		}
		want := map[string]int{"a": 1, "b": 2, "c": 2, "d": 1, "e": 1, "f": 1}
		if got := ownedCounts(leases); !maps.Equal(got, want) {
			t.Fatalf("settled holdings %v, want %v", got, want)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name      string
			n         int
			active    []string
			requester string
			leases    []BucketLease
		}{
			{"fewer leases than buckets", 4, []string{"a"}, "a", parseLeases("a a a")},
			{"more leases than buckets", 2, []string{"a"}, "a", parseLeases("a a a")},
			{"zero buckets", 0, []string{"a"}, "a", nil},
			{"empty requester", 2, []string{"a"}, "", parseLeases("a a")},
			{"empty active id", 2, []string{"a", ""}, "a", parseLeases("a a")},
		} {
			if _, err := PlanLeases(c.n, c.active, c.requester, c.leases); !errors.Is(err, ErrMisconfigured) {
				t.Errorf("%s: err = %v, want ErrMisconfigured", c.name, err)
			}
		}
	})

	// GoldenVectors replays every case of
	// testdata/planner-vectors.json, computed by two independent
	// implementations of facts §8 and §10.3. A relay that plans differently from
	// its peers makes refused writes in a shared table.
	t.Run("GoldenVectors", func(t *testing.T) {
		t.Parallel()
		for i, c := range loadPlannerVectors(t) {
			p, err := PlanLeases(c.n, c.active, c.requester, c.leases)
			if err != nil {
				t.Errorf("case %d: %v", i, err)
				continue
			}
			what := fmt.Sprintf("case %d (n=%d, requester %s)", i, c.n, c.requester)
			checkPlan(t, what, p, expectPlan{c.want.Keep, c.want.Release, c.want.Claim, c.want.StandbyRank})
			if !maps.Equal(p.Shares, c.want.Shares) {
				t.Errorf("%s: shares %v, want %v", what, p.Shares, c.want.Shares)
			}
		}
	})

	// RelaysReadingTheSameStateAgree checks, over 3,000 random
	// fleets where every relay reads the same state (each with its own order of
	// the active list), the invariants that keep a fleet free of conflicting
	// writes.
	t.Run("RelaysReadingTheSameStateAgree", func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewSource(20260918))
		var claimsSeen, releasesSeen, orderMattered, agreed int
		for iter := range 3000 {
			n, fleet, leases := randomFleet(rng)
			claimedBy := map[int]string{}
			var shares map[string]int
			ownExpired := slices.ContainsFunc(leases, func(l BucketLease) bool { return l.Expired && slices.Contains(fleet, l.Owner) })
			for _, id := range fleet {
				active := slices.Clone(fleet)
				rng.Shuffle(len(active), func(i, j int) { active[i], active[j] = active[j], active[i] })
				p, err := PlanLeases(n, active, id, leases)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("fleet %d (n=%d, %d relays), relay %s", iter, n, len(fleet), id)
				sum := 0
				for _, s := range p.Shares {
					sum += s
				}
				if sum != n || len(p.Shares) != len(fleet) {
					t.Fatalf("%s: shares %v sum to %d over %d relays", what, p.Shares, sum, len(p.Shares))
				}
				// Shares agree unless a relay's own expired lease, which counts
				// as held only in its own view, tips a remainder.
				if shares == nil {
					shares = p.Shares
				} else if !ownExpired {
					if !maps.Equal(shares, p.Shares) {
						t.Fatalf("%s: shares %v disagree with a peer's %v", what, p.Shares, shares)
					}
					agreed++
				}
				// Claims: disjoint across relays, never a live lease of another.
				for _, b := range p.Claim {
					if other, ok := claimedBy[b]; ok {
						t.Fatalf("%s: claims bucket %d that %s also claims", what, b, other)
					}
					claimedBy[b] = id
					if l := leases[b]; l.Owner == id || (l.Owner != "" && !l.Expired) {
						t.Fatalf("%s: claims bucket %d leased to %q (expired %v)", what, b, l.Owner, l.Expired)
					}
				}
				claimsSeen += len(p.Claim)
				// Keep and Release split exactly the owned set.
				var owned []int
				for b, l := range leases {
					if l.Owner == id {
						owned = append(owned, b)
					}
				}
				both := slices.Sorted(slices.Values(append(slices.Clone(p.Keep), p.Release...)))
				if !slices.Equal(both, owned) {
					t.Fatalf("%s: keep %v + release %v != owned %v", what, p.Keep, p.Release, owned)
				}
				if want := min(len(owned), p.Shares[id]); len(p.Keep) != want {
					t.Fatalf("%s: keeps %d of %d owned with share %d", what, len(p.Keep), len(owned), p.Shares[id])
				}
				if len(p.Keep)+len(p.Claim) > p.Shares[id] {
					t.Fatalf("%s: keeps %d and claims %d over share %d", what, len(p.Keep), len(p.Claim), p.Shares[id])
				}
				// Over share: outside-range buckets go before inside-range ones.
				fs, err := FairShares(n, fleet, id, heldCounts(leases, id))
				if err != nil {
					t.Fatal(err)
				}
				start, end := fs.Range(id)
				inside := func(b int) bool { return b >= start && b < end }
				if slices.ContainsFunc(p.Release, inside) && slices.ContainsFunc(p.Keep, func(b int) bool { return !inside(b) }) {
					t.Fatalf("%s: releases inside %v while keeping outside %v (range [%d,%d))", what, p.Release, p.Keep, start, end)
				}
				if len(p.Release) > 0 && slices.ContainsFunc(owned, inside) && slices.ContainsFunc(owned, func(b int) bool { return !inside(b) }) {
					orderMattered++
				}
				releasesSeen += len(p.Release)
				if wantStandby := p.Shares[id] > 0 || len(owned) > 0; (p.StandbyRank == -1) != wantStandby {
					t.Fatalf("%s: standby rank %d with share %d and %d owned", what, p.StandbyRank, p.Shares[id], len(owned))
				}
			}
		}
		// Positive controls: the random fleets exercise claims and releases.
		if claimsSeen == 0 || releasesSeen == 0 || orderMattered == 0 || agreed == 0 {
			t.Fatalf("random fleets planned %d claims, %d releases, %d releases choosing between inside and outside buckets, %d share comparisons",
				claimsSeen, releasesSeen, orderMattered, agreed)
		}
		t.Logf("3000 fleets: %d claims, %d releases, %d plans releasing from an owned set straddling the range, %d share comparisons",
			claimsSeen, releasesSeen, orderMattered, agreed)
	})

	// FleetConverges iterates 2,000 random fleets round by round:
	// every relay reads the same state and plans, then the relays' conditional
	// writes (keep, release, claim, as the store sends them) land in a random
	// interleaving. No bucket is ever believed owned by two relays, and every
	// fleet settles with each relay holding exactly its share and writing
	// nothing but keeps. Refused writes happen only in the first round.
	t.Run("FleetConverges", func(t *testing.T) {
		t.Parallel()
		const leaseRounds = 3 // lease duration in rounds (30 s lease, 10 s rounds)
		rng := rand.New(rand.NewSource(3356))
		var maxRounds, refusedTotal int
		for iter := range 2000 {
			n, fleet, initial := randomFleet(rng)
			state := make([]simLease, n)
			for b, l := range initial {
				state[b] = simLease{owner: l.Owner, expires: 2 + rng.Intn(leaseRounds)}
				if l.Expired {
					state[b].expires = 0
				}
			}
			settled := 0
			for now := 1; ; now++ {
				if now > 12 {
					t.Fatalf("fleet %d (n=%d, %d relays) has not settled after 12 rounds: %v", iter, n, len(fleet), state)
				}
				seen := slices.Clone(state)
				read := make([]BucketLease, n)
				for b, l := range seen {
					read[b] = BucketLease{Owner: l.owner, Expired: l.owner != "" && l.expires <= now}
				}
				plans := make(map[string]Plan, len(fleet))
				for _, id := range fleet {
					p, err := PlanLeases(n, fleet, id, read)
					if err != nil {
						t.Fatal(err)
					}
					plans[id] = p
				}
				believed := map[int]string{}
				writes, refused := 0, 0
				for _, i := range rng.Perm(len(fleet)) {
					id := fleet[i]
					p := plans[id]
					for _, b := range p.Keep {
						if state[b].owner == id && state[b].expires == seen[b].expires && state[b].expires <= now+leaseRounds {
							state[b].expires = now + leaseRounds
							believed[b] = claimOnce(t, believed, b, id)
						} else {
							refused++
						}
					}
					for _, b := range p.Release {
						writes++
						if state[b].owner == id && state[b].expires == seen[b].expires {
							state[b] = simLease{expires: now}
						} else {
							refused++
						}
					}
					for _, b := range p.Claim {
						writes++
						if state[b].owner == "" || state[b].expires <= now {
							state[b] = simLease{owner: id, expires: now + leaseRounds}
							believed[b] = claimOnce(t, believed, b, id)
						} else {
							refused++
						}
					}
				}
				refusedTotal += refused
				// Only the first round can race: a relay keeping its own expired
				// lease while a peer claims it. From then on every relay renews
				// what it holds and the fleet agrees, so no write is refused.
				if now > 1 && refused > 0 {
					t.Fatalf("fleet %d round %d: %d refused writes after the first round", iter, now, refused)
				}
				if writes == 0 && refused == 0 && len(believed) == n {
					// A quiet round: check the split is the fair one.
					held := map[string]int{}
					for _, id := range believed {
						held[id]++
					}
					for id, share := range plans[fleet[0]].Shares {
						if held[id] != share {
							t.Fatalf("fleet %d settled with %s holding %d, share %d", iter, id, held[id], share)
						}
					}
					if settled++; settled == 2 {
						maxRounds = max(maxRounds, now)
						break
					}
				} else {
					settled = 0
				}
			}
		}
		if refusedTotal == 0 {
			t.Fatal("no first-round race in 2000 fleets: the simulation's conditional writes were never exercised")
		}
		t.Logf("2000 fleets settled within %d rounds; %d refused writes, all in first rounds (own expired lease kept while a peer claims it)", maxRounds, refusedTotal)
	})
}

func ownedCounts(leases []BucketLease) map[string]int {
	m := map[string]int{}
	for _, l := range leases {
		if l.Owner != "" {
			m[l.Owner]++
		}
	}
	return m
}

// randomFleet draws a fleet of 1-40 relays over 1-64 buckets with random
// holdings: free buckets, live and expired leases of fleet members, and live
// and expired leases of relays that have left.
func randomFleet(rng *rand.Rand) (n int, fleet []string, leases []BucketLease) {
	n = 1 + rng.Intn(64)
	size := 1 + rng.Intn(40)
	prefixes := []string{"relay-", "pod-", "fn-a1b2-", "r"}
	seen := map[string]bool{}
	for len(fleet) < size {
		id := fmt.Sprintf("%s%d", prefixes[rng.Intn(len(prefixes))], rng.Intn(100))
		if !seen[id] {
			seen[id] = true
			fleet = append(fleet, id)
		}
	}
	leases = make([]BucketLease, n)
	for b := range leases {
		switch x := rng.Intn(10); {
		case x < 3: // free
		case x < 8:
			leases[b].Owner = fleet[rng.Intn(len(fleet))]
		default:
			leases[b].Owner = fmt.Sprintf("gone-%d", rng.Intn(3))
		}
		leases[b].Expired = leases[b].Owner != "" && rng.Intn(4) == 0
	}
	return n, fleet, leases
}

// heldCounts counts leases the way PlanLeases does for requester: live
// leases of anyone plus requester's own expired ones.
func heldCounts(leases []BucketLease, requester string) map[string]int {
	held := map[string]int{}
	for _, l := range leases {
		if l.Owner != "" && (!l.Expired || l.Owner == requester) {
			held[l.Owner]++
		}
	}
	return held
}

// simLease is a lease item in the fleet simulation: owner and expiry in
// rounds, with DynamoDB's conditional-write semantics applied by the fleet.
type simLease struct {
	owner   string
	expires int
}

func claimOnce(t *testing.T, believed map[int]string, b int, id string) string {
	t.Helper()
	if other, ok := believed[b]; ok && other != id {
		t.Fatalf("bucket %d believed owned by %s and %s in one round", b, other, id)
	}
	return id
}

// loadJSON reads the shared test vectors of the repository's testdata.
func loadJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
