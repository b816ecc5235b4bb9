package e2e

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// leaseDuration is the lease of the tests' relays.
const leaseDuration = 30 * time.Second

// allBuckets are the buckets of the default bucket count, which one relay
// alone claims whatever they hold.
var allBuckets = []int{0, 1, 2, 3, 4, 5, 6, 7}

// testOpts are relay options for the tests: batches of 10, 30-second
// leases renewed every 10 seconds.
func testOpts(id string) outbox.RelayOptions {
	return outbox.RelayOptions{
		RelayID: id, BatchSize: 10, LeaseDuration: leaseDuration, LeaseRenewInterval: 10 * time.Second,
		PollInterval: time.Second, IdleTimeout: 2 * time.Second, ErrorBackoff: time.Second, StopMargin: 4 * time.Second,
	}
}

// newSim starts the backends in memory at t0 for a test in a synctest
// bubble: time moves only while every goroutine of the test is blocked, so
// a relay's budget, linger and polls are simulated time and the backends'
// work takes none of it.
func newSim(t *testing.T, topics ...string) *backend {
	t.Helper()
	if now := time.Now(); now.After(t0) {
		t.Fatalf("the clock reads %v, past t0: run the test in a synctest bubble", now)
	}
	// Before the backends start: their clients' tickers would each fire
	// all the way to t0. Their set-up waits on no timer, so the test
	// starts at t0.
	time.Sleep(time.Until(t0))
	return newBackend(t, true, topics...)
}

