package outboxddb

import (
	"context"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// acquire runs one lease round of req over s's primitives as a relay
// runs it (lease.AcquireRound), at the store clock's now.
func (s *Store) acquire(ctx context.Context, req lease.Request, st lease.RoundState) (lease.Acquisition, error) {
	return lease.AcquireRound(ctx, s, s.log, s.opts.Clock.Now(), req, st)
}

// renew is a relay's renewal of buckets over s (lease.Renew), at the store
// clock's now.
func (s *Store) renew(ctx context.Context, req lease.Request, buckets []int) (bool, error) {
	return lease.Renew(ctx, s, s.opts.Clock.Now(), req, buckets)
}
