package outbox

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// Literal times of the trust checks' tables: the check runs at rt, leases
// last 30 s.
var rt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const rl = 30 * time.Second

func at(d time.Duration) time.Time { return rt.Add(d) }

func leaseOf(b int, owner string, expires time.Time) lease.State {
	return lease.State{Bucket: b, Owner: owner, ExpiresAt: expires}
}

func beat(id string, seen time.Time) lease.RelayState {
	return lease.RelayState{RelayID: id, LastSeen: seen}
}

// coverageStore is a Store that answers only the trust check's reads: a
// partial view (as a CoverageReader) and the whole one, counting each.
type coverageStore struct {
	Store
	partial, whole lease.Coordination
	wholeOnly      bool // ReadCoverage returns the whole view
	coverageReads  int
	wholeReads     int
}

func (s *coverageStore) ReadCoverage(context.Context, []int) (lease.Coordination, bool, error) {
	s.coverageReads++
	if s.wholeOnly {
		return s.whole, false, nil
	}
	return s.partial, true, nil
}

func (s *coverageStore) ReadCoordination(context.Context) (lease.Coordination, error) {
	s.wholeReads++
	return s.whole, nil
}

// wholeStore is a Store without ReadCoverage.
type wholeStore struct {
	Store
	s *coverageStore
}

func (w wholeStore) ReadCoordination(ctx context.Context) (lease.Coordination, error) {
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

func TestClaiming(t *testing.T) {
	// ReadUncovered settles the trust check on the partial view only when a
	// live peer holds every checked bucket there, and otherwise gives the
	// answer of the whole view, which the claiming rule needs.
	t.Run("ReadUncovered", func(t *testing.T) {
		noWait(t, func(t *testing.T) {
			ms := time.Millisecond
			clock := fixedClock(at(0))
			heldByP := lease.State{Bucket: 5, Owner: "p", ExpiresAt: at(20 * time.Second)}
			mine := lease.State{Bucket: 6, Owner: "me", ExpiresAt: at(20 * time.Second)}
			live := beat("p", at(-2*time.Second))
			// In the whole view bucket 7 is free and p's round, 500 ms old, is
			// claiming it: covered, though the partial view cannot tell.
			whole := lease.Coordination{Leases: []lease.State{heldByP, mine}, Relays: []lease.RelayState{beat("p", at(-500*ms))}}
			for _, c := range []struct {
				name             string
				store            *coverageStore
				plain            bool // a store without ReadCoverage
				check            []int
				want, claimed    []int
				coverage, wholes int
			}{
				{name: "held by a live peer: the partial view settles it",
					store: &coverageStore{partial: lease.Coordination{Leases: []lease.State{heldByP}, Relays: []lease.RelayState{live}}, whole: whole},
					check: []int{5}, coverage: 1},
				{name: "free in the partial view: the whole view, where p is claiming it",
					store: &coverageStore{partial: lease.Coordination{Relays: []lease.RelayState{live}}, whole: whole},
					check: []int{5, 7}, claimed: []int{7}, coverage: 1, wholes: 1},
				{name: "my own lease: resumed, after the whole view",
					store: &coverageStore{partial: lease.Coordination{Leases: []lease.State{mine}, Relays: []lease.RelayState{live}}, whole: whole},
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
				req := lease.Request{RelayID: "me", BucketCount: 8, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second}
				got, err := readUncovered(context.Background(), store, clock, req, c.check)
				if err != nil || !slices.Equal(got.Uncovered, c.want) || !slices.Equal(got.Claimed, c.claimed) {
					t.Errorf("%s: uncovered %v claimed %v, %v; want %v and %v", c.name, got.Uncovered, got.Claimed, err, c.want, c.claimed)
				}
				if c.store.coverageReads != c.coverage || c.store.wholeReads != c.wholes {
					t.Errorf("%s: %d coverage and %d whole reads, want %d and %d", c.name, c.store.coverageReads, c.store.wholeReads, c.coverage, c.wholes)
				}
			}
		})
	})

	// ConfirmClaims: the second read after ClaimWindow keeps a bucket a
	// peer claimed meanwhile covered, and returns the ones still free — no
	// lease, no owner, an expired lease, or the relay's own — with one read of
	// their leases, or one whole read from a store that cannot read leases
	// alone.
	t.Run("ConfirmClaims", func(t *testing.T) {
		noWait(t, func(t *testing.T) {
			s := time.Second
			leases := []lease.State{
				leaseOf(0, "p", at(30*s)), // claimed by the peer meanwhile
				leaseOf(1, "", at(-s)),    // released, still free
				leaseOf(2, "p", at(0)),    // expired at now
				leaseOf(3, "me", at(20*s)),
			}
			want := []int{1, 2, 3, 4}
			ls := &leaseStore{leases: leases}
			got, err := confirmClaims(context.Background(), ls, fixedClock(rt), "me", []int{0, 1, 2, 3, 4})
			if err != nil || !slices.Equal(got, want) || ls.reads != 1 {
				t.Errorf("lease reader: still free %v, %v after %d reads; want %v after 1", got, err, ls.reads, want)
			}
			whole := &coverageStore{whole: lease.Coordination{Leases: leases}}
			got, err = confirmClaims(context.Background(), wholeStore{s: whole}, fixedClock(rt), "me", []int{0, 1, 2, 3, 4})
			if err != nil || !slices.Equal(got, want) || whole.wholeReads != 1 {
				t.Errorf("whole read: still free %v, %v after %d reads; want %v after 1", got, err, whole.wholeReads, want)
			}
			if got, err := confirmClaims(context.Background(), ls, fixedClock(rt), "me", nil); got != nil || err != nil || ls.reads != 1 {
				t.Errorf("nothing to confirm: %v, %v after %d reads; want no read", got, err, ls.reads)
			}
		})
	})

	// ReadUnheld: without the claiming inference, a free bucket a peer's
	// fresh round would claim is unheld, read from the partial view alone.
	t.Run("ReadUnheld", func(t *testing.T) {
		noWait(t, func(t *testing.T) {
			ms := time.Millisecond
			view := lease.Coordination{Leases: []lease.State{leaseOf(5, "p", at(20*time.Second))}, Relays: []lease.RelayState{beat("p", at(-500*ms))}}
			store := &coverageStore{partial: view, whole: view}
			req := lease.Request{RelayID: "me", BucketCount: 8, LeaseDuration: rl, RenewInterval: 10 * time.Second}
			got, err := readUnheld(context.Background(), store, fixedClock(rt), req, []int{5, 7})
			if err != nil || !slices.Equal(got, []int{7}) || store.coverageReads != 1 || store.wholeReads != 0 {
				t.Errorf("unheld %v, %v after %d partial and %d whole reads; want [7] after one partial", got, err, store.coverageReads, store.wholeReads)
			}
		})
	})
}

// leaseStore is a Store that answers confirmClaims' read as a LeaseReader,
// counting its reads.
type leaseStore struct {
	Store
	leases []lease.State
	reads  int
}

func (s *leaseStore) ReadLeases(_ context.Context, bs []int) ([]lease.State, error) {
	s.reads++
	var out []lease.State
	for _, l := range s.leases {
		if slices.Contains(bs, l.Bucket) {
			out = append(out, l)
		}
	}
	return out, nil
}