func TestLifetime(t *testing.T) {
	t.Run("BudgetReachedMidDrain_ReleasesAndTheNextRunContinues", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := b.enqueueBuckets(t, 4, 50, 100)
			a := b.newRig(t, func() outbox.RelayOptions { o := testOpts("relay-a"); o.MaxConcurrency = 1; return o }(), nil)
			// Each publish takes a simulated second: the 8-second budget (12 s
			// minus the 4 s stop margin) ends after 8 batches.
			a.pub.setLatency(time.Second)
			res := a.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(12 * time.Second)})
			if res.Reason != outbox.StopBudget || res.ReleaseSkipped {
				t.Fatalf("first run: reason %s, release skipped %v; want budget with a release", res.Reason, res.ReleaseSkipped)
			}
			if res.Published != res.Deleted || res.Deleted == 0 || res.Deleted >= 200 {
				t.Fatalf("first run published %d and deleted %d of 200, want a part, each deleted once", res.Published, res.Deleted)
			}
			if !slices.Equal(res.Released, allBuckets) || len(res.WorkLeft) == 0 {
				t.Fatalf("released %v with work left in %v, want every bucket released and work left", res.Released, res.WorkLeft)
			}
			messages, owners := b.tableState(t)
			if messages != 200-res.Deleted || len(owners) != 0 {
				t.Fatalf("after the stop the table holds %d messages (want %d) and leases naming %v", messages, 200-res.Deleted, owners)
			}

			a.pub.setLatency(0)
			next := a.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(10 * time.Minute)})
			if next.Reason != outbox.StopDrained || next.Deleted != 200-res.Deleted {
				t.Fatalf("next run: reason %s, deleted %d; want drained after deleting the %d left", next.Reason, next.Deleted, 200-res.Deleted)
			}
			if d := b.verify(t, l); d.duplicates != 0 {
				t.Fatalf("%d duplicates, want none: every published batch was deleted under a valid lease", d.duplicates)
			}
			b.wantEmpty(t)
			t.Logf("budget of 8 s: %d messages in the first run, %d in the next", res.Deleted, next.Deleted)
		})
	})

	// A publish that outlasts the stop's settle point: under a 9 s
	// deadline (budget 6 s, settle point 8 s) the second 4.5 s publish is
	// still in flight at 8 s. The stop goes on without it and releases the
	// leases 20 ms later; the relay returns once the publish has (at 9 s),
	// acting on nothing of it. A peer's first sweep takes the buckets over
	// and publishes those rows again: 10 duplicates, nothing lost.
	t.Run("APublishPastTheSettlePoint_IsLeftBehind_LeasesReleased", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := b.enqueueBuckets(t, 1, 30, 100)
			a := b.newRig(t, testOpts("relay-a"), nil)
			a.pub.setLatency(4500 * time.Millisecond)
			start := b.clock.Now()
			var releasedAt time.Time
			a.store.setBeforeRelease(func() { releasedAt = b.clock.Now() })
			res := a.run(t, outbox.RunInput{Deadline: start.Add(9 * time.Second)})
			if res.Reason != outbox.StopBudget || res.ReleaseSkipped || len(res.Released) != 8 || res.Deleted != 10 {
				t.Fatalf("run: %+v; want budget, 8 released, 10 deleted", res)
			}
			if at := releasedAt.Sub(start); at != 8*time.Second+20*time.Millisecond {
				t.Fatalf("released at +%v, want +8.02 s (the settle point, then the cut drains' grace)", at)
			}
			if _, owners := b.tableState(t); len(owners) != 0 {
				t.Fatalf("leases name %v after the stop, want none", owners)
			}

			peer := b.newRig(t, testOpts("relay-b"), nil)
			took := peer.run(t, outbox.RunInput{Trigger: outbox.TriggerSchedule, Deadline: b.clock.Now().Add(time.Minute)})
			if !took.Joined || took.Deleted != 20 {
				t.Fatalf("peer's first sweep: %+v; want it to join and delete the 20 left", took)
			}
			if d := b.verify(t, l); d.duplicates != 10 {
				t.Fatalf("%d duplicates, want the 10 of the publish left behind", d.duplicates)
			}
			b.wantEmpty(t)
		})
	})

	t.Run("CrashMidPublish_PeerRepublishesTheUndeletedBatch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := b.enqueueBuckets(t, 2, 30, 100)
			a := b.newRig(t, func() outbox.RelayOptions { o := testOpts("relay-a"); o.MaxConcurrency = 1; return o }(), nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			// The process dies: nothing it sends reaches the table any more,
			// and its run ends (a cancellation alone would stop it cleanly).
			crash := func() {
				a.store.kill()
				cancel()
			}
			// The third batch reaches Kafka, then the relay dies before it hears
			// the acknowledgement: nothing after it runs, not even the release.
			var publishes atomic.Int32
			a.pub.setWrap(func(_ context.Context, _ []outbox.Message, publish func() (int, error)) (int, error) {
				n, err := publish()
				if publishes.Add(1) == 3 {
					crash()
					return 0, context.Canceled
				}
				return n, err
			})
			res, err := a.relay.Run(ctx, outbox.RunInput{Deadline: b.clock.Now().Add(10 * time.Minute)})
			if err != nil || res.Reason != outbox.StopCancelled || res.Deleted != 20 {
				t.Fatalf("crashed run: %+v, %v; want cancelled after deleting 2 batches", res, err)
			}
			if _, owners := b.tableState(t); !slices.Equal(owners, slices.Repeat([]string{"relay-a"}, 8)) {
				t.Fatalf("leases name %v, want all 8 still relay-a's", owners)
			}

			peer := b.newRig(t, testOpts("relay-b"), nil)
			took := takeOverOnSchedule(t, b, peer, 5*time.Second)
			if took.res.Deleted != 40 {
				t.Fatalf("peer deleted %d, want the 40 left", took.res.Deleted)
			}
			d := b.verify(t, l)
			if d.duplicates != 10 {
				t.Fatalf("%d duplicates, want the 10 of the batch published by the crashed relay", d.duplicates)
			}
			b.wantEmpty(t)
		})
	})

	t.Run("StallPastTheLease_RenewalRefused_PublishedBatchNotDeleted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := b.enqueueBuckets(t, 1, 20, 100)
			a := b.newRig(t, testOpts("relay-a"), nil)
			stalled, resume := make(chan struct{}), make(chan struct{})
			var stalls atomic.Int32
			a.pub.setWrap(func(_ context.Context, _ []outbox.Message, publish func() (int, error)) (int, error) {
				if stalls.Add(1) == 1 {
					close(stalled)
					<-resume
				}
				return publish()
			})
			renewing, renew := make(chan struct{}), make(chan struct{})
			a.store.setBeforeRenew(func() {
				close(renewing)
				<-renew
				a.store.setBeforeRenew(nil)
			})
			type outcome struct {
				res outbox.RunResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := a.relay.Run(t.Context(), outbox.RunInput{Deadline: b.clock.Now().Add(10 * time.Minute)})
				done <- outcome{res, err}
			}()
			<-stalled
			// The clock reaches the renewal due during the publish; the
			// renewal request is held back while the lease runs out and a peer
			// takes the bucket over and drains it.
			<-renewing
			time.Sleep(time.Until(t0.Add(leaseDuration + time.Second)))
			peer := b.newRig(t, testOpts("relay-b"), nil)
			took := peer.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			if took.Deleted != 20 {
				t.Fatalf("peer deleted %d, want all 20", took.Deleted)
			}
			refused := a.obs.when(func(e event) bool {
				return e.kind == evLeaseLost && e.loss == outbox.LossRenewalRefused
			})
			close(renew)
			<-refused
			close(resume)
			out := <-done
			if out.err != nil {
				t.Fatal(out.err)
			}
			if out.res.Deleted != 0 {
				t.Fatalf("the stalled relay deleted %d messages after losing its lease", out.res.Deleted)
			}
			publishes, _ := a.obs.of(evPublish)
			if len(publishes) == 0 || !errors.Is(publishes[0].err, outbox.ErrLeaseLost) {
				t.Fatalf("publish events %v, want the stalled batch reported as published after the lease was lost", publishes)
			}
			if d := b.verify(t, l); d.duplicates != 10 {
				t.Fatalf("%d duplicates, want the 10 of the stalled batch", d.duplicates)
			}
			b.wantEmpty(t)
		})
	})
}

