package outbox_test

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

func quarantine(cfg *outbox.RelayConfig) { cfg.Options.PoisonPolicy = outbox.PoisonQuarantine }

// keysSent lists the keys of the published messages of bucket in order.
func keysSent(p *memPublisher, bucket int) []string {
	var out []string
	for _, m := range p.sent() {
		if m.Bucket() == bucket {
			out = append(out, string(m.Key))
		}
	}
	return out
}

// addUnreadableRow fills bucket 0 with ten rows of key "a", an unreadable
// row of key "a", then three rows of key tail, and returns the unreadable
// row.
func addUnreadableRow(e *relayEnv, tail string) outbox.Message {
	for range 10 {
		e.store.add(0, "a")
	}
	bad := e.store.add(0, "a")
	for range 3 {
		e.store.add(0, tail)
	}
	e.store.unreadable[0] = map[int64]bool{bad.Sequence(): true}
	return bad
}

func TestRelayQuarantine(t *testing.T) {
	t.Run("BlockRelaysTheValidPrefixAndBacksOffAnUnreadableRow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			addUnreadableRow(e, "a")
			res := e.run(t, outbox.RunInput{Deadline: t0.Add(12 * time.Second)})
			// The ten rows before the bad one are relayed; the bad one blocks the
			// rest of its bucket and is retried on the head-row backoff.
			if got := len(e.pub.sent()); got != 10 || res.Deleted != 10 {
				t.Fatalf("published %d, deleted %d, want 10 and 10", got, res.Deleted)
			}
			if n, _ := e.obs.count("headRowRetry"); n < 2 {
				t.Fatalf("head-row retries = %d, want the bad row retried", n)
			}
			if e.store.pending() != 4 || e.store.count("park") != 0 {
				t.Fatalf("pending %d, parks %d; want 4 left and nothing parked under block", e.store.pending(), e.store.count("park"))
			}
		})
	})

	t.Run("ParksAnUnreadableRowAndRelaysTheRest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, quarantine)
			bad := addUnreadableRow(e, "b")
			res := e.run(t, outbox.RunInput{})
			if res.Deleted != 13 || e.store.pending() != 0 {
				t.Fatalf("deleted %d, pending %d; want 13 and 0", res.Deleted, e.store.pending())
			}
			if len(e.store.parkings) != 1 || e.store.parkings[0].Reason != outbox.ParkUndecodableItem || e.store.parkings[0].Sequence != bad.Sequence() {
				t.Fatalf("parkings %+v, want the bad row as undecodable-item", e.store.parkings)
			}
		})
	})

	t.Run("KeepsPerKeyOrderWhileOtherKeysFlow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, quarantine)
			var poison outbox.Message
			for i := range 30 {
				m := e.store.add(0, []string{"a", "b", "c"}[i%3])
				if i == 4 {
					poison = m // the second message of key b
				}
			}
			e.pub.poison[poison.ID] = outbox.ParkUnknownTopic
			e.run(t, outbox.RunInput{})

			// Keys a and c are delivered whole; b only up to the poison message.
			sent := keysSent(e.pub, 0)
			count := map[string]int{}
			for _, k := range sent {
				count[k]++
			}
			if count["a"] != 10 || count["c"] != 10 || count["b"] != 1 {
				t.Fatalf("delivered per key %v, want a:10 c:10 b:1", count)
			}
			if e.store.pending() != 0 || len(e.store.mem.Parked(0)) != 9 {
				t.Fatalf("pending %d, parked %d; want 0 and 9 (b's poison and its 8 successors)", e.store.pending(), len(e.store.mem.Parked(0)))
			}
			if got := e.store.parkings[0]; got.Reason != outbox.ParkUnknownTopic || got.Sequence != poison.Sequence() || got.Attempts != 1 {
				t.Fatalf("first parking %+v, want the poison row, unknown-topic, 1 attempt", got)
			}
			for _, p := range e.store.parkings[1:] {
				if p.Reason != outbox.ParkKeyQuarantined || p.Behind == 0 {
					t.Fatalf("parking %+v, want key-quarantined behind an earlier one", p)
				}
			}
			// The parked partition was read once, when the bucket was claimed.
			if n := e.store.count("parked"); n != 1 {
				t.Fatalf("parked keys read %d times, want 1", n)
			}

			// Replay: b's parked messages are published first, in order, then
			// the later one, once the cause is fixed; the next run reads the
			// marks when it claims the bucket.
			delete(e.pub.poison, poison.ID)
			e.store.replay(0, "b")
			e.store.add(0, "b")
			e.run(t, outbox.RunInput{})
			var ids []outbox.MessageID
			for _, m := range e.pub.sent() {
				if string(m.Key) == "b" {
					ids = append(ids, m.ID)
				}
			}
			if len(ids) != 11 || e.store.pending() != 0 || len(e.store.mem.Parked(0)) != 0 {
				t.Fatalf("b delivered %d times, pending %d, parked %d; want 11, 0, 0", len(ids), e.store.pending(), len(e.store.mem.Parked(0)))
			}
			// b's messages in their original order: the poison message is b's
			// second delivery, with its original id.
			if ids[1] != poison.ID {
				t.Fatalf("after replay the poison message is not b's second delivery")
			}
		})
	})

	t.Run("ParksAfterMaxAttemptsAndKeylessAlone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, func(cfg *outbox.RelayConfig) {
				quarantine(cfg)
				cfg.Options.PoisonMaxAttempts = 3
			})
			m := newMsg("")
			m.Key = nil
			keyless := e.store.put(0, m)
			for range 4 {
				e.store.add(0, "")
			}
			// A retriable failure, forever: parked after three attempts.
			e.pub.failures[keyless.ID] = 1 << 30
			e.run(t, outbox.RunInput{})
			if len(e.store.parkings) != 1 || e.store.parkings[0].Reason != outbox.ParkMaxAttempts || e.store.parkings[0].Attempts != 3 {
				t.Fatalf("parkings %+v, want one max-attempts parking after 3 attempts", e.store.parkings)
			}
			// A keyless message quarantines nothing: the empty-key messages, a
			// real key, flow.
			if got := len(e.pub.sent()); got != 4 || e.store.pending() != 0 {
				t.Fatalf("published %d, pending %d; want 4 and 0", got, e.store.pending())
			}
		})
	})

	t.Run("NeedsAQuarantineStore", func(t *testing.T) {
		_, err := outbox.NewRelay(outbox.RelayConfig{
			Options: outbox.RelayOptions{RelayID: "r", PoisonPolicy: outbox.PoisonQuarantine},
			Store:   struct{ outbox.Store }{newMemStore(nil, 1).observed}, Publisher: newMemPublisher(),
		})
		if !errors.Is(err, outbox.ErrMisconfigured) {
			t.Fatalf("err = %v, want a misconfiguration", err)
		}
		_, err = outbox.NewRelay(outbox.RelayConfig{
			Options: outbox.RelayOptions{RelayID: "r", PoisonPolicy: "skip"},
			Store:   newMemStore(nil, 1).observed, Publisher: newMemPublisher(),
		})
		if !errors.Is(err, outbox.ErrMisconfigured) {
			t.Fatalf("err = %v, want a misconfiguration for an unknown policy", err)
		}
	})

	// HooksCarryTypedReasons reads the reasons a run reports from
	// their own arguments: the park reason of OnPark, and the run's result,
	// with its stop reason and unrounded budget share, in OnRunEnd.
	t.Run("HooksCarryTypedReasons", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, quarantine)
			addUnreadableRow(e, "b")
			res := e.run(t, outbox.RunInput{Deadline: t0.Add(7 * time.Minute)})
			var parks []outbox.ParkReason
			var stop *event
			e.obs.mu.Lock()
			for i, ev := range e.obs.events {
				switch ev.kind {
				case "park":
					parks = append(parks, ev.park)
				case "runEnd":
					stop = &e.obs.events[i]
				}
			}
			e.obs.mu.Unlock()
			if !slices.Equal(parks, []outbox.ParkReason{outbox.ParkUndecodableItem}) {
				t.Fatalf("OnPark reasons %q, want [%s]", parks, outbox.ParkUndecodableItem)
			}
			if stop == nil || stop.relayID != "relay-a" || stop.res.Reason != res.Reason || stop.res.Reason != outbox.StopDrained {
				t.Fatalf("OnRunEnd %+v, want relay-a's result with reason %s (the result's %s)", stop, outbox.StopDrained, res.Reason)
			}
			if stop.res.BudgetUsed != res.BudgetUsed || res.BudgetUsed <= 0 || res.BudgetUsed == float64(int(res.BudgetUsed)) {
				t.Fatalf("OnRunEnd budget %v, result %v; want the result's unrounded share", stop.res.BudgetUsed, res.BudgetUsed)
			}
		})
	})
}
