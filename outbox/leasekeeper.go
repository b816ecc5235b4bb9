package outbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// leaseKeeper owns a relay's lease book. The run's loop installs rounds;
// every write of a bucket (publish, delete, park, replay) asks for a grant
// at the moment it starts; and one goroutine per run, the renewer, renews
// the leases whenever a write waits for a grant or runs while they come
// due. Its mutex guards only the book and the counts, and is never held
// across a request: every wait for a renewal is a channel receive, durable
// in a testing/synctest bubble.
type leaseKeeper struct {
	clock Clock
	// backoff is how long renewals during a write pause after one failed.
	backoff time.Duration
	// onLost reports n buckets the relay stopped trusting, and why.
	onLost func(reason LossReason, n int)

	mu      sync.Mutex
	book    leaseBook
	writes  int // writes in flight
	waiting int // grants waiting for a renewal
	// next is the renewal attempt that grants asking now wait for;
	// running is the attempt in flight, nil when none.
	next, running *renewal
	kick          chan struct{}
}

// renewal is one attempt of the renewer; done closes when it ended, and
// err is its outcome then (nil: renewed, or nothing was due).
type renewal struct {
	done chan struct{}
	err  error
}

func newRenewal() *renewal { return &renewal{done: make(chan struct{})} }

func newLeaseKeeper(clock Clock, book leaseBook, backoff time.Duration, onLost func(LossReason, int)) *leaseKeeper {
	return &leaseKeeper{clock: clock, book: book, backoff: backoff, onLost: onLost,
		next: newRenewal(), kick: make(chan struct{}, 1)}
}

// snapshot returns the book as it is now; its owned slice is never
// changed in place, so the copy is safe to read.
func (k *leaseKeeper) snapshot() leaseBook {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.book
}

// owned returns a copy of the owned set.
func (k *leaseKeeper) owned() []int { return slices.Clone(k.snapshot().owned) }

// apply runs a transition on the book.
func (k *leaseKeeper) apply(t func(leaseBook) leaseBook) {
	k.mu.Lock()
	k.book = t(k.book)
	k.mu.Unlock()
}

// lose drops the owned set for reason (leaseBook.lost) and reports it.
func (k *leaseKeeper) lose(reason LossReason) {
	k.mu.Lock()
	n := len(k.book.owned)
	k.book = k.book.lost()
	k.mu.Unlock()
	if n > 0 {
		k.onLost(reason, n)
	}
}

// loseBucket drops one bucket the table says the relay no longer holds
// (a write refused for its lease) and makes the next cycle run a round.
func (k *leaseKeeper) loseBucket(bucket int, reason LossReason) {
	k.mu.Lock()
	held := slices.Contains(k.book.owned, bucket)
	k.book = k.book.without(bucket)
	k.mu.Unlock()
	if held {
		k.onLost(reason, 1)
	}
}

// check is the cycle's look at the book before it drains: the owned set,
// or ErrLeaseLost when the round that installed it outlasted the lease.
func (k *leaseKeeper) check(now time.Time) ([]int, error) {
	b := k.snapshot()
	if len(b.owned) == 0 {
		return nil, nil
	}
	if ph := b.phase(now); ph == phaseExpired || ph == phaseLost {
		k.lose(LossAcquisitionOutlasted)
		return nil, ErrLeaseLost
	}
	return slices.Clone(b.owned), nil
}

// grant returns the permit for a write of bucket starting now. When only
// the margin is left it waits for the renewer first; a bucket the book does
// not hold with margin is refused with ErrLeaseLost before anything is
// sent, and a renewal that failed fails the grant with its error.
func (k *leaseKeeper) grant(ctx context.Context, bucket int) (leaseGrant, error) {
	for {
		k.mu.Lock()
		g, ph := k.book.grant(bucket, k.clock.Now())
		switch ph {
		case phaseHeld:
			k.mu.Unlock()
			return g, nil
		case phaseRenewalDue:
		default:
			n := 0
			if ph == phaseExpired {
				n = len(k.book.owned)
				k.book = k.book.lost()
			}
			k.mu.Unlock()
			if n > 0 {
				k.onLost(LossFetchOutlasted, n)
			}
			return leaseGrant{}, errCycle(fmt.Sprintf("grant bucket %d", bucket), ErrLeaseLost)
		}
		att := k.next
		k.waiting++
		k.mu.Unlock()
		k.nudge()
		select {
		case <-att.done:
		case <-ctx.Done():
		}
		k.mu.Lock()
		k.waiting--
		k.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return leaseGrant{}, err
		}
		if att.err != nil {
			return leaseGrant{}, att.err
		}
	}
}

// during runs a write that holds a grant — a publish, a delete or a park,
// any of which can take longer than the lease under throttling — while
// the renewer renews whenever the leases come due. It returns once the
// write and any renewal that started during it have ended, so no renewal
// outlives the writes of a sweep.
func (k *leaseKeeper) during(write func()) {
	k.mu.Lock()
	k.writes++
	k.mu.Unlock()
	k.nudge()
	write()
	k.mu.Lock()
	k.writes--
	var running chan struct{}
	if k.running != nil {
		running = k.running.done
	}
	k.mu.Unlock()
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
		now := k.clock.Now()
		k.mu.Lock()
		b := k.book
		ph := b.phase(now)
		wait, renewNow := b.renewalWait(now, k.backoff)
		// A grant waits for this renewal: no backoff then, as before a
		// write the relay renews or does not write at all.
		renewNow = renewNow && k.writes > 0 || ph == phaseRenewalDue && k.waiting > 0
		expired := ph == phaseExpired && k.writes > 0
		if !renewNow && k.waiting > 0 {
			// Nothing to renew: the waiting grants look again.
			close(k.next.done)
			k.next = newRenewal()
		}
		att := k.next
		if renewNow {
			k.running, k.next = att, newRenewal()
		}
		writing := k.writes > 0
		k.mu.Unlock()
		switch {
		case expired:
			k.lose(LossPublishOutlasted)
			continue
		case renewNow:
			att.err = k.renewOnce(ctx, b.owned, renew)
			k.mu.Lock()
			k.running = nil
			k.mu.Unlock()
			close(att.done)
			continue
		}
		if !k.sleep(ctx, writing, wait) {
			return
		}
	}
}

// sleep waits for a nudge, for wait while a write runs, or for ctx; false
// when ctx ended.
func (k *leaseKeeper) sleep(ctx context.Context, writing bool, wait time.Duration) bool {
	var timer <-chan time.Time
	if writing && wait > 0 {
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

// renewOnce sends one renewal of owned and applies its outcome.
func (k *leaseKeeper) renewOnce(ctx context.Context, owned []int, renew func(context.Context, []int) (bool, error)) error {
	if len(owned) == 0 {
		return ErrLeaseLost
	}
	start := k.clock.Now()
	ok, err := renew(ctx, owned)
	if err != nil {
		k.apply(func(b leaseBook) leaseBook { return b.renewFailed(start) })
		return errCycle("renew leases", err)
	}
	if !ok {
		k.lose(LossRenewalRefused)
		return ErrLeaseLost
	}
	k.mu.Lock()
	b, ok := k.book.renewed(start, k.clock.Now())
	n := len(k.book.owned)
	k.book = b
	k.mu.Unlock()
	if !ok {
		if n > 0 {
			k.onLost(LossRenewalLate, n)
		}
		return ErrLeaseLost
	}
	return nil
}
