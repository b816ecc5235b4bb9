package outbox

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// TestLeaseKeeper steps the keeper's state machine (keeperCore) through
// scripts with literal times, as etcd raft's RawNode tests do: each step
// in (a write asks for a grant, starts or ends; the renewer takes its
// turn; a renewal answers), each effect out (a grant, a renewal to send or
// wait for, a loss, a wait); no goroutine, no clock. The default timings:
// a 30 s lease, 10 s rounds, a 10 s margin; the round at 0 installed
// buckets 2 and 5.
func TestLeaseKeeper(t *testing.T) {
	t.Parallel()
	s := time.Second
	setup := func(t *testing.T) *keeperCore {
		t.Helper()
		b := lease.NewBook(lease.Request{RelayID: "relay-a", BucketCount: 8, LeaseDuration: 30 * s, RenewInterval: 10 * s})
		b, _ = b.RoundStarted(at(0))
		return &keeperCore{book: b.Installed(at(0), lease.Acquisition{Owned: []int{2, 5}}), backoff: s, next: newRenewal()}
	}
	closed := func(r *renewal) bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	}
	noLoss := func(t *testing.T, step string, l loss) {
		t.Helper()
		if l.n != 0 {
			t.Fatalf("%s: lost %d buckets (%s), want none", step, l.n, l.reason)
		}
	}

	t.Run("GrantWhileHeld", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		g, ph, att, l := c.askGrant(5, at(4*s))
		noLoss(t, "ask at 4s", l)
		if ph != lease.PhaseHeld || att != nil || g.Bucket != 5 || g.Owner != "relay-a" || !g.ValidUntil.Equal(at(30*s)) || !g.Beyond.Equal(at(14*s)) {
			t.Fatalf("ask at 4s: %+v phase %d wait %v; want bucket 5 held until 30s, beyond 14s", g, ph, att)
		}
		if tr := c.renewerTurn(at(4 * s)); tr.renew != nil || tr.timed || tr.expired {
			t.Fatalf("renewer at 4s with no write: %+v, want a wait for a nudge", tr)
		}
		c.writes++ // the write runs
		if tr := c.renewerTurn(at(4 * s)); tr.renew != nil || !tr.timed || tr.wait != 6*s {
			t.Fatalf("renewer at 4s during the write: %+v, want to wait 6s (renewal due at 10s)", tr)
		}
	})

	t.Run("GrantRefusedForABucketNotHeld", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		g, ph, att, l := c.askGrant(3, at(1*s))
		noLoss(t, "ask for 3", l)
		if ph != lease.PhaseLost || att != nil || g != (lease.Grant{}) {
			t.Fatalf("ask for bucket 3: %+v phase %d, want refused", g, ph)
		}
		if !slices.Equal(c.book.Owned(), []int{2, 5}) {
			t.Fatalf("a refused grant changed the owned set: %v", c.book.Owned())
		}
	})

	t.Run("GrantWaitsForTheRenewalItAsked", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		// At 10 s the round is overdue: the write waits for a renewal.
		_, ph, att, l := c.askGrant(2, at(10*s))
		noLoss(t, "ask at 10s", l)
		if ph != lease.PhaseRenewalDue || att != c.next || c.waiting != 1 {
			t.Fatalf("ask at 10s: phase %d, attempt %p (next %p), waiting %d", ph, att, c.next, c.waiting)
		}
		tr := c.renewerTurn(at(10 * s))
		if tr.renew != att || c.running != att || c.next == att || !slices.Equal(tr.owned, []int{2, 5}) {
			t.Fatalf("renewer at 10s: %+v, want attempt %p renewing [2 5]", tr, att)
		}
		// The table accepts at 10.2 s what was sent at 10 s.
		l, err := c.answered(at(10*s), at(10200*time.Millisecond), true, nil)
		noLoss(t, "answer", l)
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		c.running, c.waiting = nil, 0 // the keeper closes the attempt; the grant stops waiting
		g, ph, _, _ := c.askGrant(2, at(10200*time.Millisecond))
		if ph != lease.PhaseHeld || !g.ValidUntil.Equal(at(40*s)) {
			t.Fatalf("ask again: %+v phase %d, want held until 40s (renewed at 10s)", g, ph)
		}
	})

	t.Run("NothingToRenewSendsWaitingGrantsBack", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		_, _, att, _ := c.askGrant(2, at(10*s))
		// The book changed before the renewer's turn: a round at 10 s
		// installed the set again, so nothing is due.
		c.book, _ = c.book.RoundStarted(at(10 * s))
		c.book = c.book.Installed(at(10*s), lease.Acquisition{Owned: []int{2, 5}})
		tr := c.renewerTurn(at(10 * s))
		if tr.renew != nil || !closed(att) || att.err != nil || c.next == att {
			t.Fatalf("renewer: %+v, attempt closed %v err %v; want the waiting grant sent back to look again", tr, closed(att), att.err)
		}
	})

	t.Run("RefusedRenewalLosesTheBook", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		c.writes++
		tr := c.renewerTurn(at(10 * s))
		if tr.renew == nil {
			t.Fatalf("renewer at 10s during a write: %+v, want a renewal", tr)
		}
		l, err := c.answered(at(10*s), at(10*s), false, nil)
		if !errors.Is(err, ErrLeaseLost) || l != (loss{LossRenewalRefused, 2}) {
			t.Fatalf("refused: %v, %+v; want ErrLeaseLost and both buckets lost", err, l)
		}
		if c.book.Phase(at(10*s)) != lease.PhaseLost || !c.book.RoundDue(at(10*s)) {
			t.Fatalf("after a refused renewal the book is %d with no round due", c.book.Phase(at(10*s)))
		}
	})

	t.Run("LateAnswerLosesTheBook", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		// Sent at 10 s, accepted, but answered at 31 s: nothing proves the
		// lease held between 30 and 31 s.
		l, err := c.answered(at(10*s), at(31*s), true, nil)
		if !errors.Is(err, ErrLeaseLost) || l != (loss{LossRenewalLate, 2}) {
			t.Fatalf("late answer: %v, %+v; want ErrLeaseLost and both buckets lost", err, l)
		}
	})

	t.Run("FailedRenewalBacksOff", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		c.writes++
		boom := errors.New("throttled")
		l, err := c.answered(at(10*s), at(10*s), false, boom)
		noLoss(t, "failure", l)
		if !errors.Is(err, boom) || c.book.Phase(at(10*s)) != lease.PhaseRenewalDue {
			t.Fatalf("failed renewal: %v, phase %d; want the error and the book as it was", err, c.book.Phase(at(10*s)))
		}
		if tr := c.renewerTurn(at(10500 * time.Millisecond)); tr.renew != nil || !tr.timed || tr.wait != 500*time.Millisecond {
			t.Fatalf("renewer at 10.5s: %+v, want to wait out the 1s backoff", tr)
		}
		if tr := c.renewerTurn(at(11 * s)); tr.renew == nil {
			t.Fatalf("renewer at 11s: %+v, want a renewal once the backoff passed", tr)
		}
	})

	t.Run("LeaseRunsOutDuringAWrite", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		c.writes++
		tr := c.renewerTurn(at(30 * s))
		if !tr.expired || tr.lost != (loss{LossPublishOutlasted, 2}) || tr.renew != nil {
			t.Fatalf("renewer at 30s during a write: %+v, want both buckets lost, publish outlasted", tr)
		}
		if tr := c.renewerTurn(at(30 * s)); tr.expired || tr.renew != nil || tr.wait != 0 {
			t.Fatalf("renewer again: %+v, want a wait for a nudge", tr)
		}
	})

	t.Run("FetchOutlastsTheLease", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		_, ph, att, l := c.askGrant(2, at(30*s))
		if ph != lease.PhaseExpired || att != nil || l != (loss{LossFetchOutlasted, 2}) {
			t.Fatalf("ask at 30s: phase %d, %+v; want refused, both buckets lost", ph, l)
		}
		if _, ph, _, l := c.askGrant(5, at(30*s)); ph != lease.PhaseLost || l.n != 0 {
			t.Fatalf("ask again: phase %d, %+v; want refused with nothing more lost", ph, l)
		}
	})

	t.Run("CheckSeesARoundThatOutlastedTheLease", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		owned, l, err := c.check(at(29 * s))
		if err != nil || !slices.Equal(owned, []int{2, 5}) {
			t.Fatalf("check at 29s: %v, %v", owned, err)
		}
		noLoss(t, "check at 29s", l)
		owned, l, err = c.check(at(30 * s))
		if !errors.Is(err, ErrLeaseLost) || owned != nil || l != (loss{LossAcquisitionOutlasted, 2}) {
			t.Fatalf("check at 30s: %v, %+v, %v", owned, l, err)
		}
	})
}
