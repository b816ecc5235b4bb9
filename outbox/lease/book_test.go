package lease

import (
	"context"
	"slices"
	"testing"
	"time"
)

// bookAt is a book with the default timings (30 s lease, 10 s rounds,
// 10 s margin) whose last round started at acquiredAt and whose owned set
// is trusted from ref.
func bookAt(ref, acquiredAt time.Time, owned ...int) Book {
	return Book{timing: timing{lease: 30 * time.Second, interval: 10 * time.Second, margin: 10 * time.Second},
		owner: "relay-a", owned: owned, at: ref, acquiredAt: acquiredAt, attempted: true}
}

func TestBook(t *testing.T) {
	// PhasesAndGrants: a write of an owned bucket is granted
	// while more than the margin is left and the round is not overdue; from
	// then on the relay renews first; from a lease duration on, and for a
	// bucket it does not own, the write is refused before it is sent.
	t.Run("PhasesAndGrants", func(t *testing.T) {
		s := time.Second
		for _, c := range []struct {
			name   string
			book   Book
			bucket int
			now    time.Time
			want   Phase
			until  time.Time
		}{
			{"never attempted", Book{}, 0, at(0), PhaseUnattempted, time.Time{}},
			{"round at 0, write at 0", bookAt(at(0), at(0), 0, 1), 1, at(0), PhaseHeld, at(30 * s)},
			{"round at 0, write at 9.999", bookAt(at(0), at(0), 0, 1), 1, at(9999 * time.Millisecond), PhaseHeld, at(30 * s)},
			{"round at 0, write at 10: round overdue", bookAt(at(0), at(0), 0, 1), 1, at(10 * s), PhaseRenewalDue, at(30 * s)},
			{"round at 10 left a lease kept at 0, write at 19", bookAt(at(0), at(10*s), 0), 0, at(19 * s), PhaseHeld, at(30 * s)},
			{"round at 10 left a lease kept at 0, write at 20: margin", bookAt(at(0), at(10*s), 0), 0, at(20 * s), PhaseRenewalDue, at(30 * s)},
			{"renewed at 25, write at 34", bookAt(at(25*s), at(10*s), 0), 0, at(34 * s), PhaseHeld, at(55 * s)},
			{"round at 0, write at 30", bookAt(at(0), at(0), 0), 0, at(30 * s), PhaseExpired, time.Time{}},
			{"bucket not owned", bookAt(at(0), at(0), 0), 3, at(1 * s), PhaseLost, time.Time{}},
			{"lost", bookAt(at(0), at(0), 0).Lost(), 0, at(1 * s), PhaseLost, time.Time{}},
		} {
			g, ph := c.book.Grant(c.bucket, c.now)
			if ph != c.want || !g.ValidUntil.Equal(c.until) {
				t.Errorf("%s: phase %d, valid until %v; want %d, %v", c.name, ph, g.ValidUntil, c.want, c.until)
			}
			if ph == PhaseHeld {
				if g.Owner != "relay-a" || g.Bucket != c.bucket || !g.Beyond.Equal(c.now.Add(10*s)) {
					t.Errorf("%s: grant %+v, want relay-a's bucket %d beyond now + 10s", c.name, g, c.bucket)
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
		if !b.RoundDue(at(0)) || b.Phase(at(0)) != PhaseUnattempted {
			t.Fatalf("a fresh book: round due %v, phase %d", b.RoundDue(at(0)), b.Phase(at(0)))
		}
		b, expired := b.RoundStarted(at(0))
		if expired || b.RoundDue(at(0)) || b.UntilRound(at(4*s)) != 6*s {
			t.Fatalf("round started at 0: expired %v, due in %v at 4s", expired, b.UntilRound(at(4*s)))
		}
		settled := settledRound(t, "relay-a", at(0))
		b = b.Installed(at(0), Acquisition{Owned: []int{2, 5}, Settled: settled})
		if b.Phase(at(1*s)) != PhaseHeld || !slices.Equal(b.owned, []int{2, 5}) || !b.settled.IsSettled() {
			t.Fatalf("installed: %+v", b)
		}
		// A round that left a lease unrenewed dates the reference back to its
		// stored expiry less a lease: written at -5 s, it lasts until 25 s.
		u := b.Installed(at(0), Acquisition{Owned: []int{2}, Unrenewed: []int{2}, UnrenewedExpiry: at(25 * s)})
		if !u.at.Equal(at(-5 * s)) {
			t.Fatalf("unrenewed reference %v, want -5s", u.at.Sub(rt))
		}
		b, ok := b.Renewed(at(8*s), at(9*s))
		if !ok || !b.at.Equal(at(8*s)) || b.settled.IsSettled() {
			t.Fatalf("renewed at 8: ok %v, reference %v, settled %+v", ok, b.at.Sub(rt), b.settled)
		}
		if f := b.RenewFailed(at(20 * s)); !f.at.Equal(at(8*s)) || !f.renewErrAt.Equal(at(20*s)) {
			t.Fatalf("failed renewal moved the reference: %+v", f)
		}
		if late, ok := b.Renewed(at(20*s), at(38*s)); ok || late.Phase(at(38*s)) != PhaseLost || !late.RoundDue(at(38*s)) {
			t.Fatalf("renewal answered at 38 after a reference of 8: ok %v, phase %d", ok, late.Phase(at(38*s)))
		}
		w := b.Without(5)
		if !slices.Equal(w.owned, []int{2}) || !w.RoundDue(at(9*s)) || !slices.Equal(b.owned, []int{2, 5}) {
			t.Fatalf("without 5: %v (before %v), round due %v", w.owned, b.owned, w.RoundDue(at(9*s)))
		}
		if _, expired := b.RoundStarted(at(38 * s)); !expired {
			t.Fatalf("a round at 38 after a reference of 8 does not see the leases expired")
		}
		r := b.Released()
		if r.attempted || r.owned != nil || r.owner != "relay-a" || r.timing != b.timing {
			t.Fatalf("released: %+v", r)
		}
	})

	// NewBookMargins: a relay that keeps ahead starts a write with at least
	// KeepMargin left (10 s with the defaults); one that keeps every round
	// with LeaseDuration − RenewInterval (20 s).
	t.Run("NewBookMargins", func(t *testing.T) {
		s := time.Second
		req := Request{RelayID: "relay-a", BucketCount: 8, LeaseDuration: 30 * s, RenewInterval: 10 * s}
		for _, c := range []struct {
			name   string
			every  bool
			margin time.Duration
		}{{"keeps ahead", false, 10 * s}, {"keeps every round", true, 20 * s}} {
			req.KeepEveryRound = c.every
			b := NewBook(req)
			if b.Attempted() || b.Owned() != nil || !b.RoundDue(at(0)) {
				t.Fatalf("%s: a new book %+v is not empty with a round due", c.name, b)
			}
			b, _ = b.RoundStarted(at(0))
			g, ph := b.Installed(at(0), Acquisition{Owned: []int{3}}).Grant(3, at(1*s))
			if ph != PhaseHeld || !g.Beyond.Equal(at(s+c.margin)) || !g.ValidUntil.Equal(at(30*s)) {
				t.Errorf("%s: grant %+v (phase %d), want beyond 1s + %v, valid until 30s", c.name, g, ph, c.margin)
			}
		}
	})

	// RefusedAndStopping: a round the configuration refused keeps the owned
	// set and takes the round's standby and settled states; a relay that
	// starts to release is no standby any more; a failed round trusts
	// nothing.
	t.Run("RefusedAndStopping", func(t *testing.T) {
		s := time.Second
		b := bookAt(at(0), at(0), 1, 2)
		b.standby = Standby{relayID: "relay-a", rank: 9}
		r := b.Refused(Acquisition{Settled: settledRound(t, "relay-a", at(0))})
		if !slices.Equal(r.Owned(), []int{1, 2}) || r.standby.Distant() || !r.settled.IsSettled() || r.Phase(at(1*s)) != PhaseHeld {
			t.Fatalf("refused: %+v", r)
		}
		if st := b.Stopping(); st.standby.Distant() || !slices.Equal(st.Owned(), []int{1, 2}) {
			t.Fatalf("stopping: %+v", st)
		}
		if f := b.RoundFailed(Acquisition{}); f.Phase(at(1*s)) != PhaseLost || !f.RoundDue(at(1*s)) || f.standby.Distant() {
			t.Fatalf("failed round: %+v", f)
		}
		if rs := b.RoundState(4); rs.Round != 4 || rs.Standby != b.standby {
			t.Fatalf("round state %+v", rs)
		}
	})

	// RenewalWait: during a write the renewer waits until the
	// renewal is due (at most half the lease left), renews then, and after a
	// failed renewal pauses the error backoff, at most half the lease left.
	t.Run("RenewalWait", func(t *testing.T) {
		s := time.Second
		for _, c := range []struct {
			name     string
			book     Book
			now      time.Time
			wait     time.Duration
			renewNow bool
		}{
			{"round at 0, at 2", bookAt(at(0), at(0), 0), at(2 * s), 8 * s, false},
			{"round at 0, at 10", bookAt(at(0), at(0), 0), at(10 * s), 0, true},
			{"failed at 10, at 10.5", func() Book { b := bookAt(at(0), at(0), 0); b.renewErrAt = at(10 * s); return b }(), at(10500 * time.Millisecond), 500 * time.Millisecond, false},
			{"failed at 10, at 11", func() Book { b := bookAt(at(0), at(0), 0); b.renewErrAt = at(10 * s); return b }(), at(11 * s), 0, true},
			{"failed at 29, at 29.2: pause half of the 0.8 s left", func() Book { b := bookAt(at(0), at(0), 0); b.renewErrAt = at(29 * s); return b }(), at(29200 * time.Millisecond), 200 * time.Millisecond, false},
			{"expired", bookAt(at(0), at(0), 0), at(30 * s), 0, false},
			{"nothing trusted", bookAt(time.Time{}, at(0)), at(1 * s), 0, false},
		} {
			wait, now := c.book.RenewalWait(c.now, time.Second)
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

func (s soleIO) Heartbeats(context.Context) ([]RelayState, error) {
	return []RelayState{{RelayID: s.relay, LastSeen: s.now}}, nil
}

func (s soleIO) Snapshot(ctx context.Context) (Coordination, error) {
	relays, _ := s.Heartbeats(ctx)
	c := Coordination{ReadAt: s.now, Relays: relays}
	for b := range s.buckets {
		c.Leases = append(c.Leases, State{Bucket: b, Owner: s.relay, ExpiresAt: s.expires})
	}
	return c, nil
}

func (s soleIO) WriteLeases(_ context.Context, _ string, _ Op, ws []Write) (accepted, refused []int, err error) {
	for _, w := range ws {
		accepted = append(accepted, w.Bucket)
	}
	return accepted, nil, nil
}

func (s soleIO) Prune(context.Context, string, PruneWrite) int { return 0 }

// settledRound runs a round of relay, alone in its fleet and holding every
// bucket, at now, and returns the settled state it leaves.
func settledRound(t *testing.T, relay string, now time.Time) Settled {
	t.Helper()
	req := Request{RelayID: relay, BucketCount: 8, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second}
	io := soleIO{relay: relay, buckets: 8, now: now, expires: now.Add(5 * time.Second)}
	acq, err := AcquireRound(context.Background(), io, nil, now, req, RoundState{})
	if err != nil || !acq.Settled.IsSettled() {
		t.Fatalf("a round of a fleet of one holding everything: %+v, %v; want it settled", acq, err)
	}
	return acq.Settled
}
