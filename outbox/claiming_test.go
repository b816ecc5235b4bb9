package outbox

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
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
		leases  []LeaseState
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
		leases: []LeaseState{lease(0, "p", at(20*time.Second)), lease(1, "p", at(20*time.Second))},
		relays: []RelayState{beat("p", at(-5*time.Second))},
		hints:  all, want: []int{2, 3},
	}, {
		name: "a bucket released after the peer's heartbeat was not free in its read",
		leases: []LeaseState{lease(0, "p", at(20*time.Second)), lease(1, "p", at(20*time.Second)),
			lease(2, "", at(-200*ms))},
		relays: []RelayState{beat("p", at(-500*ms))},
		hints:  all, want: []int{2}, claimed: []int{3},
	}, {
		name: "the simulation gives the free bucket to a peer whose round is over",
		leases: []LeaseState{lease(0, "a", at(20*time.Second)), lease(1, "a", at(20*time.Second)),
			lease(2, "z", at(20*time.Second)), lease(3, "", at(-10*time.Second))},
		relays: []RelayState{beat("a", at(-300*ms)), beat("z", at(-5*time.Second))},
		hints:  []int{3}, want: []int{3},
	}, {
		name:   "a stopped peer covers nothing",
		leases: []LeaseState{lease(0, "p", at(20*time.Second))},
		relays: []RelayState{stopped("p", at(-100*ms))},
		hints:  all, want: all,
	}, {
		name:   "the relay's own lease is resumed, not left to the peer",
		leases: []LeaseState{lease(0, "me", at(20*time.Second))},
		relays: []RelayState{beat("p", at(-100*ms))},
		hints:  all, want: []int{0}, claimed: []int{1, 2, 3},
	}} {
		t.Run(c.name, func(t *testing.T) {
			coord := Coordination{Leases: c.leases, Relays: c.relays}
			req := LeaseRequest{RelayID: "me", BucketCount: 4, LeaseDuration: rl, RenewInterval: 10 * time.Second}
			got := coord.Uncovered(c.hints, req, rt)
			if !slices.Equal(got.Uncovered, c.want) || !slices.Equal(got.Claimed, c.claimed) {
				t.Errorf("uncovered %v claimed %v, want %v and %v", got.Uncovered, got.Claimed, c.want, c.claimed)
			}
		})
	}
}

// coverageStore is a Store that answers only the trust check's reads: a
// partial view (as a CoverageReader) and the whole one, counting each.
type coverageStore struct {
	Store
	partial, whole Coordination
	wholeOnly      bool // ReadCoverage returns the whole view
	coverageReads  int
	wholeReads     int
}

func (s *coverageStore) ReadCoverage(context.Context, []int) (Coordination, bool, error) {
	s.coverageReads++
	if s.wholeOnly {
		return s.whole, false, nil
	}
	return s.partial, true, nil
}

func (s *coverageStore) ReadCoordination(context.Context) (Coordination, error) {
	s.wholeReads++
	return s.whole, nil
}

// wholeStore is a Store without ReadCoverage.
type wholeStore struct {
	Store
	s *coverageStore
}

func (w wholeStore) ReadCoordination(ctx context.Context) (Coordination, error) {
	return w.s.ReadCoordination(ctx)
}

// fixedClock reads one instant.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// noWait runs fn in a synctest bubble and fails t if fn let the bubble's
// clock move: the trust check and the confirmation read, answered at once
// by a store, never wait.
func noWait(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fn(t)
		if took := time.Since(start); took != 0 {
			t.Errorf("waited %v, want no wait", took)
		}
	})
}

