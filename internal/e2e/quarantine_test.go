package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

func TestQuarantine(t *testing.T) {
	// EndToEnd_QuarantineAndReplayUnderAFleetWithCrashes runs three
	// quarantine relays in short runs that crash (their context is cancelled
	// at a random instant) or hand over at their budget, while three keys each
	// hold a message for a topic the brokers do not have yet. The other keys
	// drain; the three keys are parked from their poison message on. Then the
	// topic is created and everything parked is replayed while the fleet keeps
	// crashing. Every message is delivered, each key's first deliveries in
	// enqueue order, and nothing stays in the table or parked.
	//
	// The relays run in a synctest bubble, whose clock moves only while every
	// goroutine is blocked. Each publish takes fleetPublish of it, and each
	// relay starts a third of a millisecond after the one before, so the
	// relays' timers, set in whole milliseconds, do not fall due together: the
	// figures are the same on every run, whatever the machine's load. The test
	// checks the table, and creates the topic and replays, while every relay
	// is parked (synctest.Wait), every checkEvery of simulated time. On the
	// wall clock a loaded machine stretched the requests against the budgets
	// and the crash timeouts: the runs, crashes and duplicates changed from run
	// to run, and a publisher that could not start within its budget failed
	// its run.
	t.Run("EndToEnd_QuarantineAndReplayUnderAFleetWithCrashes", func(t *testing.T) {
		if testing.Short() {
			t.Skip("end-to-end fleet run")
		}
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := newLedger()
			var msgs []outbox.Message
			for i := range 10 {
				for k := range 12 {
					tp := topic
					if k < 3 && i == 3 {
						tp = late // the fourth message of keys 0-2
					}
					msgs = append(msgs, b.messageTo(t, tp, keyName(k), 64))
				}
			}
			b.enqueueLists(t, l, msgs)

			ctx := t.Context()
			began := b.clock.Now()
			limit := began.Add(fleetLimit)
			errs := make(chan error, 4)
			s, err := outboxddb.NewStore(b.ddb.Client, outboxddb.StoreOptions{Options: b.opts})
			if err != nil {
				t.Fatal(err)
			}
			check := &quarantineCheck{b: b, store: s, late: late, phase: 1}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			// The relays end their current runs, whether the test got to its
			// end or failed.
			halt := sync.OnceFunc(func() {
				close(stop)
				wg.Wait()
			})
			defer halt()
			stats := &fleetStats{}
			var crashes atomic.Int64
			for i := range 3 {
				r := b.newRig(t, outbox.RelayOptions{
					RelayID: fmt.Sprintf("relay-%d", i), BatchSize: 50, PoisonPolicy: outbox.PoisonQuarantine,
					LeaseDuration: 6 * time.Second, LeaseRenewInterval: 2 * time.Second, PollInterval: 100 * time.Millisecond,
					IdleTimeout: 200 * time.Millisecond, ErrorBackoff: 50 * time.Millisecond, StopMargin: 300 * time.Millisecond,
				}, nil)
				c := &crasher{clock: b.clock}
				r.store.setBeforeCall(c.beforeCall)
				r.pub.setWrap(func(ctx context.Context, _ []outbox.Message, publish func() (int, error)) (int, error) {
					c.beforeCall()
					n, err := publish()
					if err == nil && !sleep.For(fleetPublish, ctx.Done()) {
						err = ctx.Err()
					}
					return n, err
				})
				rnd := rand.New(rand.NewPCG(uint64(i), 13))
				wg.Go(func() {
					if !sleep.For(time.Duration(i)*time.Millisecond/3, stop) {
						return
					}
					for {
						start := b.clock.Now()
						runCtx, crash := context.WithCancel(ctx)
						c.arm(start.Add(time.Duration(500+rnd.IntN(2500))*time.Millisecond), crash)
						res, err := r.relay.Run(runCtx, outbox.RunInput{Deadline: start.Add(time.Second + time.Duration(rnd.IntN(1500))*time.Millisecond)})
						c.arm(time.Time{}, nil)
						crashed := runCtx.Err() != nil && ctx.Err() == nil
						crash()
						if crashed {
							crashes.Add(1)
						}
						if err != nil && !crashed && errors.Is(err, outbox.ErrMisconfigured) {
							errs <- err
							return
						}
						stats.add(res)
						if b.clock.Now().After(limit) {
							errs <- fmt.Errorf("relay-%d: the fleet did not finish in %v of simulated time (%d runs)", i, fleetLimit, stats.runs)
							return
						}
						// The next invocation of the schedule.
						if !sleep.For(100*time.Millisecond, stop) {
							return
						}
					}
				})
			}
			for {
				synctest.Wait()
				finished, err := check.look(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if finished {
					break
				}
				select {
				case <-time.After(checkEvery):
				case err := <-errs:
					t.Fatal(err)
				}
			}
			finished := time.Now()
			halt()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			d := b.verify(t, l)
			t.Logf("%d messages over 12 keys, 3 keys quarantined and replayed (%d replay passes) in %v simulated: %d runs (%d crashed, %d budget, %d drained, %d joined nothing, %d release skipped, %d failed cycles), %d published, %d deleted, %d records read, %d duplicates",
				len(msgs), check.replays, finished.Sub(began), stats.runs, crashes.Load(), stats.budget, stats.drained, stats.peerLive, stats.skipped, stats.errors,
				stats.published, stats.deleted, d.records, d.duplicates)
		})
	})
}

