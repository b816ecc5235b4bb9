package lease

import (
	"slices"
	"testing"
	"time"
)

// TestCoordinationUncovered walks the trust check's rule with literal
// times: a hinted bucket is covered while a live peer holds it, or
// (claimed) while a peer whose round started less than ClaimWindow ago,
// after the bucket became free, is claiming it by the shared claim
// simulation, unless the peer's heartbeat is dated beyond the skew limit
// (10 s with the default timings).
func TestCoordinationUncovered(t *testing.T) {
	ms := time.Millisecond
	all := []int{0, 1, 2, 3}
	for _, c := range []struct {
		name    string
		leases  []State
		relays  []RelayState
		hints   []int
		want    []int
		claimed []int
	}{{
		name:   "fresh table, a peer's round started half a second ago: it is claiming every bucket",
		relays: []RelayState{beat("p", at(-500*ms))},
		hints:  all, claimed: all,
	}, {
		name:   "a peer's heartbeat 10 s ahead, within the skew limit: it is claiming every bucket",
		relays: []RelayState{beat("p", at(10*time.Second))},
		hints:  all, claimed: all,
	}, {
		name:   "a peer's heartbeat more than 10 s ahead, beyond the skew limit: no claim is taken from it",
		relays: []RelayState{beat("p", at(10*time.Second+ms))},
		hints:  all, want: all,
	}, {
		name:   "the peer's heartbeat is a claim window old: its round is over",
		relays: []RelayState{beat("p", at(-time.Second))},
		hints:  all, want: all,
	}, {
		name:  "no peer at all",
		hints: all, want: all,
	}, {
		name:   "held by a live peer; the free buckets are nobody's round's",
		leases: []State{lease(0, "p", at(20*time.Second)), lease(1, "p", at(20*time.Second))},
		relays: []RelayState{beat("p", at(-5*time.Second))},
		hints:  all, want: []int{2, 3},
	}, {
		name: "a bucket released after the peer's heartbeat was not free in its read",
		leases: []State{lease(0, "p", at(20*time.Second)), lease(1, "p", at(20*time.Second)),
			lease(2, "", at(-200*ms))},
		relays: []RelayState{beat("p", at(-500*ms))},
		hints:  all, want: []int{2}, claimed: []int{3},
	}, {
		name: "the simulation gives the free bucket to a peer whose round is over",
		leases: []State{lease(0, "a", at(20*time.Second)), lease(1, "a", at(20*time.Second)),
			lease(2, "z", at(20*time.Second)), lease(3, "", at(-10*time.Second))},
		relays: []RelayState{beat("a", at(-300*ms)), beat("z", at(-5*time.Second))},
		hints:  []int{3}, want: []int{3},
	}, {
		name:   "a stopped peer covers nothing",
		leases: []State{lease(0, "p", at(20*time.Second))},
		relays: []RelayState{stopped("p", at(-100*ms))},
		hints:  all, want: all,
	}, {
		name:   "the relay's own lease is resumed, not left to the peer",
		leases: []State{lease(0, "me", at(20*time.Second))},
		relays: []RelayState{beat("p", at(-100*ms))},
		hints:  all, want: []int{0}, claimed: []int{1, 2, 3},
	}} {
		t.Run(c.name, func(t *testing.T) {
			coord := Coordination{Leases: c.leases, Relays: c.relays}
			req := Request{RelayID: "me", BucketCount: 4, LeaseDuration: rl, RenewInterval: 10 * time.Second}
			got := coord.Uncovered(c.hints, req, rt)
			if !slices.Equal(got.Uncovered, c.want) || !slices.Equal(got.Claimed, c.claimed) {
				t.Errorf("uncovered %v claimed %v, want %v and %v", got.Uncovered, got.Claimed, c.want, c.claimed)
			}
		})
	}
}
