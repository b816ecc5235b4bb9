package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// fleetTimeout bounds the wall time of a fleet on the system clock.
var fleetTimeout = 5 * time.Minute

// TestEndToEnd_QuarantineAndReplayUnderAFleetWithCrashes runs three
// quarantine relays in short runs that crash (their context is cancelled
// at a random moment) or hand over at their budget, while three keys each
// hold a message for a topic the brokers do not have yet. The other keys
// drain; the three keys are parked from their poison message on. Then the
// topic is created and everything parked is replayed while the fleet keeps
// crashing. A run whose publisher could not start within its budget
// (a loaded machine) is retried, as the next schedule would. Every message
// is delivered, each key's first deliveries in
// enqueue order, and nothing stays in the table or parked.
func TestEndToEnd_QuarantineAndReplayUnderAFleetWithCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end fleet run")
	}
	b := newBackend(t, outbox.SystemClock{})
	const late = "late-topic"
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

	ctx, cancel := context.WithTimeout(t.Context(), fleetTimeout)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	stats := &fleetStats{}
	for i := range 3 {
		r := b.newRig(t, outbox.RelayOptions{
			RelayID: fmt.Sprintf("relay-%d", i), BatchSize: 50, PoisonPolicy: outbox.PoisonQuarantine,
			LeaseDuration: 6 * time.Second, LeaseRenewInterval: 2 * time.Second, PollInterval: 100 * time.Millisecond,
			IdleTimeout: 200 * time.Millisecond, ErrorBackoff: 50 * time.Millisecond, StopMargin: 300 * time.Millisecond,
		}, nil)
		rnd := rand.New(rand.NewPCG(uint64(i), 13))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				runCtx, crash := context.WithTimeout(ctx, time.Duration(500+rnd.IntN(2500))*time.Millisecond)
				res, err := r.relay.Run(runCtx, outbox.RunInput{Deadline: b.clock.Now().Add(time.Second + time.Duration(rnd.IntN(1500))*time.Millisecond)})
				crashed := runCtx.Err() != nil && ctx.Err() == nil
				crash()
				if err != nil && !crashed && outbox.IsMisconfigured(err) {
					errs <- err
					return
				}
				stats.add(res)
			}
		})
	}
	s, err := outboxddb.NewStore(b.ddb.Client, b.opts)
	if err != nil {
		t.Fatal(err)
	}
	// Phase 1: the other keys drain, keys 0-2 park from their poison
	// message on (7 messages each). Phase 2: the topic exists, replay.
	replays := 0
	for phase := 1; ; {
		if err := ctx.Err(); err != nil {
			t.Fatalf("phase %d did not finish: %v (%d runs so far)", phase, err, stats.runs)
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(200 * time.Millisecond):
		}
		pending, err := s.PendingBuckets(ctx, allBuckets)
		if err != nil {
			t.Fatal(err)
		}
		parked, err := s.ListParked(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) > 0 {
			continue
		}
		if phase == 1 {
			if len(parked) < 21 {
				continue
			}
			if len(parked) != 21 {
				t.Fatalf("%d messages parked, want the 3 keys' 7 each", len(parked))
			}
			if err := b.kafka.CreateTopic(ctx, late, 3); err != nil {
				t.Fatal(err)
			}
			phase = 2
		}
		if len(parked) == 0 {
			break
		}
		// A replay that lands while a relay still holds the key's old
		// parked set is noticed through a refused park; anything parked
		// again (behind a message parked again) is replayed again.
		if _, err := b.writer.ReplayParked(ctx, parked, ""); err != nil && !errors.Is(err, outbox.ErrParkConflict) {
			t.Fatal(err)
		}
		replays++
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d := b.verify(t, l)
	t.Logf("%d messages over 12 keys, 3 keys quarantined and replayed (%d replay passes): %d runs (%d budget, %d drained, %d joined nothing, %d release skipped, %d failed cycles), %d records read, %d duplicates",
		len(msgs), replays, stats.runs, stats.budget, stats.drained, stats.peerLive, stats.skipped, stats.errors, d.records, d.duplicates)
}