// checkEvery is how often, in simulated time, the quarantine test looks at
// the table.
const checkEvery = 200 * time.Millisecond

// quarantineCheck follows the quarantine test's phases from the test's
// goroutine, while every relay is parked. Phase 1: the other keys drain,
// keys 0-2 park from their poison message on (7 messages each). Phase 2:
// the topic exists, and what is parked is replayed until nothing is left.
type quarantineCheck struct {
	b     *backend
	store *outboxddb.Store
	late  string

	phase   int // 1 or 2
	replays int
}

// look checks the table once and reports whether the test is finished.
func (c *quarantineCheck) look(ctx context.Context) (bool, error) {
	pending, err := c.store.PendingBuckets(ctx, allBuckets)
	if err != nil || len(pending) > 0 {
		return false, err
	}
	parked, err := c.store.ListParked(ctx)
	if err != nil {
		return false, err
	}
	if c.phase == 1 {
		if len(parked) < 21 {
			return false, nil
		}
		if len(parked) != 21 {
			return false, fmt.Errorf("%d messages parked, want the 3 keys' 7 each", len(parked))
		}
		if err := c.b.kafka.CreateTopic(ctx, c.late, 3); err != nil {
			return false, err
		}
		c.phase = 2
	}
	if len(parked) == 0 {
		return true, nil
	}
	// A relay holding a bucket sees the request within a renewal interval
	// (or through a refused park behind a marked message) and publishes
	// the key's marked messages before its later ones. Anything parked
	// after the marks (behind a message marked later) is marked again.
	if _, err := c.store.RequestReplay(ctx, parked, ""); err != nil {
		return false, err
	}
	c.replays++
	return false, nil
}

// crasher crashes a relay's run: before the run's first store call or
// publish at or after the instant it was armed with, it cancels the run's
// context. The relay checks its own calls, so the crash lands at the same
// point of the run on every machine; a relay parked at the instant has
// nothing to lose until its next call.
type crasher struct {
	clock outbox.Clock

	mu     sync.Mutex
	at     time.Time
	cancel context.CancelFunc
}

func (c *crasher) arm(at time.Time, cancel context.CancelFunc) {
	c.mu.Lock()
	c.at, c.cancel = at, cancel
	c.mu.Unlock()
}

func (c *crasher) beforeCall() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil && !c.clock.Now().Before(c.at) {
		c.cancel()
	}
}
