package outbox_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// warmRelayEnv is a relay env whose publisher was initialised once: a
// direct run found nothing, lingered and stopped, as a warm execution
// environment's relay did before the wake-up.
func warmRelayEnv(t *testing.T, buckets int, tweak func(*outbox.RelayConfig)) *relayEnv {
	t.Helper()
	e := newRelayEnv(t, buckets, tweak)
	if res := e.run(t, outbox.RunInput{}); !res.Joined || res.Reason != outbox.StopDrained {
		t.Fatalf("warm-up run: %+v", res)
	}
	return e
}

// wake is a wake-up for buckets with an hour of deadline.
func wake(buckets ...int) outbox.RunInput {
	return outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: buckets, Deadline: t0.Add(time.Hour)}
}

func TestRelayJoin(t *testing.T) {
	// A warm publisher's check (a round trip) runs beside the heartbeat and
	// the round's read, and the claims wait for it; a cold initialisation
	// (a connection) is awaited before the heartbeat, so the second look
	// can see a relay woken a moment earlier.
	t.Run("AWarmKafkaCheckRunsBesideTheHeartbeat", func(t *testing.T) {
		for _, warm := range []bool{true, false} {
			synctest.Test(t, func(t *testing.T) {
				e := newRelayEnv(t, 4, nil)
				if warm {
					e = warmRelayEnv(t, 4, nil)
				}
				e.store.add(2, "k")
				hb, claims := e.store.count("heartbeat"), e.store.count("write claim")
				var hbDuring, claimsDuring int
				e.pub.onInit = func() {
					time.Sleep(10 * time.Millisecond)
					hbDuring, claimsDuring = e.store.count("heartbeat")-hb, e.store.count("write claim")-claims
				}
				res := e.run(t, wake(2))
				if !res.Joined || e.store.pending() != 0 || len(e.pub.sent()) != 1 {
					t.Fatalf("warm %v: joined %v, %d left, %d published", warm, res.Joined, e.store.pending(), len(e.pub.sent()))
				}
				if wantHB := map[bool]int{true: 1, false: 0}[warm]; hbDuring != wantHB || claimsDuring != 0 {
					t.Errorf("warm %v: during the publisher's initialisation %d heartbeats and %d claims, want %d and 0",
						warm, hbDuring, claimsDuring, wantHB)
				}
			})
		}
	})

	// A relay whose check fails after its heartbeat has announced itself,
	// or does not answer within lease.ClaimWindow: it claims nothing, holds
	// no lease, and stamps its heartbeat stopped so peers count it out at
	// once. One whose check failed before it would heartbeat stops without
	// a write, as a cold one does.
	t.Run("ThatCannotReachKafkaLeavesNoTrace", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			checkTook time.Duration
			err       error
			heartbeat bool
		}{
			{"failing beside the heartbeat", 10 * time.Millisecond, errors.New("dial tcp 127.0.0.1:1: connection refused"), true},
			{"failed before the heartbeat", 0, errors.New("dial tcp 127.0.0.1:1: connection refused"), false},
		} {
			synctest.Test(t, func(t *testing.T) {
				e := warmRelayEnv(t, 4, nil)
				e.store.add(2, "k")
				hb, claims := e.store.count("heartbeat"), e.store.count("write claim")
				e.pub.initErr = tc.err
				e.pub.onInit = func() { time.Sleep(tc.checkTook) }
				// The join check's head look takes 5 ms.
				e.store.afterFetch = func(int) { time.Sleep(5 * time.Millisecond) }
				res, err := e.runErr(wake(2))
				if err == nil || res.Reason != outbox.StopFatal {
					t.Fatalf("%s: err %v, reason %s; want a fatal stop", tc.name, err, res.Reason)
				}
				wantHB := map[bool]int{true: 1, false: 0}[tc.heartbeat]
				if e.store.count("heartbeat") != hb+wantHB || e.store.count("write claim") != claims {
					t.Errorf("%s: %d heartbeats and %d claims; want %d and none", tc.name,
						e.store.count("heartbeat")-hb, e.store.count("write claim")-claims, wantHB)
				}
				for b := range 4 {
					if owner := e.store.leaseOwner(b); owner != "" {
						t.Errorf("%s: bucket %d held by %q after the stop", tc.name, b, owner)
					}
				}
				view, err := e.store.mem.ReadCoordination(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				// The warm-up run's stop stamped it too: a new heartbeat
				// would show as not stopped.
				i := slices.IndexFunc(view.Relays, func(r lease.RelayState) bool { return r.RelayID == "relay-a" })
				if i < 0 || !view.Relays[i].Stopped {
					t.Errorf("%s: relay-a's heartbeat %+v, want it stamped stopped", tc.name, view.Relays)
				}
				if e.store.pending() != 1 || len(e.pub.sent()) != 0 {
					t.Errorf("%s: %d pending, %d published; want the message left for a relay that can reach Kafka",
						tc.name, e.store.pending(), len(e.pub.sent()))
				}
			})
		}
	})

	// A check that lasts past lease.ClaimWindow is a connection: the relay
	// stamps its heartbeat stopped while it waits, so peers do not count
	// it in, then joins again with a new heartbeat and publishes.
	t.Run("ASlowCheckLeavesTheFleetUntilItAnswers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := warmRelayEnv(t, 4, nil)
			e.store.add(2, "k")
			hb := e.store.count("heartbeat")
			var stopped bool
			e.pub.onInit = func() {
				time.Sleep(2 * time.Second)
				view, err := e.store.mem.ReadCoordination(t.Context())
				i := slices.IndexFunc(view.Relays, func(r lease.RelayState) bool { return r.RelayID == "relay-a" })
				stopped = err == nil && i >= 0 && view.Relays[i].Stopped && view.Relays[i].LastSeen.After(t0.Add(time.Second))
			}
			res := e.run(t, wake(2))
			if !stopped {
				t.Errorf("relay-a was not stamped stopped while its publisher connected")
			}
			if !res.Joined || e.store.pending() != 0 || e.store.count("heartbeat") < hb+2 {
				t.Errorf("joined %v, %d left, %d heartbeats; want the message published after a second heartbeat",
					res.Joined, e.store.pending(), e.store.count("heartbeat")-hb)
			}
		})
	})

	// Claims sent on a read taken before the check ended are conditional:
	// a peer that claimed the bucket meanwhile keeps it, and the woken
	// relay publishes nothing of it.
	t.Run("APeerClaimingDuringTheCheckKeepsTheBucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := warmRelayEnv(t, 4, nil)
			e.store.add(2, "k")
			e.pub.onInit = func() {
				time.Sleep(10 * time.Millisecond)
				e.store.heartbeat("relay-b", false)
				e.store.hold(2, "relay-b", e.clock.Now().Add(30*time.Second))
			}
			res := e.run(t, wake(2))
			if owner := e.store.leaseOwner(2); owner != "relay-b" || len(e.pub.sent()) != 0 || res.Refused == 0 {
				t.Errorf("bucket 2 held by %q, %d published, %d refused; want relay-b's, none and the claim refused",
					owner, len(e.pub.sent()), res.Refused)
			}
		})
	})

	// The order test of the path: commits land while the check runs, a
	// publish fails and is retried, more commits land behind the first
	// publish; every key's messages go out once each, in commit order.
	t.Run("AWarmWokenPathKeepsEachKeysOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := warmRelayEnv(t, 4, func(c *outbox.RelayConfig) { c.Options.BatchSize = 3 })
			want := map[string][]outbox.MessageID{}
			var mu sync.Mutex
			add := func(b int, key string) {
				mu.Lock()
				defer mu.Unlock()
				m := e.store.add(b, key)
				want[key] = append(want[key], m.ID)
			}
			for i := range 5 {
				add(2, []string{"a", "b"}[i%2])
			}
			add(1, "c")
			e.pub.failures[want["a"][1]] = 2
			e.pub.onInit = func() {
				time.Sleep(5 * time.Millisecond)
				add(2, "b")
				add(2, "a")
				time.Sleep(5 * time.Millisecond)
			}
			var once sync.Once
			e.pub.onPublish = func([]outbox.Message) {
				once.Do(func() {
					add(2, "a")
					add(1, "c")
				})
			}
			res := e.run(t, wake(2, 1))
			if !res.Joined || e.store.pending() != 0 {
				t.Fatalf("joined %v, %d left", res.Joined, e.store.pending())
			}
			wantPublishedInOrder(t, e.pub, want)
		})
	})
}
