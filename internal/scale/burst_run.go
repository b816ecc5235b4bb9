package scale

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxmem"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

// BurstReport is what a burst measured; durations are simulated time from
// the first commit.
type BurstReport struct {
	Config Config `json:"config"`
	// WakeUps were sent: a commit's, a stopping relay's continuation for
	// buckets it released with commits left (Stats.Continuations), the
	// schedule's sweeps while commits were pending.
	WakeUps int `json:"wakeUps"`
	// Stats is what the relay function did: its invocations by outcome
	// (InvocationsByReason: peer-live after a trust check found a live
	// peer holding or claiming the buckets, nothing-pending when the
	// relay's look at their heads found them drained already, drained
	// after a joined run), the execution environments (one relay id each)
	// and the wake-ups throttled for the reserved concurrency.
	lambdasim.Stats
	// ClaimChecks counts the trust checks that left every uncovered bucket
	// to a peer whose round seemed to be claiming it and so read those
	// buckets' leases again after lease.ClaimWindow (the relay's claim confirmation:
	// the store's ReadLeases, one strongly consistent Query per bucket, or
	// of every lease on a small table).
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
	// the longest a commit waited for its publish; LastStopAfter when the
	// last relay stopped.
	AllOwnedAfter  time.Duration `json:"allOwnedAfterNanos"`
	MaxPublishWait time.Duration `json:"maxPublishWaitNanos"`
	LastStopAfter  time.Duration `json:"lastStopAfterNanos"`
	// LeftOwned counts leases still naming a relay after the last stop;
	// Unpublished the commits no relay published.
	LeftOwned   int `json:"leftOwned"`
	Unpublished int `json:"unpublished"`
	// Capacity units on the coordination partition: totals, the busiest
	// simulated second and the mean over the run.
	ReadUnits      float64 `json:"readUnits"`
	WriteUnits     float64 `json:"writeUnits"`
	PeakReadUnits  float64 `json:"peakReadUnits"`
	PeakWriteUnits float64 `json:"peakWriteUnits"`
}

// RunBurst simulates a burst until the fleet has scaled back to nothing:
// cfg.Commits commits at seeded instants within a second over cfg.Buckets
// buckets, each sending a wake-up to the relay function on the Lambda
// emulator (internal/lambdasim), whose reserved concurrency is cfg.Relays;
// each invocation runs the real relay handler in drain mode. Zero Buckets,
// Relays and Commits take the DefaultBurst values, the other fields
// Config's defaults; SteadyRounds and SeedRelays play no part. It runs only
// inside a testing/synctest bubble, whose clock is the simulation's.
func RunBurst(ctx context.Context, cfg Config) (BurstReport, error) {
	cfg.Buckets = cmp.Or(cfg.Buckets, DefaultBurstBuckets)
	cfg.Relays = cmp.Or(cfg.Relays, DefaultBurstRelays)
	cfg.Commits = cmp.Or(cfg.Commits, DefaultBurstCommits)
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return BurstReport{}, err
	}
	sim, err := lab.NewSim(ctx, lab.Config{Settle: synctest.Wait})
	if err != nil {
		return BurstReport{}, err
	}
	be, err := newBackend(ctx, cfg)
	if err != nil {
		return BurstReport{}, err
	}
	defer be.close()
	start := runStart(time.Now())
	messages, err := outboxmem.New(outboxmem.Options{BucketCount: cfg.Buckets})
	if err != nil {
		return BurstReport{}, err
	}
	b := &burst{cfg: cfg, start: start, be: be, sim: sim, units: units{start: start, counted: be.tally()},
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0xb0257)),
		messages: messages, owners: make([]string, cfg.Buckets)}
	b.rep.Config = cfg
	if b.fnCfg, err = lab.FunctionConfig(be.table(), cfg.Buckets, outbox.RelayOptions{
		Mode: outbox.ModeDrain, LeaseDuration: cfg.LeaseDuration, LeaseRenewInterval: cfg.LeaseRenewInterval,
		PollInterval: outbox.DefaultPollInterval, IdleTimeout: outbox.DefaultIdleTimeout,
	}); err != nil {
		return BurstReport{}, err
	}
	if b.fn, err = b.newFunction(); err != nil {
		return BurstReport{}, err
	}
	// The commits and the sweep's phase are drawn before any environment
	// draws a relay id.
	b.mu.Lock()
	for range cfg.Commits {
		at, bucket := b.start.Add(time.Duration(b.rng.Int64N(int64(burstWindow)))), b.rng.IntN(cfg.Buckets)
		sim.At(at, func(now time.Time) error { return b.commit(bucket, now) })
	}
	sweep := b.start.Add(time.Duration(b.rng.Int64N(int64(time.Minute))))
	b.mu.Unlock()
	sim.Every(sweep, time.Minute, b.sweep)
	scaledIn := func(time.Time) (bool, error) { return b.scaledIn, nil }
	if err := sim.Drive(b.start.Add(burstRunLimit), scaledIn); err == nil && !b.scaledIn {
		sim.Fail(fmt.Errorf("scale: %d relays still running after %v", b.fn.Running(), burstRunLimit))
	}
	if err := sim.Stop(); err != nil {
		return BurstReport{}, err
	}
	st := b.fn.Stats()
	b.mu.Lock()
	defer b.mu.Unlock()
	if st.Errors > 0 || st.Killed > 0 || st.Dropped > 0 {
		return BurstReport{}, fmt.Errorf("scale: %d invocations failed, %d were killed, %d wake-ups dropped (last error: %s)", st.Errors, st.Killed, st.Dropped, st.LastError)
	}
	b.rep.Stats = st
	b.rep.WakeUps += st.Continuations
	total := be.tally()
	b.rep.Refused, b.rep.ReadUnits, b.rep.WriteUnits = total.Refused, total.ReadUnits, total.WriteUnits
	b.rep.PeakReadUnits, b.rep.PeakWriteUnits = b.units.peak(0, len(b.units.read))
	b.rep.Unpublished = b.pendingLocked()
	return b.rep, b.countLeftOwned(ctx)
}

