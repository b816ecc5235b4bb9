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
// due. Its state changes only inside locked, whose functions compute and
// never block: no lock is held across a request, and every wait for a
// renewal is a channel receive, durable in a testing/synctest bubble.
type leaseKeeper struct {
	clock Clock
	// backoff is how long renewals during a write pause after one failed.
	backoff time.Duration
	// onLost reports n buckets the relay stopped trusting, and why.
	onLost func(reason LossReason, n int)
	kick   chan struct{}

	mu sync.Mutex
	st keeperState
}

// keeperState is what the keeper's lock guards.
type keeperState struct {
	book    leaseBook
	writes  int // writes in flight
	waiting int // grants waiting for a renewal
	// next is the renewal attempt that grants asking now wait for;
	// running is the attempt in flight, nil when none.
	next, running *renewal
}

// locked runs fn, which must not block, on the keeper's state.
func (k *leaseKeeper) locked(fn func(st *keeperState)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	fn(&k.st)
}

// renewal is one attempt of the renewer; done closes when it ended, and
// err is its outcome then (nil: renewed, or nothing was due).
type renewal struct {
	done chan struct{}
	err  error
}

func newRenewal() *renewal { return &renewal{done: make(chan struct{})} }

func newLeaseKeeper(clock Clock, book leaseBook, backoff time.Duration, onLost func(LossReason, int)) *leaseKeeper {
	return &leaseKeeper{clock: clock, backoff: backoff, onLost: onLost, kick: make(chan struct{}, 1),
		st: keeperState{book: book, next: newRenewal()}}
}

// snapshot returns the book as it is now; its owned slice is never
// changed in place, so the copy is safe to read.
func (k *leaseKeeper) snapshot() (b leaseBook) {
	k.locked(func(st *keeperState) { b = st.book })
	return b
}

// owned returns a copy of the owned set.
func (k *leaseKeeper) owned() []int { return slices.Clone(k.snapshot().owned) }

// apply runs a transition on the book.
func (k *leaseKeeper) apply(t func(leaseBook) leaseBook) {
	k.locked(func(st *keeperState) { st.book = t(st.book) })
}

// transition runs t on the book and reports the buckets it dropped.
func (k *leaseKeeper) transition(t func(leaseBook) leaseBook) (dropped int) {
	k.locked(func(st *keeperState) {
		before := st.book.owned
		st.book = t(st.book)
		for _, b := range before {
			if !slices.Contains(st.book.owned, b) {
				dropped++
			}
		}
	})
	return dropped
}

// lose drops the owned set for reason (leaseBook.lost) and reports it.
func (k *leaseKeeper) lose(reason LossReason) {
	if n := k.transition(leaseBook.lost); n > 0 {
		k.onLost(reason, n)
	}
}

// loseBucket drops one bucket the table says the relay no longer holds
// (a write refused for its lease) and makes the next cycle run a round.
func (k *leaseKeeper) loseBucket(bucket int, reason LossReason) {
	if n := k.transition(func(b leaseBook) leaseBook { return b.without(bucket) }); n > 0 {
		k.onLost(reason, n)
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
		var g leaseGrant
		var ph leasePhase
		var att *renewal
		k.locked(func(st *keeperState) {
			g, ph = st.book.grant(bucket, k.clock.Now())
			if ph == phaseRenewalDue {
				att = st.next
				st.waiting++
			}
		})
		switch ph {
		case phaseHeld:
			return g, nil
		case phaseExpired:
			k.lose(LossFetchOutlasted)
			fallthrough
		default:
			return leaseGrant{}, errCycle(fmt.Sprintf("grant bucket %d", bucket), ErrLeaseLost)
		case phaseRenewalDue:
		}
		k.nudge()
		select {
		case <-att.done:
		case <-ctx.Done():
		}
		k.locked(func(st *keeperState) { st.waiting-- })
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
	k.locked(func(st *keeperState) { st.writes++ })
	k.nudge()
	write()
	var running chan struct{}
	k.locked(func(st *keeperState) {
		st.writes--
		if st.running != nil {
			running = st.running.done
		}
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
		var (
			owned                      []int
			wait                       time.Duration
			renewNow, expired, writing bool
			att                        *renewal
		)
		k.locked(func(st *keeperState) {
			now := k.clock.Now()
			ph := st.book.phase(now)
			wait, renewNow = st.book.renewalWait(now, k.backoff)
			// A grant waits for this renewal: no backoff then, as before a
			// write the relay renews or does not write at all.
			renewNow = renewNow && st.writes > 0 || ph == phaseRenewalDue && st.waiting > 0
			expired = ph == phaseExpired && st.writes > 0
			if !renewNow && st.waiting > 0 {
				// Nothing to renew: the waiting grants look again.
				close(st.next.done)
				st.next = newRenewal()
			}
			if renewNow {
				att = st.next
				st.running, st.next = att, newRenewal()
			}
			owned, writing = st.book.owned, st.writes > 0
		})
		switch {
		case expired:
			k.lose(LossPublishOutlasted)
		case renewNow:
			att.err = k.renewOnce(ctx, owned, renew)
			k.locked(func(st *keeperState) { st.running = nil })
			close(att.done)
		case !k.sleep(ctx, writing, wait):
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
	late := false
	n := k.transition(func(b leaseBook) leaseBook {
		b, ok := b.renewed(start, k.clock.Now())
		late = !ok
		return b
	})
	if late {
		if n > 0 {
			k.onLost(LossRenewalLate, n)
		}
		return ErrLeaseLost
	}
	return nil
}
