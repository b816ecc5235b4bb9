package scale

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// A run starts at an instant of the bubble's clock congruent to refStart
// modulo startPeriod (10^12 ticks of 100 ns). Lease expiries and heartbeats
// are stored as ticks, and the significant digits of a number set an
// item's size: from such a start every instant within a day of it has the
// same digits as from refStart, so a run's sizes, and so its capacity
// units, do not depend on when in the bubble it starts.
var refStart = time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)

const startPeriod = 100000 * time.Second

// runStart returns the first start instant at or after now.
func runStart(now time.Time) time.Time {
	periods := now.Sub(refStart) / startPeriod
	at := refStart.Add(periods * startPeriod)
	for at.Before(now) {
		at = at.Add(startPeriod)
	}
	return at
}

// relay is one relay of the fleet: its own store (a store remembers its
// heartbeats and standby state, as one relay process's does), when its
// first round runs (at a seeded offset from the start; the next ones every
// renew interval) and what it owned after its latest round.
type relay struct {
	id    string
	store *outboxddb.Store
	first time.Time
	owned []int // guarded by fleet.mu
	// rounds is what the relay carries from one round to the next: one
	// run for the whole simulation. A seed relay carries no settled-fleet
	// state.
	rounds lease.RoundState
	seed   bool
}

// fleet is the relays of one run, sharing one client, on the bubble's
// clock.
type fleet struct {
	cfg    Config
	start  time.Time
	relays []*relay
	mu     sync.Mutex // guards the relays' owned buckets
}

// newFleet builds cfg.Relays relays with seeded ids and start offsets
// spread uniformly over the first renew interval (a fleet started
// together: a deployment, or a burst of wake-ups).
func newFleet(cfg Config, client outboxddb.Client, table string, start time.Time) (*fleet, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5ca1e))
	f := &fleet{cfg: cfg, start: start}
	seen := map[string]bool{}
	for len(f.relays) < cfg.Relays {
		id := fmt.Sprintf("%s-%016x", relayIDPrefix, rng.Uint64())
		if seen[id] {
			continue
		}
		seen[id] = true
		store, err := outboxddb.NewStore(client, outboxddb.StoreOptions{Options: outboxddb.Options{
			TableName:   table,
			BucketCount: cfg.Buckets,
			Logger:      slog.New(slog.DiscardHandler),
		}})
		if err != nil {
			return nil, err
		}
		phase := time.Duration(rng.Int64N(int64(cfg.LeaseRenewInterval/time.Millisecond))) * time.Millisecond
		f.relays = append(f.relays, &relay{id: id, store: store, first: start.Add(phase), seed: len(f.relays) < cfg.SeedRelays})
	}
	return f, nil
}

// acquire runs one lease round of req over store as a relay runs it
// (lease.AcquireRound), at the store clock's now, logging to the store's
// logger.
func acquire(ctx context.Context, store *outboxddb.Store, req lease.Request, st lease.RoundState) (lease.Acquisition, error) {
	o := store.Options()
	return lease.AcquireRound(ctx, store, o.Logger, o.Clock.Now(), req, st)
}

// round runs r's acquisition round due at now.
func (f *fleet) round(ctx context.Context, r *relay, now time.Time) (lease.Acquisition, error) {
	req := lease.Request{RelayID: r.id, BucketCount: f.cfg.Buckets, LeaseDuration: f.cfg.LeaseDuration}
	if !r.seed {
		// A seed relay runs the table contract's plain round: it keeps
		// every owned lease every round.
		req.RenewInterval = f.cfg.LeaseRenewInterval
	}
	acq, err := acquire(ctx, r.store, req, r.rounds)
	r.rounds.Standby, r.rounds.Settled = acq.Standby, acq.Settled
	if r.seed {
		r.rounds.Settled = lease.Settled{}
	}
	if err == nil && !acq.Rested {
		r.rounds.Round++
	}
	if err != nil {
		return acq, fmt.Errorf("scale: round of relay %s at %s: %w", r.id, now.Sub(f.start), err)
	}
	f.mu.Lock()
	r.owned = acq.Owned
	f.mu.Unlock()
	return acq, nil
}

// settled reports that every bucket is owned by exactly one relay, as the
// relays' latest rounds saw it.
func (f *fleet) settled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	owners := make([]int, f.cfg.Buckets)
	for _, r := range f.relays {
		for _, b := range r.owned {
			owners[b]++
		}
	}
	for _, n := range owners {
		if n != 1 {
			return false
		}
	}
	return true
}