// newFunction deploys the relay function on the Lambda emulator, on the
// bubble's clock: an environment is one relay (its id, its store), as the
// function's init builds it, kept warm for the rest of the run. Its store
// sends one request at a time, each a round trip of the bubble's clock
// (lease writes and prunes a fraction of one: a store sends several of them
// at once) whose units are charged to the second it is applied in; its
// publisher acknowledges at once.
func (b *burst) newFunction() (*lambdasim.Function[*lab.RelayEnv], error) {
	writeLatency := ddbLatency / storeParallel
	client := &lab.Client{
		Inner: b.be.client(),
		Latency: func(in any) time.Duration {
			switch in.(type) {
			case *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
				return writeLatency
			}
			return ddbLatency
		},
		Observe: b.charge,
	}
	return lab.NewRelayFunction(lab.RelayFunction{
		Sim: b.sim,
		Lambda: lambdasim.Config[*lab.RelayEnv]{
			ReservedConcurrency: b.cfg.Relays,
			Timeout:             burstTimeout,
			StartLatency:        startLatency,
			ColdStart:           coldStart,
			Ended: func(inv *lambdasim.Invocation[*lab.RelayEnv], _ outboxlambda.RelayResponse, err error) {
				if err != nil {
					b.sim.Fail(fmt.Errorf("relay %s: %w", inv.Env.RelayID, err))
				}
				b.mu.Lock()
				b.rep.LastStopAfter = time.Since(b.start)
				b.mu.Unlock()
			},
		},
		Config:         b.fnCfg,
		Client:         client,
		MaxConcurrency: 1,
		RelayID: func(int) string {
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Sprintf("%s-%016x", relayIDPrefix, b.rng.Uint64())
		},
		Publisher: func(*lab.RelayEnv) outbox.Publisher {
			return &lab.Publisher{InitLatency: publisherInit, Acked: b.acked}
		},
		Store: func(env *lab.RelayEnv, store *outboxddb.Store) outbox.Store {
			return b.relayStore(env.RelayID, store)
		},
		HandlerConfig: func(env *lab.RelayEnv, hc *outboxlambda.RelayHandlerConfig) {
			hc.Hooks = append(hc.Hooks, roundNotes{b})
		},
		// Invocations the emulator starts together (wake-ups retried at
		// the same instant) would otherwise send their requests at the
		// same instants, where the bubble runs them in any order.
		Stagger:       true,
		Continuations: true,
	})
}

// commit lands one message in bucket and sends its wake-up.
func (b *burst) commit(bucket int, now time.Time) error {
	b.mu.Lock()
	b.committed++
	var id outbox.MessageID
	binary.BigEndian.PutUint64(id[8:], uint64(b.committed))
	// The explicit partition picks the bucket (partition mod the count).
	p := int32(bucket)
	_, err := b.messages.Enqueue(context.Background(), outbox.Message{ID: id, Topic: "burst", Partition: &p, CreatedAt: now})
	b.mu.Unlock()
	if err != nil {
		return err
	}
	payload, err := json.Marshal(outboxwake.Payload{Trigger: outbox.TriggerWake, Buckets: []int{bucket}})
	if err != nil {
		return err
	}
	b.send(payload, now)
	return nil
}

// send sends an event to the relay function: a commit's wake-up or the
// schedule's sweep. Called without b.mu held.
func (b *burst) send(payload []byte, now time.Time) {
	b.mu.Lock()
	b.rep.WakeUps++
	b.mu.Unlock()
	b.fn.Send(payload, now)
}

// sweep is the relay function's schedule, every minute: a sweep while
// commits are pending. It marks the burst scaled in, and ends, once nothing
// is pending and the function has no event left to run.
func (b *burst) sweep(now time.Time) bool {
	if b.pending() > 0 {
		b.send(lab.SchedulePayload, now)
	} else if b.fn.Pending() == 0 {
		b.scaledIn = true
		return false
	}
	return true
}

