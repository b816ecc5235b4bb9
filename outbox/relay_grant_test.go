package outbox_test

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// peer returns a second relay, id, on e's store and publisher.
func (e *relayEnv) peer(t *testing.T, id string) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(outbox.RelayConfig{
		Options: outbox.RelayOptions{RelayID: id, BucketCount: e.store.buckets, BatchSize: 10, PoisonPolicy: outbox.PoisonQuarantine},
		Store:   e.store.observed, Publisher: e.pub, Clock: e.clock, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRelayGrant(t *testing.T) {
	// A relay whose renewals are throttled parks the failing head row of key k
	// with a park its SDK retries past the lease's end. Meanwhile relay-b
	// claims the bucket and reads its parked partition, still empty; then the
	// park reaches the table. It must be refused there: had it moved the row,
	// relay-b, which never learns that k is held back, would publish k's
	// second message while the first sits parked.
	t.Run("ParkLandingAfterAPeerClaimedIsRefusedAndKeepsKeyOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, quarantine)
			first := e.store.add(0, "k")
			second := e.store.add(0, "k")
			e.pub.poison[first.ID] = outbox.ParkUnknownTopic
			e.store.renewErr = errors.New("RenewLeases: ThrottlingException")

			parking, land, landed := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var slow, read sync.Once
			e.store.beforePark = func(p outbox.Parking) {
				if p.Lease.Owner == "relay-a" {
					slow.Do(func() {
						close(parking)
						<-land
					})
				}
			}
			doneA := make(chan outbox.RunResult)
			go func() { doneA <- e.run(t, outbox.RunInput{}) }()
			<-parking
			time.Sleep(31 * time.Second) // relay-a's lease (30 s) runs out
			// relay-b's read of the parked partition lets the park land.
			e.store.afterParkedKeys = func(int) {
				read.Do(func() {
					close(land)
					// The slow park has reached the table (applied or refused)
					// before relay-b fetches.
					for e.store.count("park") == 0 {
						time.Sleep(time.Millisecond)
					}
					close(landed)
				})
			}
			if _, err := e.peer(t, "relay-b").Run(t.Context(), outbox.RunInput{}); err != nil {
				t.Fatal(err)
			}
			<-landed
			<-doneA

			for _, m := range e.pub.sent() {
				if m.ID == second.ID {
					t.Fatalf("k's second message was published while its first is parked: sent %v", keysSent(e.pub, 0))
				}
			}
			if len(e.store.parkings) != 2 || e.store.parkings[0].Sequence != first.Sequence() || e.store.parkings[0].Lease.Owner != "relay-b" {
				t.Fatalf("parkings %+v, want relay-b's park of k's first message, then its second behind it", e.store.parkings)
			}
			if n, _ := e.obs.count("lost"); n == 0 {
				t.Fatalf("relay-a reported no lost lease")
			}
		})
	})

	// A held-back key with a deep backlog: a batch of 500 whose rows of key k
	// all park behind k's first message, at 61 ms a park, outlives the 30 s
	// lease. Every park and the publish of the batch's other key that follows
	// ask for a grant as they start, so the relay renews between the parks and
	// no publish starts with less than the margin of lease in the table.
	t.Run("LongParkLoopStartsNoPublishWithoutTheMargin", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, func(cfg *outbox.RelayConfig) {
				quarantine(cfg)
				cfg.Options.BatchSize = 500
			})
			margin := lease.KeepMargin(outbox.DefaultLeaseDuration, outbox.DefaultLeaseRenewInterval)
			first := e.store.add(0, "k")
			e.pub.poison[first.ID] = outbox.ParkUnknownTopic
			for range 499 {
				e.store.add(0, "k")
			}
			e.store.add(0, "x")
			e.store.parkDelay = 61 * time.Millisecond
			var thin []string
			e.pub.onPublish = func(msgs []outbox.Message) {
				now := time.Now()
				if l := e.store.mem.Lease(0); l.Owner != "relay-a" || l.ExpiresAt.Sub(now) < margin {
					thin = append(thin, fmt.Sprintf("%s at +%v: lease %s until +%v", msgs[0].Key, now.Sub(t0), l.Owner, l.ExpiresAt.Sub(t0)))
				}
			}
			e.run(t, outbox.RunInput{})
			if len(thin) > 0 {
				t.Fatalf("publishes started with less than %v of lease: %v", margin, thin)
			}
			// The parks renewed as they went: the lease never ran out.
			if n, _ := e.obs.count("lost"); n != 0 {
				t.Fatalf("%d lease losses, want none", n)
			}
			if got := keysSent(e.pub, 0); len(got) != 1 || got[0] != "x" || len(e.store.mem.Parked(0)) != 500 {
				t.Fatalf("sent %v, parked %d; want x alone and k's 500 messages parked", got, len(e.store.mem.Parked(0)))
			}
		})
	})

	// The soak's hang: four buckets publish slowly at once, so the renewal
	// comes due for all of them at the same instant, and the renewal takes 2 s
	// to answer. Each publish waited for that renewal on a mutex the renewing
	// goroutine held across its request; a mutex wait is not durable in a
	// synctest bubble, so the bubble's clock stopped while the renewal slept
	// in simulated time, and the run never ended. Now one goroutine renews and
	// every wait is a channel receive: the run ends, with one renewal for the
	// four buckets each time it is due.
	t.Run("ConcurrentPublishesShareOneSlowRenewal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 4, nil)
			for b := range 4 {
				e.store.add(b, "k")
			}
			e.pub.delay = 25 * time.Second
			e.store.renewDelay = 2 * time.Second
			res := e.run(t, outbox.RunInput{})
			if res.Deleted != 4 {
				t.Fatalf("deleted %d, want the four messages deleted under the renewed lease", res.Deleted)
			}
			if n := e.store.count("write renew"); n != 2 {
				t.Fatalf("renewals during the 25 s publishes = %d, want 2 (at 10 s and 20 s), shared by the four buckets", n)
			}
		})
	})
}
