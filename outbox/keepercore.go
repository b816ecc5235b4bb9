package outbox

import (
	"slices"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// keeperCore is what the lease keeper decides, as a state machine: steps
// in (a write asks for a grant, starts or ends; the renewer takes its
// turn; a renewal answers; the cycle looks at the book), effects out (a
// grant, a renewal to send or to wait for, a loss to report, a wait). It
// has no goroutine, no lock and no clock: the keeper steps it under its
// lock with the clock's reading, and its tests step it with literal times
// (etcd raft's RawNode and Node).
type keeperCore struct {
	book lease.Book
	// backoff is how long renewals during a write pause after one failed.
	backoff time.Duration
	writes  int // writes in flight
	waiting int // grants waiting for a renewal
	// next is the renewal attempt that grants asking now wait for;
	// running is the attempt in flight, nil when none.
	next, running *renewal
}

// renewal is one attempt of the renewer; done closes when it ended, and
// err is its outcome then (nil: renewed, or nothing was due).
type renewal struct {
	done chan struct{}
	err  error
}

func newRenewal() *renewal { return &renewal{done: make(chan struct{})} }

// loss is an effect: n buckets the relay stopped trusting, and why; none
// when n is 0.
type loss struct {
	reason LossReason
	n      int
}

// transition runs t on the book; the buckets it dropped are lost for
// reason.
func (c *keeperCore) transition(t func(lease.Book) lease.Book, reason LossReason) loss {
	before := c.book.Owned()
	c.book = t(c.book)
	l := loss{reason: reason}
	for _, b := range before {
		if !slices.Contains(c.book.Owned(), b) {
			l.n++
		}
	}
	return l
}

// check is the cycle's look at the book at now: the owned set, or
// ErrLeaseLost and the loss when the round that installed it outlasted the
// lease.
func (c *keeperCore) check(now time.Time) ([]int, loss, error) {
	owned := c.book.Owned()
	if len(owned) == 0 {
		return nil, loss{}, nil
	}
	if ph := c.book.Phase(now); ph == lease.PhaseExpired || ph == lease.PhaseLost {
		return nil, c.transition(lease.Book.Lost, LossAcquisitionOutlasted), ErrLeaseLost
	}
	return slices.Clone(owned), loss{}, nil
}

// askGrant is a write of bucket asking for its grant at now: the grant
// (PhaseHeld); a renewal to wait for, which the grant then counts as
// waiting (PhaseRenewalDue); or a refusal (any other phase), with the loss
// of the whole book when the lease ran out while the write was prepared.
func (c *keeperCore) askGrant(bucket int, now time.Time) (lease.Grant, lease.Phase, *renewal, loss) {
	g, ph := c.book.Grant(bucket, now)
	switch ph {
	case lease.PhaseRenewalDue:
		c.waiting++
		return g, ph, c.next, loss{}
	case lease.PhaseExpired:
		return g, ph, nil, c.transition(lease.Book.Lost, LossFetchOutlasted)
	}
	return g, ph, nil, loss{}
}

// turn is the renewer's next action: renew owned now as attempt renew;
// or, when the lease ran out during a write (expired), drop the book
// (lost) and look again; or wait for a nudge, and for wait too when timed
// (a write runs).
type turn struct {
	renew   *renewal
	owned   []int
	expired bool
	lost    loss
	wait    time.Duration
	timed   bool
}

// renewerTurn is the renewer's look at the book at now. It renews when a
// write runs and the renewal is due (after a failed one, once the backoff
// passed), or at once when a grant waits for it; with nothing to renew,
// the grants waiting look again.
func (c *keeperCore) renewerTurn(now time.Time) turn {
	ph := c.book.Phase(now)
	wait, renewNow := c.book.RenewalWait(now, c.backoff)
	// A grant waits for this renewal: no backoff then, as before a write
	// the relay renews or does not write at all.
	renewNow = renewNow && c.writes > 0 || ph == lease.PhaseRenewalDue && c.waiting > 0
	if !renewNow && c.waiting > 0 {
		// Nothing to renew: the waiting grants look again.
		close(c.next.done)
		c.next = newRenewal()
	}
	switch {
	case ph == lease.PhaseExpired && c.writes > 0:
		return turn{expired: true, lost: c.transition(lease.Book.Lost, LossPublishOutlasted)}
	case renewNow:
		att := c.next
		c.running, c.next = att, newRenewal()
		return turn{renew: att, owned: c.book.Owned()}
	}
	return turn{wait: wait, timed: c.writes > 0}
}

// answered applies the answer, at now, of the renewal that started at
// start: ok, or refused, or err. It returns the loss to report and the
// attempt's outcome: a refused renewal loses the book, and so does one
// answered after the trusted lease ran out; a renewal that failed without
// an answer leaves the book as it was, and renewals during a write back off.
func (c *keeperCore) answered(start, now time.Time, ok bool, err error) (loss, error) {
	switch {
	case err != nil:
		c.book = c.book.RenewFailed(start)
		return loss{}, errCycle("renew leases", err)
	case !ok:
		return c.transition(lease.Book.Lost, LossRenewalRefused), ErrLeaseLost
	}
	late := false
	l := c.transition(func(b lease.Book) lease.Book {
		b, ok := b.Renewed(start, now)
		late = !ok
		return b
	}, LossRenewalLate)
	if late {
		return l, ErrLeaseLost
	}
	return loss{}, nil
}
