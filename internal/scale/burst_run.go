package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// BurstReport is what a burst measured; durations are simulated time from
// the first commit.
type BurstReport struct {
	Config BurstConfig `json:"config"`
	// WakeUps were sent (a commit's, a stopping relay's for buckets that
	// got commits while it released them, the schedule's sweeps); they
	// started Invocations in Environments execution environments (one
	// relay id each). Throttled counts the wake-ups refused at least once
	// for the reserved concurrency, which Lambda retries with a growing
	// delay (lambdasim.Stats.Throttled).
	WakeUps      int `json:"wakeUps"`
	Invocations  int `json:"invocations"`
	Environments int `json:"environments"`
	Throttled    int `json:"throttled"`
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
// nothing. It runs only inside a testing/synctest bubble, whose clock is the
// simulation's.
func RunBurst(ctx context.Context, cfg BurstConfig) (BurstReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return BurstReport{}, err
	}
	sim, err := lab.NewSim(ctx, lab.Config{Settle: synctest.Wait})
	if err != nil {
		return BurstReport{}, err
	}
	be, err := newBackend(ctx, Config{Backend: cfg.Backend})
	if err != nil {
		return BurstReport{}, err
	}
	defer be.close()
	b := &burst{cfg: cfg, start: runStart(time.Now()), be: be, table: be.table(), sim: sim,
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0xb0257)),
		pending: make([]int, cfg.Buckets), oldest: make([]time.Time, cfg.Buckets), owners: make([]string, cfg.Buckets)}
	b.rep.Config = cfg
	b.client = &burstClient{Client: be.client(), b: b, latency: cfg.Latency, writeLatency: cfg.Latency / time.Duration(cfg.StoreParallel)}
	if b.fn, err = b.newFunction(); err != nil {
		return BurstReport{}, err
	}
	// The simulation's end waits for the invocations still running.
	sim.Go(func(ctx context.Context) error {
		<-ctx.Done()
		b.fn.Wait()
		return nil
	})
	b.mu.Lock()
	commits := make([]struct {
		at     time.Time
		bucket int
	}, cfg.Commits)
	for i := range commits {
		commits[i].at = b.start.Add(time.Duration(b.rng.Int64N(int64(cfg.Window))))
		commits[i].bucket = b.rng.IntN(cfg.Buckets)
	}
	sweep := b.start.Add(time.Duration(b.rng.Int64N(int64(time.Minute))))
	b.mu.Unlock()
	for _, c := range commits {
		sim.At(c.at, func(now time.Time) error {
			b.commit(c.bucket, now)
			return nil
		})
	}
	done := make(chan struct{})
	b.schedule(sweep, done)
	select {
	case <-done:
	case <-sim.Context().Done():
	case <-time.After(time.Until(b.start.Add(burstRunLimit))):
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
	b.rep.Invocations, b.rep.Environments, b.rep.Throttled = st.Invocations, st.Environments, st.Throttled
	total := be.tally()
	b.rep.Refused, b.rep.ReadUnits, b.rep.WriteUnits, b.rep.Requests = total.Refused, total.ReadUnits, total.WriteUnits, total.Requests
	b.rep.PeakReadUnits, b.rep.PeakWriteUnits = slices.Max(append(b.readUnits, 0)), slices.Max(append(b.writeUnits, 0))
	for _, n := range b.pending {
		b.rep.Unpublished += n
	}
	return b.rep, b.countLeftOwned(ctx)
}

// wakeUp is the payload of a wake-up: its buckets, and whether a stopping
// relay sent it for buckets it released.
type wakeUp struct {
	Buckets      []int `json:"buckets"`
	Continuation bool  `json:"continuation,omitempty"`
}

// newFunction deploys the relay function on the Lambda emulator, on the
// bubble's clock: an environment is one relay (its id, its store), as the
// function's init builds it, kept warm for the rest of the run.
func (b *burst) newFunction() (*lambdasim.Function[*relayEnv], error) {
	return lambdasim.New(lambdasim.Config[*relayEnv]{
		Scheduler:           b.sim,
		Context:             b.sim.Context(),
		ReservedConcurrency: b.cfg.Relays,
		Timeout:             burstTimeout,
		StartLatency:        b.cfg.StartLatency,
		ColdStart:           b.cfg.ColdStart,
		NewEnv:              b.newEnv,
		Ended: func(_ *lambdasim.Invocation[*relayEnv], _ outboxlambda.RelayResponse, err error) {
			if err != nil {
				b.sim.Fail(err)
			}
			b.mu.Lock()
			b.rep.LastStopAfter = time.Since(b.start)
			b.mu.Unlock()
		},
	})
}

