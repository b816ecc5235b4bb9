package e2e

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// notifierFunc runs a function per wake-up.
type notifierFunc func(context.Context, outbox.WakeUp) error

func (f notifierFunc) Notify(ctx context.Context, w outbox.WakeUp) error { return f(ctx, w) }

func TestStranded(t *testing.T) {
	// MessageRace_OwnersProbeAfterReleaseWakesARelay is the race
	// the post-release probe exists for: a message commits while its bucket's
	// owner stops, the relay its writer woke sees the owner still holding the
	// lease and leaves the work to it, and the owner, which had found the
	// bucket empty, releases. Only the owner's probe after the release finds
	// the message; its wake-up must reach a relay that publishes it.
	t.Run("MessageRace_OwnersProbeAfterReleaseWakesARelay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := b.enqueueBuckets(t, 1, 5, 100)
			woken := b.newRig(t, testOpts("relay-b"), nil)

			var wakes []outbox.WakeUp
			var wokenRun outbox.RunResult
			owner := b.newRig(t, testOpts("relay-a"), func(c *outbox.RelayConfig) {
				c.MaxHops = 3
				c.Notifier = notifierFunc(func(ctx context.Context, w outbox.WakeUp) error {
					wakes = append(wakes, w)
					// The notified relay runs while the owner waits for Notify:
					// deterministic, and the owner has already released.
					res, err := woken.relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: w.Buckets, Hop: w.Hop, Deadline: b.clock.Now().Add(time.Minute)})
					if err != nil {
						t.Errorf("woken run: %v", err)
					}
					wokenRun = res
					return nil
				})
			})

			var arrived outbox.RunResult
			owner.store.setBeforeRelease(func() {
				owner.store.setBeforeRelease(nil)
				// The owner found its bucket empty and is stopping. A message
				// commits now, and its writer's wake-up reaches a relay while the
				// owner still holds the lease.
				late, err := b.writer.Enqueue(t.Context(), b.message(t, bucketKeys(t, 1)[0], 100))
				if err != nil {
					t.Errorf("enqueue during the stop: %v", err)
					return
				}
				l.add(late)
				res, err := woken.relay.Run(t.Context(), outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{late.Bucket()}, Deadline: b.clock.Now().Add(time.Minute)})
				if err != nil {
					t.Errorf("notified run: %v", err)
				}
				arrived = res
			})

			res := owner.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			if t.Failed() {
				t.FailNow()
			}
			if res.Reason != outbox.StopDrained || res.Deleted != 5 {
				t.Fatalf("owner: reason %s, deleted %d; want drained after 5", res.Reason, res.Deleted)
			}
			if arrived.Joined || arrived.Reason != outbox.StopPeerLive {
				t.Fatalf("the relay notified during the stop joined=%v reason=%s; want it to trust the live owner", arrived.Joined, arrived.Reason)
			}
			if !res.WakeUpSent || !slices.Equal(res.WorkLeft, []int{0}) || len(wakes) != 1 || !slices.Equal(wakes[0].Buckets, []int{0}) || wakes[0].Hop != 1 {
				t.Fatalf("owner sent wake-up %v (work left %v, wakes %+v); want one hop-1 wake-up for bucket 0", res.WakeUpSent, res.WorkLeft, wakes)
			}
			if !wokenRun.Joined || wokenRun.Deleted != 1 {
				t.Fatalf("woken relay: joined %v, deleted %d; want it to publish the late message", wokenRun.Joined, wokenRun.Deleted)
			}
			if d := b.verify(t, l); d.duplicates != 0 {
				t.Fatalf("%d duplicates", d.duplicates)
			}
			b.wantEmpty(t)
		})
	})
}
