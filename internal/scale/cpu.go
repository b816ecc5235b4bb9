package scale

import (
	"context"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// The planner is timed in planBatches batches of at least planBatchTime
// each; the fastest batch's mean is reported, the figure least disturbed
// by other work on the machine.
const (
	planBatches   = 5
	planBatchTime = 10 * time.Millisecond
)

// planCPU reads the settled fleet's coordination partition once (not
// counted: the measurement is over) and times the planner over it for every
// relay in turn, returning the time of one relay's plan.
func (f *fleet) planCPU(ctx context.Context) (time.Duration, error) {
	view, err := f.relays[0].store.ReadCoordination(ctx)
	if err != nil {
		return 0, err
	}
	now := f.clock.Now()
	lease := f.cfg.LeaseDuration
	leases := make([]outbox.BucketLease, f.cfg.Buckets)
	for _, l := range view.Leases {
		leases[l.Bucket] = outbox.BucketLease{Owner: l.Owner, Expired: !l.ExpiresAt.After(now)}
	}
	var active []string
	for _, r := range view.Relays {
		if !r.Stopped && r.LastSeen.After(now.Add(-lease)) {
			active = append(active, r.RelayID)
		}
	}
	best := time.Duration(0)
	for range planBatches {
		calls := 0
		begin := time.Now()
		for time.Since(begin) < planBatchTime || calls < len(f.relays) {
			r := f.relays[calls%len(f.relays)]
			if _, err := outbox.PlanLeases(f.cfg.Buckets, active, r.id, leases); err != nil {
				return 0, err
			}
			calls++
		}
		mean := time.Since(begin) / time.Duration(calls)
		if best == 0 || mean < best {
			best = mean
		}
	}
	return best, nil
}
