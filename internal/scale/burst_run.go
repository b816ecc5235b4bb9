package scale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// BurstReport is what a burst measured; durations are simulated time from
// the first commit.
type BurstReport struct {
	Config BurstConfig `json:"config"`
	// WakeUps were sent (a commit's, a stopping relay's for buckets that
	// got commits while it released them, the schedule's sweeps); they
	// started Invocations. Throttled counts deliveries refused for the
	// reserved concurrency, which Lambda retries with a growing delay.
	WakeUps     int `json:"wakeUps"`
	Invocations int `json:"invocations"`
	Throttled   int `json:"throttled"`
	// PeerLive invocations exited after a trust check found their buckets
	// held or being claimed by a live peer; NothingPending ones found
	// their uncovered buckets drained already (the relay's look at the
	// head of each, for a wake-up); Joined joined the fleet.
	PeerLive       int `json:"peerLive"`
	NothingPending int `json:"nothingPending"`
	Joined         int `json:"joined"`
	// ClaimChecks counts the trust checks that left every uncovered bucket
	// to a peer whose round seemed to be claiming it and so read those
	// buckets' leases again after outbox.ClaimWindow (one strongly
	// consistent Query per bucket, or of every lease on a small table).
	ClaimChecks int `json:"claimChecks"`
	// Rounds, Claims, Releases (by rounds and by stops) and Lost leases.
	Rounds   int `json:"rounds"`
	Claims   int `json:"claims"`
	Releases int `json:"releases"`
	Lost     int `json:"lost"`
	// Refused conditional writes over the run, and those after every
	// bucket first had an owner.
	Refused           int `json:"refused"`
	RefusedAfterOwned int `json:"refusedAfterOwned"`
	// AllOwnedAfter is when every bucket first had an owner; MaxPublishWait
	// the longest a commit waited for its bucket to be owned and polled;
	// LastStopAfter when the last relay stopped.
	AllOwnedAfter  time.Duration `json:"allOwnedAfterNanos"`
	MaxPublishWait time.Duration `json:"maxPublishWaitNanos"`
	LastStopAfter  time.Duration `json:"lastStopAfterNanos"`
	// LeftOwned counts leases still naming a relay after the last stop;
	// Unpublished the commits no relay published.
	LeftOwned   int `json:"leftOwned"`
	Unpublished int `json:"unpublished"`
	// Capacity units on the coordination partition: totals, the busiest
	// simulated second and the mean over the run.
	ReadUnits      float64        `json:"readUnits"`
	WriteUnits     float64        `json:"writeUnits"`
	PeakReadUnits  float64        `json:"peakReadUnits"`
	PeakWriteUnits float64        `json:"peakWriteUnits"`
	Requests       map[string]int `json:"requests"`
}

// RunBurst simulates cfg's burst until the fleet has scaled back to
// nothing.
func RunBurst(ctx context.Context, cfg BurstConfig) (BurstReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return BurstReport{}, err
	}
	be, err := newBackend(ctx, Config{Backend: cfg.Backend})
	if err != nil {
		return BurstReport{}, err
	}
	defer be.close()
	clock := outboxlocal.NewManualClock(start)
	b := &burst{cfg: cfg, ctx: ctx, table: be.table(), rng: rand.New(rand.NewPCG(cfg.Seed, 0xb0257)),
		pending: make([]int, cfg.Buckets), oldest: make([]time.Time, cfg.Buckets), owners: make([]string, cfg.Buckets)}
	b.rep.Config = cfg
	b.s = newStepper(clock, be, b.charge)
	b.client = b.s.client(be.client(), cfg.Latency, cfg.Latency/time.Duration(cfg.StoreParallel))
	for range cfg.Commits {
		at := start.Add(time.Duration(b.rng.Int64N(int64(cfg.Window))))
		bucket := b.rng.IntN(cfg.Buckets)
		b.s.spawn(at, func() { b.commit(bucket) })
	}
	b.s.spawn(start.Add(time.Duration(b.rng.Int64N(int64(time.Minute)))), b.schedule)
	b.s.run(start.Add(burstRunLimit))
	if len(b.errs) > 0 {
		return b.rep, errors.Join(b.errs...)
	}
	if b.running > 0 {
		return b.rep, fmt.Errorf("scale: %d relays still running after %v", b.running, burstRunLimit)
	}
	total := be.tally()
	b.rep.Refused, b.rep.ReadUnits, b.rep.WriteUnits, b.rep.Requests = total.Refused, total.ReadUnits, total.WriteUnits, total.Requests
	b.rep.PeakReadUnits, b.rep.PeakWriteUnits = slices.Max(append(b.readUnits, 0)), slices.Max(append(b.writeUnits, 0))
	for _, n := range b.pending {
		b.rep.Unpublished += n
	}
	return b.rep, b.countLeftOwned(ctx)
}