// pending counts the unpublished commits.
func (b *burst) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pendingLocked()
}

// pendingLocked is pending with b.mu held.
func (b *burst) pendingLocked() int {
	bl, _ := b.messages.Backlog(context.Background()) // in memory: no error
	return int(bl.Pending)
}

// acked is the publishers' acknowledgement: it keeps the longest wait.
func (b *burst) acked(msgs []outbox.Message, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range msgs {
		b.rep.MaxPublishWait = max(b.rep.MaxPublishWait, at.Sub(m.CreatedAt))
	}
}

// charge is the relays' client's observer: it charges a request's units to
// the second it was applied in. Time moves only once every goroutine is
// blocked, so what the backend counted since the latest charge was applied
// at this instant: this request, and any sent at the same instant whose
// observer has not run yet.
func (b *burst) charge(_ context.Context, req lab.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.units.charge(req.At, b.be.tally())
	if b.ownedAll {
		b.rep.RefusedAfterOwned += d.Refused
	}
}

// noteRound records a round's outcome and who holds what after it.
func (b *burst) noteRound(id string, acq lease.Acquisition) {
	b.mu.Lock()
	defer b.mu.Unlock()
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
		b.rep.AllOwnedAfter = time.Since(b.start)
	}
}

// noteRelease records a stop's release.
func (b *burst) noteRelease(id string, rel lease.Release) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rep.Releases += len(rel.Released)
	for bucket, owner := range b.owners {
		if owner == id {
			b.owners[bucket] = ""
		}
	}
}

// countLeftOwned reads the partition once after the run (not counted).
// Called with b.mu held.
func (b *burst) countLeftOwned(ctx context.Context) error {
	store, err := outboxddb.NewStore(b.be.client(), b.fnCfg.StoreOptions())
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

// relayStore is environment id's store, observed (outboxtest.ObservedStore):
// its lease calls go to its outboxddb.Store on the backend, and releases
// and claim checks are noted for the report (rounds through the relay's
// hook, roundNotes); its messages are the
// burst's in memory, read and deleted at once and not charged: the burst
// measures the coordination partition, not the message partitions. It
// serves the trust check's narrower reads as the relay function's store
// does.
func (b *burst) relayStore(id string, ddb *outboxddb.Store) outbox.Store {
	return outboxtest.Observe(outboxtest.ObservedStore{
		Store: struct {
			outbox.Store
			outbox.CoverageReader
			outbox.LeaseReader
		}{ddb, ddb, ddb},
		ReleaseLeasesFunc: func(ctx context.Context, relayID string, next func(context.Context, string) (lease.Release, error)) (lease.Release, error) {
			rel, err := next(ctx, relayID)
			b.noteRelease(id, rel)
			return rel, err
		},
		// The second read of a trust check that left its buckets to a
		// claiming peer (the relay's claim confirmation) is a claim check.
		ReadLeasesFunc: func(ctx context.Context, buckets []int, next func(context.Context, []int) ([]lease.State, error)) ([]lease.State, error) {
			b.mu.Lock()
			b.rep.ClaimChecks++
			b.mu.Unlock()
			return next(ctx, buckets)
		},
		PendingBucketsFunc: func(ctx context.Context, buckets []int, _ func(context.Context, []int) ([]int, error)) ([]int, error) {
			return b.messages.PendingBuckets(ctx, buckets)
		},
		FetchBatchFunc: func(ctx context.Context, bucket, limit int, _ func(context.Context, int, int) ([]outbox.Message, error)) ([]outbox.Message, error) {
			return b.messages.FetchBatch(ctx, bucket, limit)
		},
		MarkPublishedFunc: func(ctx context.Context, bucket int, msgs []outbox.Message, _ func(context.Context, int, []outbox.Message) error) error {
			return b.messages.MarkPublished(ctx, bucket, msgs)
		},
		BacklogFunc: func(ctx context.Context, _ func(context.Context) (outbox.Backlog, error)) (outbox.Backlog, error) {
			return b.messages.Backlog(ctx)
		},
	})
}

// roundNotes notes each relay's rounds for the report, as the relay
// installs them.
type roundNotes struct{ b *burst }

// OnRound implements outbox.HookLease.
func (n roundNotes) OnRound(relayID string, _ time.Duration, acq lease.Acquisition, err error) {
	if err == nil {
		n.b.noteRound(relayID, acq)
	}
}

// OnLeases implements outbox.HookLease.
func (roundNotes) OnLeases(string, int, int, int) {}

// OnLeaseLost implements outbox.HookLease.
func (roundNotes) OnLeaseLost(string, int, outbox.LossReason) {}

// OnReleaseSkipped implements outbox.HookLease.
func (roundNotes) OnReleaseSkipped(string, int) {}