// takeover is the schedule run that joined.
type takeover struct {
	res     outbox.RunResult
	claimAt time.Time
	sweeps  int
}

// takeOverOnSchedule runs peer as the schedule does, every step, until a
// run joins the fleet, and checks that it claims only once the lapsed
// leases expired and their holder's heartbeat went stale (read from the
// table first: a renewal may have moved them): every earlier sweep leaves
// the work to the live holder.
func takeOverOnSchedule(t *testing.T, b *backend, peer *rig, step time.Duration) takeover {
	t.Helper()
	coord, err := peer.store.ReadCoordination(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var expiry time.Time
	for _, l := range coord.Leases {
		if l.Owner != "" && l.ExpiresAt.After(expiry) {
			expiry = l.ExpiresAt
		}
	}
	for _, r := range coord.Relays {
		if stale := r.LastSeen.Add(leaseDuration); !r.Stopped && stale.After(expiry) {
			expiry = stale
		}
	}
	for sweep := 1; ; sweep++ {
		if sweep > 20 {
			t.Fatal("the peer never took over")
		}
		now := b.clock.Now()
		res := peer.run(t, outbox.RunInput{Trigger: outbox.TriggerSchedule, Deadline: now.Add(time.Minute)})
		if !res.Joined {
			if res.Reason != outbox.StopPeerLive || !now.Before(expiry) {
				t.Fatalf("sweep at +%v: reason %s, want peer-live while the lease holds", now.Sub(t0), res.Reason)
			}
			time.Sleep(step)
			continue
		}
		claims, _ := peer.obs.of(evClaim)
		if len(claims) == 0 || claims[0].at.Before(expiry) {
			t.Fatalf("peer claimed at %v, before the lapsed lease expired at %v", claims, expiry)
		}
		t.Logf("peer took over at +%v after %d sweeps (lease expired at +%v)", claims[0].at.Sub(t0), sweep, expiry.Sub(t0))
		return takeover{res: res, claimAt: claims[0].at, sweeps: sweep}
	}
}

// wantEmpty checks that the table holds no message and no lease names a
// relay.
func (b *backend) wantEmpty(t *testing.T) {
	t.Helper()
	if messages, owners := b.tableState(t); messages != 0 || len(owners) != 0 {
		t.Fatalf("the table holds %d messages and leases naming %v", messages, owners)
	}
}