// TestReadUncovered settles the trust check on the partial view only when a
// live peer holds every checked bucket there, and otherwise gives the
// answer of the whole view, which the claiming rule needs.
func TestReadUncovered(t *testing.T) {
	noWait(t, func(t *testing.T) {
		ms := time.Millisecond
		clock := fixedClock(at(0))
		heldByP := LeaseState{Bucket: 5, Owner: "p", ExpiresAt: at(20 * time.Second)}
		mine := LeaseState{Bucket: 6, Owner: "me", ExpiresAt: at(20 * time.Second)}
		live := beat("p", at(-2*time.Second))
		// In the whole view bucket 7 is free and p's round, 500 ms old, is
		// claiming it: covered, though the partial view cannot tell.
		whole := Coordination{Leases: []LeaseState{heldByP, mine}, Relays: []RelayState{beat("p", at(-500*ms))}}
		for _, c := range []struct {
			name             string
			store            *coverageStore
			plain            bool // a store without ReadCoverage
			check            []int
			want, claimed    []int
			coverage, wholes int
		}{
			{name: "held by a live peer: the partial view settles it",
				store: &coverageStore{partial: Coordination{Leases: []LeaseState{heldByP}, Relays: []RelayState{live}}, whole: whole},
				check: []int{5}, coverage: 1},
			{name: "free in the partial view: the whole view, where p is claiming it",
				store: &coverageStore{partial: Coordination{Relays: []RelayState{live}}, whole: whole},
				check: []int{5, 7}, claimed: []int{7}, coverage: 1, wholes: 1},
			{name: "my own lease: resumed, after the whole view",
				store: &coverageStore{partial: Coordination{Leases: []LeaseState{mine}, Relays: []RelayState{live}}, whole: whole},
				check: []int{6}, want: []int{6}, coverage: 1, wholes: 1},
			{name: "the store read the whole partition at once",
				store: &coverageStore{whole: whole, wholeOnly: true},
				check: []int{6, 7}, want: []int{6}, claimed: []int{7}, coverage: 1},
			{name: "a store without ReadCoverage is read whole",
				store: &coverageStore{whole: whole}, plain: true,
				check: []int{5, 6, 7}, want: []int{6}, claimed: []int{7}, wholes: 1},
		} {
			var store Store = c.store
			if c.plain {
				store = wholeStore{s: c.store}
			}
			req := LeaseRequest{RelayID: "me", BucketCount: 8, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second}
			got, err := ReadUncovered(context.Background(), store, clock, req, c.check)
			if err != nil || !slices.Equal(got.Uncovered, c.want) || !slices.Equal(got.Claimed, c.claimed) {
				t.Errorf("%s: uncovered %v claimed %v, %v; want %v and %v", c.name, got.Uncovered, got.Claimed, err, c.want, c.claimed)
			}
			if c.store.coverageReads != c.coverage || c.store.wholeReads != c.wholes {
				t.Errorf("%s: %d coverage and %d whole reads, want %d and %d", c.name, c.store.coverageReads, c.store.wholeReads, c.coverage, c.wholes)
			}
		}
	})
}

// leaseStore is a Store that answers ConfirmClaims' read as a LeaseReader,
// counting its reads.
type leaseStore struct {
	Store
	leases []LeaseState
	reads  int
}

func (s *leaseStore) ReadLeases(_ context.Context, bs []int) ([]LeaseState, error) {
	s.reads++
	var out []LeaseState
	for _, l := range s.leases {
		if slices.Contains(bs, l.Bucket) {
			out = append(out, l)
		}
	}
	return out, nil
}

// TestConfirmClaims: the second read after ClaimWindow keeps a bucket a
// peer claimed meanwhile covered, and returns the ones still free — no
// lease, no owner, an expired lease, or the relay's own — with one read of
// their leases, or one whole read from a store that cannot read leases
// alone.
func TestConfirmClaims(t *testing.T) {
	noWait(t, func(t *testing.T) {
		s := time.Second
		leases := []LeaseState{
			lease(0, "p", at(30*s)), // claimed by the peer meanwhile
			lease(1, "", at(-s)),    // released, still free
			lease(2, "p", at(0)),    // expired at now
			lease(3, "me", at(20*s)),
		}
		want := []int{1, 2, 3, 4}
		ls := &leaseStore{leases: leases}
		got, err := ConfirmClaims(context.Background(), ls, fixedClock(rt), "me", []int{0, 1, 2, 3, 4})
		if err != nil || !slices.Equal(got, want) || ls.reads != 1 {
			t.Errorf("lease reader: still free %v, %v after %d reads; want %v after 1", got, err, ls.reads, want)
		}
		whole := &coverageStore{whole: Coordination{Leases: leases}}
		got, err = ConfirmClaims(context.Background(), wholeStore{s: whole}, fixedClock(rt), "me", []int{0, 1, 2, 3, 4})
		if err != nil || !slices.Equal(got, want) || whole.wholeReads != 1 {
			t.Errorf("whole read: still free %v, %v after %d reads; want %v after 1", got, err, whole.wholeReads, want)
		}
		if got, err := ConfirmClaims(context.Background(), ls, fixedClock(rt), "me", nil); got != nil || err != nil || ls.reads != 1 {
			t.Errorf("nothing to confirm: %v, %v after %d reads; want no read", got, err, ls.reads)
		}
	})
}

// TestReadUnheld: without the claiming inference, a free bucket a peer's
// fresh round would claim is unheld, read from the partial view alone.
func TestReadUnheld(t *testing.T) {
	noWait(t, func(t *testing.T) {
		ms := time.Millisecond
		view := Coordination{Leases: []LeaseState{lease(5, "p", at(20*time.Second))}, Relays: []RelayState{beat("p", at(-500*ms))}}
		store := &coverageStore{partial: view, whole: view}
		req := LeaseRequest{RelayID: "me", BucketCount: 8, LeaseDuration: rl, RenewInterval: 10 * time.Second}
		got, err := ReadUnheld(context.Background(), store, fixedClock(rt), req, []int{5, 7})
		if err != nil || !slices.Equal(got, []int{7}) || store.coverageReads != 1 || store.wholeReads != 0 {
			t.Errorf("unheld %v, %v after %d partial and %d whole reads; want [7] after one partial", got, err, store.coverageReads, store.wholeReads)
		}
	})
}
