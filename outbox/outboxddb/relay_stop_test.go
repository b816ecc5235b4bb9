package outboxddb

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// countingPublisher acknowledges every message.
type countingPublisher struct {
	mu   sync.Mutex
	sent []outbox.Message
}

func (p *countingPublisher) Init(context.Context) error { return nil }

func (p *countingPublisher) Publish(_ context.Context, msgs []outbox.Message) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = append(p.sent, msgs...)
	return len(msgs), nil
}

// wakeUps records the wake-ups a relay sends.
type wakeUps struct {
	mu  sync.Mutex
	all []outbox.WakeUp
}

func (w *wakeUps) Notify(_ context.Context, u outbox.WakeUp) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, u)
	return nil
}

// run runs relay once; in the bubble its waits pass as soon as every
// goroutine of the test is blocked.
func run(t *testing.T, relay *outbox.Relay, in outbox.RunInput) outbox.RunResult {
	t.Helper()
	res, err := relay.Run(t.Context(), in)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func TestRelayStop(t *testing.T) {
	// CommitDuringTheOwnersStop_IsRelayedWithoutTheSchedule: a commit
	// lands while its bucket's owner stops, and eventually consistent reads lag
	// behind it. The owner's look at the buckets it released is strongly
	// consistent, so it finds the message and sends the wake-up that relays it.
	t.Run("CommitDuringTheOwnersStop_IsRelayedWithoutTheSchedule", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.BucketCount = 2 })
			e.d.Faults.StaleReads(time.Second)
			w := e.writer(t)
			// A message committed just before the owner releases its leases:
			// the owner is stopping, a woken peer would trust it, so only the
			// owner's own look after the release can find the message.
			var commitErr error
			committed := false
			store := outboxtest.Observe(outboxtest.ObservedStore{Store: e.store(t),
				ReleaseLeasesFunc: func(ctx context.Context, relayID string, next func(context.Context, string) (lease.Release, error)) (lease.Release, error) {
					if !committed {
						_, commitErr = w.Enqueue(context.Background(), newMessage(t, "t", strings.Repeat("k", 1), 1))
						committed = true
					}
					return next(ctx, relayID)
				}})
			pub, wakes := &countingPublisher{}, &wakeUps{}
			newRelay := func(id string, s outbox.Store) *outbox.Relay {
				r, err := outbox.NewRelay(outbox.RelayConfig{
					Options: outbox.RelayOptions{RelayID: id, BucketCount: 2},
					Store:   s, Publisher: pub, Clock: e.clock, Notifier: wakes, Logger: testLogger(t), MaxHops: 3,
				})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}

			res := run(t, newRelay("relay-a", store), outbox.RunInput{})
			if commitErr != nil {
				t.Fatal(commitErr)
			}
			if !slices.Equal(res.WorkLeft, []int{1}) || len(wakes.all) != 1 || !slices.Equal(wakes.all[0].Buckets, []int{1}) {
				t.Fatalf("the stopping owner left %v and sent %+v; want one wake-up for bucket 1", res.WorkLeft, wakes.all)
			}
			// The wake-up relays the message.
			woken := run(t, newRelay("relay-b", e.store(t)), outbox.RunInput{
				Trigger: outbox.TriggerWake, Buckets: wakes.all[0].Buckets, Hop: wakes.all[0].Hop})
			if !woken.Joined || woken.Published != 1 || len(pub.sent) != 1 {
				t.Fatalf("woken relay: %+v, %d sent", woken, len(pub.sent))
			}
		})
	})
}
