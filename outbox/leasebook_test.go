package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// bookAt is a book with the default timings (30 s lease, 10 s rounds,
// 10 s margin) whose last round started at acquiredAt and whose owned set
// is trusted from ref.
func bookAt(ref, acquiredAt time.Time, owned ...int) leaseBook {
	return leaseBook{timing: leaseTiming{lease: 30 * time.Second, interval: 10 * time.Second, margin: 10 * time.Second},
		owner: "relay-a", owned: owned, at: ref, acquiredAt: acquiredAt, attempted: true}
}

func TestLeaseBook(t *testing.T) {
	// PhasesAndGrants: a write of an owned bucket is granted
	// while more than the margin is left and the round is not overdue; from
	// then on the relay renews first; from a lease duration on, and for a
	// bucket it does not own, the write is refused before it is sent.
	t.Run("PhasesAndGrants", func(t *testing.T) {
		s := time.Second
		for _, c := range []struct {
			name   string
			book   leaseBook
			bucket int
			now    time.Time
			want   leasePhase
			until  time.Time
		}{
			{"never attempted", leaseBook{}, 0, at(0), phaseUnattempted, time.Time{}},
			{"round at 0, write at 0", bookAt(at(0), at(0), 0, 1), 1, at(0), phaseHeld, at(30 * s)},
			{"round at 0, write at 9.999", bookAt(at(0), at(0), 0, 1), 1, at(9999 * time.Millisecond), phaseHeld, at(30 * s)},
			{"round at 0, write at 10: round overdue", bookAt(at(0), at(0), 0, 1), 1, at(10 * s), phaseRenewalDue, at(30 * s)},
			{"round at 10 left a lease kept at 0, write at 19", bookAt(at(0), at(10*s), 0), 0, at(19 * s), phaseHeld, at(30 * s)},
			{"round at 10 left a lease kept at 0, write at 20: margin", bookAt(at(0), at(10*s), 0), 0, at(20 * s), phaseRenewalDue, at(30 * s)},
			{"renewed at 25, write at 34", bookAt(at(25*s), at(10*s), 0), 0, at(34 * s), phaseHeld, at(55 * s)},
			{"round at 0, write at 30", bookAt(at(0), at(0), 0), 0, at(30 * s), phaseExpired, time.Time{}},
			{"bucket not owned", bookAt(at(0), at(0), 0), 3, at(1 * s), phaseLost, time.Time{}},
			{"lost", bookAt(at(0), at(0), 0).lost(), 0, at(1 * s), phaseLost, time.Time{}},
		} {
			g, ph := c.book.grant(c.bucket, c.now)
			if ph != c.want || !g.validUntil.Equal(c.until) {
				t.Errorf("%s: phase %d, valid until %v; want %d, %v", c.name, ph, g.validUntil, c.want, c.until)
			}
			if ph == phaseHeld {
				if chk := g.check(); chk.Owner != "relay-a" || !chk.Beyond.Equal(c.now.Add(10*s)) {
					t.Errorf("%s: lease check %+v, want relay-a beyond now + 10s", c.name, chk)
				}
			}
		}
	})

	// Transitions walks a book through a run: a round installs
	// the owned set, a renewal moves the reference, a renewal answered after
	// the lease ran out loses it, a refused write drops one bucket and forces
	// a round, and the release forgets everything.
	t.Run("Transitions", func(t *testing.T) {
		s := time.Second
		b := bookAt(time.Time{}, time.Time{})
		b.attempted = false
		if !b.roundDue(at(0)) || b.phase(at(0)) != phaseUnattempted {
			t.Fatalf("a fresh book: round due %v, phase %d", b.roundDue(at(0)), b.phase(at(0)))
		}
		b, expired := b.roundStarted(at(0))
		if expired || b.roundDue(at(0)) || b.untilRound(at(4*s)) != 6*s {
			t.Fatalf("round started at 0: expired %v, due in %v at 4s", expired, b.untilRound(at(4*s)))
		}
		settled := settledRound(t, "relay-a", at(0))
		b = b.installed(at(0), lease.Acquisition{Owned: []int{2, 5}, Settled: settled})
		if b.phase(at(1*s)) != phaseHeld || !slices.Equal(b.owned, []int{2, 5}) || !b.settled.IsSettled() {
			t.Fatalf("installed: %+v", b)
		}
		// A round that left a lease unrenewed dates the reference back to its
		// stored expiry less a lease: written at -5 s, it lasts until 25 s.
		u := b.installed(at(0), lease.Acquisition{Owned: []int{2}, Unrenewed: []int{2}, UnrenewedExpiry: at(25 * s)})
		if !u.at.Equal(at(-5 * s)) {
			t.Fatalf("unrenewed reference %v, want -5s", u.at.Sub(rt))
		}
		b, ok := b.renewed(at(8*s), at(9*s))
		if !ok || !b.at.Equal(at(8*s)) || b.settled.IsSettled() {
			t.Fatalf("renewed at 8: ok %v, reference %v, settled %+v", ok, b.at.Sub(rt), b.settled)
		}
		if f := b.renewFailed(at(20 * s)); !f.at.Equal(at(8*s)) || !f.renewErrAt.Equal(at(20*s)) {
			t.Fatalf("failed renewal moved the reference: %+v", f)
		}
		if late, ok := b.renewed(at(20*s), at(38*s)); ok || late.phase(at(38*s)) != phaseLost || !late.roundDue(at(38*s)) {
			t.Fatalf("renewal answered at 38 after a reference of 8: ok %v, phase %d", ok, late.phase(at(38*s)))
		}
		w := b.without(5)
		if !slices.Equal(w.owned, []int{2}) || !w.roundDue(at(9*s)) || !slices.Equal(b.owned, []int{2, 5}) {
			t.Fatalf("without 5: %v (before %v), round due %v", w.owned, b.owned, w.roundDue(at(9*s)))
		}
		if _, expired := b.roundStarted(at(38 * s)); !expired {
			t.Fatalf("a round at 38 after a reference of 8 does not see the leases expired")
		}
		r := b.released()
		if r.attempted || r.owned != nil || r.owner != "relay-a" || r.timing != b.timing {
			t.Fatalf("released: %+v", r)
		}
	})

	// RenewalWait: during a write the renewer waits until the
	// renewal is due (at most half the lease left), renews then, and after a
	// failed renewal pauses the error backoff, at most half the lease left.
	t.Run("RenewalWait", func(t *testing.T) {
		s := time.Second
		for _, c := range []struct {
			name     string
			book     leaseBook
			now      time.Time
			wait     time.Duration
			renewNow bool
		}{
			{"round at 0, at 2", bookAt(at(0), at(0), 0), at(2 * s), 8 * s, false},
			{"round at 0, at 10", bookAt(at(0), at(0), 0), at(10 * s), 0, true},
			{"failed at 10, at 10.5", func() leaseBook { b := bookAt(at(0), at(0), 0); b.renewErrAt = at(10 * s); return b }(), at(10500 * time.Millisecond), 500 * time.Millisecond, false},
			{"failed at 10, at 11", func() leaseBook { b := bookAt(at(0), at(0), 0); b.renewErrAt = at(10 * s); return b }(), at(11 * s), 0, true},
			{"failed at 29, at 29.2: pause half of the 0.8 s left", func() leaseBook { b := bookAt(at(0), at(0), 0); b.renewErrAt = at(29 * s); return b }(), at(29200 * time.Millisecond), 200 * time.Millisecond, false},
			{"expired", bookAt(at(0), at(0), 0), at(30 * s), 0, false},
			{"nothing trusted", bookAt(time.Time{}, at(0)), at(1 * s), 0, false},
		} {
			wait, now := c.book.renewalWait(c.now, time.Second)
			if wait != c.wait || now != c.renewNow {
				t.Errorf("%s: wait %v renew now %v; want %v %v", c.name, wait, now, c.wait, c.renewNow)
			}
		}
	})
}