// charge adds a request's units to the second it was applied in.
func (b *burst) charge(at time.Time, d tally) {
	s := int(at.Sub(start) / time.Second)
	for len(b.readUnits) <= s {
		b.readUnits = append(b.readUnits, 0)
		b.writeUnits = append(b.writeUnits, 0)
	}
	b.readUnits[s] += d.ReadUnits
	b.writeUnits[s] += d.WriteUnits
	if b.ownedAll {
		b.rep.RefusedAfterOwned += d.Refused
	}
}

// commit lands one message in bucket and sends its wake-up.
func (b *burst) commit(bucket int) {
	now := b.s.clock.Now()
	if b.pending[bucket] == 0 {
		b.oldest[bucket] = now
	}
	b.pending[bucket]++
	b.wake([]int{bucket}, false)
}

// wake sends a wake-up for buckets: a stopping relay's continuation, or a
// commit's or the schedule's.
func (b *burst) wake(buckets []int, continuation bool) {
	b.rep.WakeUps++
	b.deliver(buckets, continuation, lambdasim.ThrottleRetryFirst)
}

// deliver is Lambda's handling of an asynchronous event for the burst's
// lease-level relays, which run one at a time on the stepper so that a
// seed reproduces exactly (internal/lambdasim starts the real handler on
// goroutines of its own): it starts an invocation after StartDelay while
// the reserved concurrency allows, and otherwise retries the event after
// retry, on lambdasim's retry schedule.
func (b *burst) deliver(buckets []int, continuation bool, retry time.Duration) {
	if b.running >= b.cfg.Relays {
		b.rep.Throttled++
		b.s.spawn(b.s.clock.Now().Add(retry), func() { b.deliver(buckets, continuation, min(2*retry, lambdasim.ThrottleRetryMax)) })
		return
	}
	b.running++
	b.rep.Invocations++
	id := fmt.Sprintf("%s-%016x", b.cfg.RelayIDPrefix, b.rng.Uint64())
	b.s.spawn(b.s.clock.Now().Add(b.cfg.StartDelay), func() {
		if err := b.invocation(id, buckets, continuation); err != nil {
			b.errs = append(b.errs, fmt.Errorf("relay %s: %w", id, err))
		}
		b.running--
		if b.running == 0 {
			b.rep.LastStopAfter = b.s.clock.Now().Sub(start)
		}
	})
}

// schedule is the relay function's schedule: every minute, from a seeded
// phase, a sweep wakes a relay for the buckets with pending commits. It
// ends once nothing is pending and no relay runs.
func (b *burst) schedule() {
	if pending := b.pendingBuckets(); len(pending) > 0 {
		b.wake(pending, false)
	} else if b.running == 0 {
		return
	}
	b.s.spawn(b.s.clock.Now().Add(time.Minute), b.schedule)
}

func (b *burst) pendingBuckets() []int {
	var out []int
	for bucket, n := range b.pending {
		if n > 0 {
			out = append(out, bucket)
		}
	}
	return out
}