// relayEnv is one execution environment of the relay function.
type relayEnv struct {
	b     *burst
	n     int
	id    string
	store *outboxddb.Store
}

func (b *burst) newEnv(n int) (*relayEnv, error) {
	store, err := outboxddb.NewStore(b.client, outboxddb.Options{TableName: b.table, BucketCount: b.cfg.Buckets,
		MaxConcurrency: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	id := fmt.Sprintf("%s-%016x", b.cfg.RelayIDPrefix, b.rng.Uint64())
	b.mu.Unlock()
	return &relayEnv{b: b, n: n, id: id, store: store}, nil
}

// Handle runs one invocation. Invocations the emulator starts together
// (wake-ups retried at the same instant) start at the same instant of the
// bubble; environment n begins n nanoseconds late, so that no two
// invocations' requests land at the same instant, where the bubble would
// run them in any order and a seed would not reproduce the run.
func (e *relayEnv) Handle(ctx context.Context, payload json.RawMessage) (outboxlambda.RelayResponse, error) {
	var ev wakeUp
	if err := json.Unmarshal(payload, &ev); err != nil {
		return outboxlambda.RelayResponse{}, err
	}
	resp := outboxlambda.RelayResponse{Trigger: outboxlambda.SourceWake, RelayID: e.id}
	if !outbox.Sleep(time.Duration(e.n), ctx.Done()) {
		return resp, context.Cause(ctx)
	}
	joined, err := e.b.invocation(ctx, e, ev.Buckets, ev.Continuation)
	if err != nil {
		err = fmt.Errorf("relay %s: %w", e.id, err)
	}
	resp.Joined = joined
	return resp, err
}

// charge adds a request's units to the second it was applied in. Called
// with b.mu held.
func (b *burst) charge(at time.Time, d tally) {
	s := int(at.Sub(b.start) / time.Second)
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
func (b *burst) commit(bucket int, now time.Time) {
	b.mu.Lock()
	if b.pending[bucket] == 0 {
		b.oldest[bucket] = now
	}
	b.pending[bucket]++
	b.mu.Unlock()
	b.wake([]int{bucket}, false, now)
}

// wake sends a wake-up for buckets: a stopping relay's continuation, or a
// commit's or the schedule's. Called without b.mu held.
func (b *burst) wake(buckets []int, continuation bool, now time.Time) {
	payload, _ := json.Marshal(wakeUp{Buckets: buckets, Continuation: continuation}) // ints and a bool: cannot fail
	b.mu.Lock()
	b.rep.WakeUps++
	b.mu.Unlock()
	b.fn.Send(payload, now)
}

// schedule is the relay function's schedule: every minute from at, a
// sweep wakes a relay for the buckets with pending commits. It closes done
// once nothing is pending and the function has no event left to run.
func (b *burst) schedule(at time.Time, done chan struct{}) {
	b.sim.At(at, func(now time.Time) error {
		if pending := b.pendingBuckets(); len(pending) > 0 {
			b.wake(pending, false, now)
		} else if b.fn.Pending() == 0 {
			close(done)
			return nil
		}
		b.schedule(now.Add(time.Minute), done)
		return nil
	})
}

func (b *burst) pendingBuckets() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
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
// poll after the relay owns it. It reports whether the relay joined.
func (b *burst) invocation(ctx context.Context, e *relayEnv, hints []int, continuation bool) (bool, error) {
	for look := range 2 {
		if look == 1 && !outbox.Sleep(b.cfg.PublisherInit, ctx.Done()) {
			return false, context.Cause(ctx)
		}
		orphans, err := b.orphaned(ctx, e, hints, continuation)
		if err != nil || len(orphans) == 0 {
			if err == nil {
				b.count(func(r *BurstReport) { r.PeerLive++ })
			}
			return false, err
		}
		if look == 0 {
			// The relay reads the head of each uncovered bucket before
			// joining for a wake-up (a message-partition read, not
			// counted here): a late or retried wake-up finds its commit
			// published already.
			b.mu.Lock()
			orphans = slices.DeleteFunc(orphans, func(bucket int) bool { return b.pending[bucket] == 0 })
			if len(orphans) == 0 {
				b.rep.NothingPending++
			}
			b.mu.Unlock()
			if len(orphans) == 0 {
				return false, nil
			}
		}
		hints = orphans
	}
	b.count(func(r *BurstReport) { r.Joined++ })
	req := b.leaseRequest(e.id)
	var owned []int
	var lastRound time.Time
	var rounds outbox.RoundState
	lastActive := time.Now()
	for {
		if now := time.Now(); lastRound.IsZero() || now.Sub(lastRound) >= b.cfg.LeaseRenewInterval {
			lastRound = now
			acq, err := e.store.AcquireLeases(ctx, req, rounds)
			if err != nil {
				return true, err
			}
			rounds.Standby, rounds.Settled = acq.Standby, acq.Settled
			if !acq.Rested {
				rounds.Round++
			}
			owned = acq.Owned
			b.noteRound(e.id, acq)
		}
		if b.publish(owned) {
			lastActive = time.Now()
		}
		if time.Since(lastActive) >= b.cfg.IdleTimeout {
			return true, b.stop(ctx, e, req)
		}
		if !outbox.Sleep(b.cfg.PollInterval, ctx.Done()) {
			return true, context.Cause(ctx)
		}
	}
}

func (b *burst) leaseRequest(id string) outbox.LeaseRequest {
	return outbox.LeaseRequest{RelayID: id, BucketCount: b.cfg.Buckets, LeaseDuration: b.cfg.LeaseDuration,
		RenewInterval: b.cfg.LeaseRenewInterval}
}

// count updates the report under b.mu.
func (b *burst) count(f func(r *BurstReport)) {
	b.mu.Lock()
	f(&b.rep)
	b.mu.Unlock()
}

// stop is the graceful stop: release, then a wake-up for released buckets
// that got commits meanwhile, so none waits for the schedule.
func (b *burst) stop(ctx context.Context, e *relayEnv, req outbox.LeaseRequest) error {
	rel, err := e.store.ReleaseLeases(ctx, req)
	b.mu.Lock()
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
	b.mu.Unlock()
	if len(left) > 0 {
		b.wake(left, true, time.Now())
	}
	return err
}

// orphaned is the relay's trust check, by the relay's rules: the hinted
// buckets no live peer holds or is claiming (outbox.ReadUncovered); when
// the check leaves buckets only to a claiming peer, their leases are read
// again after outbox.ClaimWindow and those still free count
// (outbox.ConfirmClaims); a continuation wake-up draws no claim on
// inference (outbox.ReadUnheld).
func (b *burst) orphaned(ctx context.Context, e *relayEnv, hints []int, continuation bool) ([]int, error) {
	clock := outbox.SystemClock{}
	req := b.leaseRequest(e.id)
	if continuation {
		return outbox.ReadUnheld(ctx, e.store, clock, req, hints)
	}
	cov, err := outbox.ReadUncovered(ctx, e.store, clock, req, hints)
	if err != nil || len(cov.Uncovered) > 0 || len(cov.Claimed) == 0 {
		return cov.Uncovered, err
	}
	b.count(func(r *BurstReport) { r.ClaimChecks++ })
	if !outbox.Sleep(outbox.ClaimWindow, ctx.Done()) {
		return nil, context.Cause(ctx)
	}
	return outbox.ConfirmClaims(ctx, e.store, clock, e.id, cov.Claimed)
}

// noteRound records a round's outcome and who holds what after it.
func (b *burst) noteRound(id string, acq outbox.Acquisition) {
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

// publish drains the owned buckets' pending commits and reports whether
// there were any.
func (b *burst) publish(owned []int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
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
// Called with b.mu held.
func (b *burst) countLeftOwned(ctx context.Context) error {
	store, err := outboxddb.NewStore(b.be.client(), outboxddb.Options{TableName: b.table, BucketCount: b.cfg.Buckets})
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

// burstClient is the relays' client: every request waits its round trip on
// the bubble's clock before it is applied; lease writes and prunes wait
// writeLatency, as a store sends several of them at once. Each request's
// units are charged to the second it is applied in.
type burstClient struct {
	outboxddb.Client
	b                     *burst
	latency, writeLatency time.Duration
}

func send[O any](ctx context.Context, c *burstClient, latency time.Duration, call func() (O, error)) (O, error) {
	if !outbox.Sleep(latency, ctx.Done()) {
		var zero O
		return zero, context.Cause(ctx)
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	before := c.b.be.tally()
	out, err := call()
	c.b.charge(time.Now(), c.b.be.tally().since(before))
	return out, err
}

func (c *burstClient) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return send(ctx, c, c.latency, func() (*dynamodb.QueryOutput, error) { return c.Client.Query(ctx, in, optFns...) })
}

func (c *burstClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return send(ctx, c, c.latency, func() (*dynamodb.PutItemOutput, error) { return c.Client.PutItem(ctx, in, optFns...) })
}

func (c *burstClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return send(ctx, c, c.writeLatency, func() (*dynamodb.UpdateItemOutput, error) { return c.Client.UpdateItem(ctx, in, optFns...) })
}

func (c *burstClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return send(ctx, c, c.writeLatency, func() (*dynamodb.DeleteItemOutput, error) { return c.Client.DeleteItem(ctx, in, optFns...) })
}
