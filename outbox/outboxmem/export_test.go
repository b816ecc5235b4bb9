package outboxmem

import "github.com/spillway-dev/spillway/outbox/lease"

// LeaseIO is the store's lease primitives, for the contract suite's cases
// of single conditional writes.
func (s *Store) LeaseIO() lease.IO { return leaseIO{s} }