// soleIO is the lease round's IO of a fleet of one relay holding every
// bucket, whose leases last until expires: a round over it leaves the
// fleet settled.
type soleIO struct {
	relay        string
	buckets      int
	now, expires time.Time
}

func (s soleIO) Heartbeat(context.Context, string, time.Time, bool) (bool, error) { return true, nil }

func (s soleIO) Heartbeats(context.Context) ([]lease.RelayState, error) {
	return []lease.RelayState{{RelayID: s.relay, LastSeen: s.now}}, nil
}

func (s soleIO) Snapshot(ctx context.Context) (lease.Coordination, error) {
	relays, _ := s.Heartbeats(ctx)
	c := lease.Coordination{ReadAt: s.now, Relays: relays}
	for b := range s.buckets {
		c.Leases = append(c.Leases, lease.State{Bucket: b, Owner: s.relay, ExpiresAt: s.expires})
	}
	return c, nil
}

func (s soleIO) WriteLeases(_ context.Context, _ string, _ lease.Op, ws []lease.Write) (accepted, refused []int, err error) {
	for _, w := range ws {
		accepted = append(accepted, w.Bucket)
	}
	return accepted, nil, nil
}

func (s soleIO) Prune(context.Context, string, lease.PruneWrite) int { return 0 }

// settledRound runs a round of relay, alone in its fleet and holding every
// bucket, at now, and returns the settled state it leaves.
func settledRound(t *testing.T, relay string, now time.Time) lease.Settled {
	t.Helper()
	req := lease.Request{RelayID: relay, BucketCount: 8, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second}
	io := soleIO{relay: relay, buckets: 8, now: now, expires: now.Add(5 * time.Second)}
	acq, err := lease.AcquireRound(context.Background(), io, nil, now, req, lease.RoundState{})
	if err != nil || !acq.Settled.IsSettled() {
		t.Fatalf("a round of a fleet of one holding everything: %+v, %v; want it settled", acq, err)
	}
	return acq.Settled
}
