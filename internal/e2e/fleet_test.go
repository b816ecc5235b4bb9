package e2e

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// fleetStats sums the runs of a fleet.
type fleetStats struct {
	mu                                 sync.Mutex
	runs, published, deleted, errors   int
	budget, drained, skipped, peerLive int
}

func (s *fleetStats) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted
}

func (s *fleetStats) add(res outbox.RunResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	s.published += res.Published
	s.deleted += res.Deleted
	s.errors += res.Errors
	switch res.Reason {
	case outbox.StopBudget:
		s.budget++
	case outbox.StopDrained:
		s.drained++
	case outbox.StopPeerLive, outbox.StopNothingPending:
		s.peerLive++
	}
	if res.ReleaseSkipped {
		s.skipped++
	}
}

func TestFleet(t *testing.T) {
	// EndToEnd_MixedWrites_DrainedByFleetsOfShortRuns writes messages over
	// 500 keys through every enqueue path, then lets fleets of 1, 2 and 5
	// relays drain them in runs of five seconds each, repeated until the table
	// holds no message, and checks what a consumer reads. One relay drains
	// 10,000 messages, the fleets 2,000 each: the embedded DynamoDB serialises
	// every request and its queries cost time in proportion to the partition
	// they read (a one-item probe of a bucket holding 1,250 messages takes
	// about 0.1 s under -race), so the fleets' probes and coordination reads
	// would keep 10,000 messages busy for minutes.
	//
	// The relays run in a synctest bubble, whose clock moves only while every
	// goroutine is blocked, and each publish takes fleetPublish of it, so a
	// run's five seconds hold a fixed share of the work. On the wall
	// clock a loaded machine stretched the requests instead: a run's first
	// round alone could outlast its budget, and the fleet stopped making
	// progress.
	t.Run("EndToEnd_MixedWrites_DrainedByFleetsOfShortRuns", func(t *testing.T) {
		if testing.Short() {
			t.Skip("end-to-end drain of 10,000 messages")
		}
		for _, c := range []struct{ relays, messages int }{{1, 10_000}, {2, 2_000}, {5, 2_000}} {
			const budget = 5 * time.Second
			t.Run(fmt.Sprintf("%d relays", c.relays), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newSim(t)
					l, mix := b.enqueueMixed(t, workload{messages: c.messages, keys: 500, writers: 4, valueSize: 100, seed: uint64(c.relays)})
					before := b.ddb.Counter.Snapshot()

					began := b.clock.Now()
					stats := b.drainWithFleet(t, c.relays, c.messages, budget)
					simulated := b.clock.Now().Sub(began)
					reqs := b.ddb.Counter.Snapshot().Since(before)

					messages, owners := b.tableState(t)
					if messages != 0 || len(owners) != 0 {
						t.Fatalf("after the fleet stopped the table holds %d messages and leases naming %v", messages, owners)
					}
					d := b.verify(t, l)
					if stats.deleted < c.messages {
						t.Fatalf("the relays deleted %d messages, fewer than the %d enqueued", stats.deleted, c.messages)
					}
					// The publishes alone take longer than a run's budget, so no
					// fleet drains in one run per relay.
					if stats.runs <= c.relays {
						t.Fatalf("%d relays drained the table in %d runs: the runs were not short", c.relays, stats.runs)
					}
					t.Logf("%d relays, %d messages over 500 keys (%s) enqueued; %d relays drained them in %v simulated: %d runs (%d budget, %d drained, %d joined nothing, %d release skipped, %d failed cycles), %d published, %d deleted, %d records read, %d duplicates; %.2f DynamoDB requests per message (%v)",
						c.relays, c.messages, mix, c.relays, simulated, stats.runs, stats.budget, stats.drained,
						stats.peerLive, stats.skipped, stats.errors, stats.published, stats.deleted, d.records, d.duplicates,
						float64(reqs.TotalRequests())/float64(c.messages), reqs.Requests)
				})
			})
		}
	})
}

// fleetPublish is how long a publish takes on the fleet's clock;
// fleetLimit bounds the simulated time a fleet may take to drain.
const (
	fleetPublish = 200 * time.Millisecond
	fleetLimit   = 10 * time.Minute
)

// drainWithFleet runs n relays on the backend's clock, each
// repeating short runs until the table holds no message and its own last
// run released its leases.
func (b *backend) drainWithFleet(t *testing.T, n, messages int, budget time.Duration) *fleetStats {
	t.Helper()
	ctx := t.Context()
	limit := b.clock.Now().Add(fleetLimit)
	stats := &fleetStats{}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		r := b.newRig(t, outbox.RelayOptions{
			RelayID: fmt.Sprintf("relay-%d", i), BatchSize: 100,
			LeaseDuration: 15 * time.Second, LeaseRenewInterval: 4 * time.Second, PollInterval: 250 * time.Millisecond,
			IdleTimeout: 200 * time.Millisecond, ErrorBackoff: 50 * time.Millisecond, StopMargin: budget / 3,
		}, nil)
		r.pub.setLatency(fleetPublish)
		wg.Go(func() {
			for {
				res, err := r.relay.Run(ctx, outbox.RunInput{Deadline: b.clock.Now().Add(budget)})
				if err != nil {
					errs <- err
					return
				}
				stats.add(res)
				if b.clock.Now().After(limit) {
					errs <- fmt.Errorf("relay-%d: the fleet did not drain the table in %v of simulated time (%d of %d deleted, last run %+v)", i, fleetLimit, stats.total(), messages, res)
					return
				}
				if stats.total() < messages || res.ReleaseSkipped {
					continue
				}
				// Relays that both published a batch (a lease lapsed
				// meanwhile) may both delete it, so the sum can reach the
				// count before the table is empty.
				pending, err := r.store.PendingBuckets(ctx, allBuckets)
				if err != nil {
					errs <- err
					return
				}
				if len(pending) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return stats
}
