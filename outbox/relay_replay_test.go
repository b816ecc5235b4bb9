package outbox_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// firstDeliveries lists the ids of key's messages in the order they were
// first published: what a consumer that skips duplicates reads.
func firstDeliveries(p *memPublisher, key string) []outbox.MessageID {
	seen := map[outbox.MessageID]bool{}
	var out []outbox.MessageID
	for _, m := range p.sent() {
		if string(m.Key) == key && !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m.ID)
		}
	}
	return out
}

func TestRelayReplay(t *testing.T) {
	// GoesOutBeforeTheKeysLaterMessages quarantines key b (its
	// second message to a topic Kafka lacks), then commits more messages of b
	// that no relay has parked yet, fixes the topic and replays b, with the
	// relay absent, idle holding the bucket, or draining it when the replay
	// lands. Every message of b is delivered, first deliveries in commit order:
	// the replayed messages go out before b's later ones, wherever those are.
	t.Run("GoesOutBeforeTheKeysLaterMessages", func(t *testing.T) {
		for _, when := range []string{"no relay running", "relay idle holding the bucket", "relay draining the bucket"} {
			t.Run(when, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newRelayEnv(t, 1, func(cfg *outbox.RelayConfig) {
						quarantine(cfg)
						cfg.Options.IdleTimeout = 40 * time.Second
					})
					var want []outbox.MessageID
					var poison outbox.MessageID
					for i := range 12 {
						m := e.store.add(0, []string{"a", "b", "c"}[i%3])
						if m.Key[0] == 'b' {
							want = append(want, m.ID)
						}
						if i == 4 {
							poison = m.ID // b's second message
						}
					}
					e.pub.poison[poison] = outbox.ParkUnknownTopic
					e.run(t, outbox.RunInput{})
					if n := len(e.store.mem.Parked(0)); n != 3 {
						t.Fatalf("parked %d, want b's last 3", n)
					}

					// Later messages of b, committed after the park, then the
					// topic exists and an operator replays b.
					replay := func() {
						for range 3 {
							want = append(want, e.store.add(0, "b").ID)
							e.store.add(0, "a")
						}
						e.pub.mu.Lock()
						delete(e.pub.poison, poison)
						e.pub.mu.Unlock()
						e.store.replay(0, "b")
					}
					switch when {
					case "no relay running":
						replay()
						e.run(t, outbox.RunInput{})
					case "relay idle holding the bucket":
						done := make(chan struct{})
						go func() {
							defer close(done)
							e.run(t, outbox.RunInput{})
						}()
						time.Sleep(5 * time.Second)
						synctest.Wait()
						replay()
						<-done
					case "relay draining the bucket":
						for range 30 {
							e.store.add(0, "a")
						}
						e.store.mu.Lock()
						e.store.afterFetch = func(int) {
							e.store.mu.Lock()
							e.store.afterFetch = nil
							e.store.mu.Unlock()
							replay()
						}
						e.store.mu.Unlock()
						e.run(t, outbox.RunInput{})
					}
					if got := firstDeliveries(e.pub, "b"); !slices.Equal(got, want) {
						var order []int
						for _, id := range got {
							order = append(order, slices.Index(want, id))
						}
						t.Fatalf("b's messages (numbered in commit order) first delivered as %v", order)
					}
					if e.store.pending() != 0 || len(e.store.mem.Parked(0)) != 0 {
						t.Fatalf("pending %d, parked %d; want everything delivered", e.store.pending(), len(e.store.mem.Parked(0)))
					}
				})
			})
		}
	})

	// A replay Kafka refuses again leaves the message parked and unmarked, its
	// key quarantined, and the bucket's request withdrawn: the relay does not
	// spin on it, and the key's later messages keep parking behind it.
	t.Run("RefusedAgainStaysParked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, quarantine)
			poison := e.store.add(0, "b")
			e.store.add(0, "b")
			e.pub.poison[poison.ID] = outbox.ParkUnknownTopic
			e.run(t, outbox.RunInput{})
			e.store.replay(0, "b")
			e.store.add(0, "b")
			e.run(t, outbox.RunInput{})
			if n := len(e.pub.sent()); n != 0 {
				t.Fatalf("published %d messages of b, want none: its first is still refused", n)
			}
			if len(e.store.mem.Parked(0)) != 3 || e.store.marked(0) != 0 || len(e.store.requests()) != 0 {
				t.Fatalf("parked %d, marked %d, requests %v; want b's 3 parked, none marked, no request",
					len(e.store.mem.Parked(0)), e.store.marked(0), e.store.requests())
			}
		})
	})
}
