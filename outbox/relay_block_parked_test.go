package outbox_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// blockRelay returns a relay under PoisonBlock on e's store and publisher:
// a drain from a shell without SPILLWAY_POISON_POLICY, or a fleet switched
// back to block.
func blockRelay(t *testing.T, e *relayEnv) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(outbox.RelayConfig{
		Options:   outbox.RelayOptions{RelayID: "relay-block", BucketCount: 1, BatchSize: 10, PoisonPolicy: outbox.PoisonBlock},
		Store:     e.store.observed,
		Publisher: e.pub,
		Clock:     e.clock,
		Hooks:     []outbox.Hook{e.obs},
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// parkKeyB commits twelve messages of keys a, b and c to bucket 0, makes
// b's second one poison, and drains under PoisonQuarantine: b's second
// message and its later ones are parked. It returns b's messages in commit
// order and the poison one.
func parkKeyB(t *testing.T, e *relayEnv) (want []outbox.MessageID, poison outbox.MessageID) {
	t.Helper()
	for i := range 12 {
		m := e.store.add(0, []string{"a", "b", "c"}[i%3])
		if m.Key[0] == 'b' {
			want = append(want, m.ID)
		}
		if i == 4 {
			poison = m.ID
		}
	}
	e.pub.poison[poison] = outbox.ParkUnknownTopic
	e.run(t, outbox.RunInput{})
	if n := len(e.store.mem.Parked(0)); n != 3 {
		t.Fatalf("parked %d, want b's last 3", n)
	}
	e.pub.mu.Lock()
	delete(e.pub.poison, poison)
	e.pub.mu.Unlock()
	return want, poison
}

func TestRelayBlockParked(t *testing.T) {
	// The user's scenario: messages parked under quarantine, the topic fixed,
	// the key marked for replay, then a drain under block with nothing pending
	// in the message partition. The block relay carries the replay out: every
	// parked message is published in order and leaves the parked partition.
	t.Run("UnderBlockCarriesOutMarkedReplays", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, quarantine)
			want, _ := parkKeyB(t, e)
			e.store.replay(0, "b")

			res, err := blockRelay(t, e).Run(t.Context(), outbox.RunInput{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Published != 3 {
				t.Fatalf("block drain published %d, want b's 3 replayed messages", res.Published)
			}
			if _, n := e.obs.count("replay"); n != 3 {
				t.Fatalf("%d replayed messages observed, want 3", n)
			}
			if got := firstDeliveries(e.pub, "b"); !slices.Equal(got, want) {
				t.Fatalf("b first delivered as %v, want %v", got, want)
			}
			if n := len(e.store.mem.Parked(0)); n != 0 || len(e.store.requests()) != 0 {
				t.Fatalf("parked %d, requests %v after the replay; want none", n, e.store.requests())
			}
		})
	})

	// Per-key order under block: later messages of a held-back key are
	// committed while its earlier ones sit parked. A block relay must not
	// publish them ahead of the parked ones: they park behind them, the other
	// keys flow, and after a replay (by either relay) b's first deliveries are
	// in commit order.
	t.Run("UnderBlockKeepsAHeldBackKeyHeldBack", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, quarantine)
			want, _ := parkKeyB(t, e)
			for range 3 {
				want = append(want, e.store.add(0, "b").ID)
				e.store.add(0, "a")
			}
			block := blockRelay(t, e)
			if _, err := block.Run(t.Context(), outbox.RunInput{}); err != nil {
				t.Fatal(err)
			}
			if got := firstDeliveries(e.pub, "b"); len(got) != 1 {
				t.Fatalf("block drain delivered %d messages of b, want only the one before the parked ones", len(got))
			}
			if e.store.pending() != 0 || len(e.store.mem.Parked(0)) != 6 {
				t.Fatalf("pending %d, parked %d; want 0 and b's 6 held back", e.store.pending(), len(e.store.mem.Parked(0)))
			}
			for _, p := range e.store.parkings[3:] {
				if p.Reason != outbox.ParkKeyQuarantined {
					t.Fatalf("the block relay parked %+v, want only key-quarantined parks", p)
				}
			}

			e.store.replay(0, "b")
			if _, err := block.Run(t.Context(), outbox.RunInput{}); err != nil {
				t.Fatal(err)
			}
			if got := firstDeliveries(e.pub, "b"); !slices.Equal(got, want) {
				var order []int
				for _, id := range got {
					order = append(order, slices.Index(want, id))
				}
				t.Fatalf("b's messages (numbered in commit order) first delivered as %v", order)
			}
		})
	})

	// Block still means block for a new poison message: the relay backs its
	// head row off and parks nothing, although the store can park.
	t.Run("UnderBlockParksNoNewPoison", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			poison := e.store.add(0, "a")
			e.store.add(0, "a")
			e.pub.poison[poison.ID] = outbox.ParkUnknownTopic
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if _, err := e.relay.Run(ctx, outbox.RunInput{}); err != nil {
				t.Fatal(err)
			}
			if len(e.store.parkings) != 0 || e.store.pending() != 2 {
				t.Fatalf("parkings %v, pending %d; want none parked and both pending", e.store.parkings, e.store.pending())
			}
		})
	})
}
