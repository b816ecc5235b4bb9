package outbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// leaseKeeper owns a relay's lease book. The run's loop installs rounds;
// every write of a bucket (publish, delete, park, replay) asks for a grant
// at the moment it starts; and one goroutine per run, the renewer, renews
// the leases whenever a write waits for a grant or runs while they come
// due. What it decides is keeperCore's, a state machine stepped under the
// keeper's lock: no lock is held across a request, and every wait for a
// renewal is a channel receive, durable in a testing/synctest bubble.
type leaseKeeper struct {
	clock Clock
	// onLost reports n buckets the relay stopped trusting, and why.
	onLost func(reason LossReason, n int)
	kick   chan struct{}

	mu   sync.Mutex
	core keeperCore
}

func newLeaseKeeper(clock Clock, book lease.Book, backoff time.Duration, onLost func(LossReason, int)) *leaseKeeper {
	return &leaseKeeper{clock: clock, onLost: onLost, kick: make(chan struct{}, 1),
		core: keeperCore{book: book, backoff: backoff, next: newRenewal()}}
}

// step runs fn, which must not block, on the core, and reports the loss it
// returns once the lock is released.
func (k *leaseKeeper) step(fn func(c *keeperCore) loss) {
	k.mu.Lock()
	l := fn(&k.core)
	k.mu.Unlock()
	k.report(l)
}

func (k *leaseKeeper) report(l loss) {
	if l.n > 0 {
		k.onLost(l.reason, l.n)
	}
}

// snapshot returns the book as it is now; its owned slice is never
// changed in place, so the copy is safe to read.
func (k *leaseKeeper) snapshot() (b lease.Book) {
	k.step(func(c *keeperCore) loss { b = c.book; return loss{} })
	return b
}

// owned returns a copy of the owned set.
func (k *leaseKeeper) owned() []int { return slices.Clone(k.snapshot().Owned()) }

// apply runs a transition on the book.
func (k *leaseKeeper) apply(t func(lease.Book) lease.Book) {
	k.step(func(c *keeperCore) loss { c.book = t(c.book); return loss{} })
}

// loseBucket drops one bucket the table says the relay no longer holds
// (a write refused for its lease) and makes the next cycle run a round.
func (k *leaseKeeper) loseBucket(bucket int, reason LossReason) {
	k.step(func(c *keeperCore) loss {
		return c.transition(func(b lease.Book) lease.Book { return b.Without(bucket) }, reason)
	})
}

// check is the cycle's look at the book before it drains: the owned set,
// or ErrLeaseLost when the round that installed it outlasted the lease.
func (k *leaseKeeper) check(now time.Time) (owned []int, err error) {
	k.step(func(c *keeperCore) (l loss) { owned, l, err = c.check(now); return l })
	return owned, err
}

// grant returns the permit for a write of bucket starting now. When only
// the margin is left it waits for the renewer first; a bucket the book does
// not hold with margin is refused with ErrLeaseLost before anything is
// sent, and a renewal that failed fails the grant with its error.
func (k *leaseKeeper) grant(ctx context.Context, bucket int) (lease.Grant, error) {
	for {
		var g lease.Grant
		var ph lease.Phase
		var att *renewal
		k.step(func(c *keeperCore) (l loss) { g, ph, att, l = c.askGrant(bucket, k.clock.Now()); return l })
		switch ph {
		case lease.PhaseHeld:
			return g, nil
		case lease.PhaseRenewalDue:
		default:
			return lease.Grant{}, errCycle(fmt.Sprintf("grant bucket %d", bucket), ErrLeaseLost)
		}
		k.nudge()
		select {
		case <-att.done:
		case <-ctx.Done():
		}
		k.step(func(c *keeperCore) loss { c.waiting--; return loss{} })
		if err := ctx.Err(); err != nil {
			return lease.Grant{}, err
		}
		if att.err != nil {
			return lease.Grant{}, att.err
		}
	}
}

// during runs a write that holds a grant — a publish, a delete or a park,
// any of which can take longer than the lease under throttling — while
// the renewer renews whenever the leases come due. It returns once the
// write and any renewal that started during it have ended, so no renewal
// outlives the writes of a sweep.
func (k *leaseKeeper) during(write func()) {
	k.step(func(c *keeperCore) loss { c.writes++; return loss{} })
	k.nudge()
	write()
	var running chan struct{}
	k.step(func(c *keeperCore) loss {
		c.writes--
		if c.running != nil {
			running = c.running.done
		}
		return loss{}
	})
	if running != nil {
		<-running
	}
}

func (k *leaseKeeper) nudge() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// renewer is the one goroutine that renews, until ctx ends. renew extends
// the leases of the given buckets; false means at least one was refused.
func (k *leaseKeeper) renewer(ctx context.Context, renew func(context.Context, []int) (bool, error)) {
	for {
		var t turn
		k.step(func(c *keeperCore) loss { t = c.renewerTurn(k.clock.Now()); return t.lost })
		switch {
		case t.renew != nil:
			err := ErrLeaseLost
			if len(t.owned) > 0 {
				start := k.clock.Now()
				ok, rerr := renew(ctx, t.owned)
				k.step(func(c *keeperCore) (l loss) { l, err = c.answered(start, k.clock.Now(), ok, rerr); return l })
			}
			k.step(func(c *keeperCore) loss { c.running = nil; return loss{} })
			t.renew.err = err
			close(t.renew.done)
		case t.expired:
		case !k.sleep(ctx, t.timed, t.wait):
			return
		}
	}
}

// sleep waits for a nudge, for wait when timed, or for ctx; false when ctx
// ended.
func (k *leaseKeeper) sleep(ctx context.Context, timed bool, wait time.Duration) bool {
	var timer <-chan time.Time
	if timed && wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-k.kick:
	case <-timer:
	case <-ctx.Done():
		return false
	}
	return true
}