// invocation is one relay run in drain mode, at the lease level: the trust
// check and its second look after the publisher's initialisation, then
// rounds every renew interval and polls every poll interval until its
// buckets stayed empty for the idle timeout, then the graceful release.
// Publishing is instant: a bucket's commits are published at the first
// poll after the relay owns it.
func (b *burst) invocation(id string, hints []int, continuation bool) error {
	store, err := outboxddb.NewStore(b.client, outboxddb.Options{TableName: b.table, BucketCount: b.cfg.Buckets,
		MaxConcurrency: 1, Clock: b.s.clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	for look := range 2 {
		if look == 1 {
			b.s.sleep(b.cfg.PublisherInit)
		}
		orphans, err := b.orphaned(store, id, hints, continuation)
		if err != nil || len(orphans) == 0 {
			if err == nil {
				b.rep.PeerLive++
			}
			return err
		}
		if look == 0 {
			// The relay reads the head of each uncovered bucket before
			// joining for a wake-up (a message-partition read, not
			// counted here): a late or retried wake-up finds its commit
			// published already.
			orphans = slices.DeleteFunc(orphans, func(bucket int) bool { return b.pending[bucket] == 0 })
			if len(orphans) == 0 {
				b.rep.NothingPending++
				return nil
			}
		}
		hints = orphans
	}
	b.rep.Joined++
	req := outbox.LeaseRequest{RelayID: id, BucketCount: b.cfg.Buckets, LeaseDuration: b.cfg.LeaseDuration,
		RenewInterval: b.cfg.LeaseRenewInterval}
	var owned []int
	var lastRound time.Time
	var rounds outbox.RoundState
	lastActive := b.s.clock.Now()
	for {
		if now := b.s.clock.Now(); lastRound.IsZero() || now.Sub(lastRound) >= b.cfg.LeaseRenewInterval {
			lastRound = now
			acq, err := store.AcquireLeases(b.ctx, req, rounds)
			if err != nil {
				return err
			}
			rounds.Standby, rounds.Settled = acq.Standby, acq.Settled
			if !acq.Rested {
				rounds.Round++
			}
			owned = acq.Owned
			b.noteRound(id, acq)
		}
		if b.publish(owned) {
			lastActive = b.s.clock.Now()
		}
		if b.s.clock.Now().Sub(lastActive) >= b.cfg.IdleTimeout {
			return b.stop(store, req)
		}
		b.s.sleep(b.cfg.PollInterval)
	}
}

// stop is the graceful stop: release, then a wake-up for released buckets
// that got commits meanwhile, so none waits for the schedule.
func (b *burst) stop(store *outboxddb.Store, req outbox.LeaseRequest) error {
	rel, err := store.ReleaseLeases(b.ctx, req)
	b.rep.Releases += len(rel.Released)
	for bucket, owner := range b.owners {
		if owner == req.RelayID {
			b.owners[bucket] = ""
		}
	}
	var left []int
	for _, bucket := range rel.Released {
		if b.pending[bucket] > 0 {
			left = append(left, bucket)
		}
	}
	if len(left) > 0 {
		b.wake(left, true)
	}
	return err
}

// orphaned is the relay's trust check, by the relay's rules: the hinted
// buckets no live peer holds or is claiming (outbox.ReadUncovered); when
// the check leaves buckets only to a claiming peer, their leases are read
// again after outbox.ClaimWindow and those still free count
// (outbox.ConfirmClaims); a continuation wake-up draws no claim on
// inference (outbox.ReadUnheld).
func (b *burst) orphaned(store *outboxddb.Store, id string, hints []int, continuation bool) ([]int, error) {
	req := outbox.LeaseRequest{RelayID: id, BucketCount: b.cfg.Buckets, LeaseDuration: b.cfg.LeaseDuration,
		RenewInterval: b.cfg.LeaseRenewInterval}
	if continuation {
		return outbox.ReadUnheld(b.ctx, store, b.s.clock, req, hints)
	}
	cov, err := outbox.ReadUncovered(b.ctx, store, b.s.clock, req, hints)
	if err != nil || len(cov.Uncovered) > 0 || len(cov.Claimed) == 0 {
		return cov.Uncovered, err
	}
	b.rep.ClaimChecks++
	b.s.sleep(outbox.ClaimWindow)
	return outbox.ConfirmClaims(b.ctx, store, b.s.clock, id, cov.Claimed)
}

// noteRound records a round's outcome and who holds what after it.
func (b *burst) noteRound(id string, acq outbox.Acquisition) {
	b.rep.Rounds++
	b.rep.Claims += len(acq.Claimed)
	b.rep.Releases += len(acq.Released)
	b.rep.Lost += len(acq.Lost)
	for _, bucket := range append(slices.Clone(acq.Released), acq.Lost...) {
		if b.owners[bucket] == id {
			b.owners[bucket] = ""
		}
	}
	for _, bucket := range acq.Owned {
		b.owners[bucket] = id
	}
	if !b.ownedAll && !slices.Contains(b.owners, "") {
		b.ownedAll = true
		b.rep.AllOwnedAfter = b.s.clock.Now().Sub(start)
	}
}

// publish drains the owned buckets' pending commits and reports whether
// there were any.
func (b *burst) publish(owned []int) bool {
	now := b.s.clock.Now()
	any := false
	for _, bucket := range owned {
		if b.pending[bucket] == 0 {
			continue
		}
		b.rep.MaxPublishWait = max(b.rep.MaxPublishWait, now.Sub(b.oldest[bucket]))
		b.pending[bucket] = 0
		any = true
	}
	return any
}

// countLeftOwned reads the partition once after the run (not counted).
func (b *burst) countLeftOwned(ctx context.Context) error {
	store, err := outboxddb.NewStore(b.s.be.client(), outboxddb.Options{TableName: b.table, BucketCount: b.cfg.Buckets, Clock: b.s.clock})
	if err != nil {
		return err
	}
	view, err := store.ReadCoordination(ctx)
	if err != nil {
		return err
	}
	for _, l := range view.Leases {
		if l.Owner != "" {
			b.rep.LeftOwned++
		}
	}
	return nil
}
