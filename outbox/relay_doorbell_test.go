package outbox_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// testBell is a doorbell the test rings by hand, remembering every set of
// buckets the relay listened for.
type testBell struct {
	*outbox.Rings
	mu      sync.Mutex
	listens [][]int
}

func newTestBell() *testBell { return &testBell{Rings: outbox.NewRings()} }

func (b *testBell) Listen(buckets []int) {
	b.mu.Lock()
	b.listens = append(b.listens, slices.Clone(buckets))
	b.mu.Unlock()
	b.Rings.Listen(buckets)
}

func (b *testBell) history() [][]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.listens)
}

// bellRelay runs a hold-mode relay with a doorbell over buckets in the
// background until deadline; published receives each message's publish
// time, wait waits for the run's result.
func bellRelay(t *testing.T, buckets int, deadline time.Duration, prepare func(*relayEnv)) (e *relayEnv, bell *testBell, wait func() outbox.RunResult, published <-chan time.Time) {
	t.Helper()
	bell = newTestBell()
	at := make(chan time.Time, 1000)
	e = newRelayEnv(t, buckets, func(c *outbox.RelayConfig) {
		c.Options.Mode = outbox.ModeHold
		c.Doorbell = bell
	})
	if prepare != nil {
		// Before the run starts: its goroutine may run its first round at
		// once, before the test's next statement.
		prepare(e)
	}
	e.pub.onPublish = func(msgs []outbox.Message) {
		for range msgs {
			at <- time.Now()
		}
	}
	var res outbox.RunResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		res = e.run(t, outbox.RunInput{Deadline: t0.Add(deadline)})
	}()
	return e, bell, func() outbox.RunResult { <-done; return res }, at
}

func TestRelayDoorbell(t *testing.T) {
	// A ring for a bucket the relay holds is fetched at once; without one
	// the message waits for the poll, busy bucket or not: with a doorbell
	// the relay probes busy buckets at the poll (TargetLatency defaults to
	// PollInterval).
	t.Run("RungBucketIsFetchedAtOnce", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, bell, wait, published := bellRelay(t, 2, 10*time.Second, nil)
			if got := e.relay.Options().TargetLatency; got != outbox.DefaultPollInterval {
				t.Errorf("TargetLatency %v with a doorbell, want the poll's %v", got, outbox.DefaultPollInterval)
			}
			time.Sleep(1500 * time.Millisecond)
			e.store.add(0, "k")
			committed := time.Now()
			bell.Deliver(0)
			if got := (<-published).Sub(committed); got != 0 {
				t.Errorf("rung message published %v after its commit, want at once", got)
			}
			time.Sleep(300 * time.Millisecond)
			e.store.add(0, "k")
			committed = time.Now()
			if got := (<-published).Sub(committed); got != 200*time.Millisecond {
				t.Errorf("unrung message published %v after its commit, want 200ms (the next poll)", got)
			}
			if res := wait(); res.Published != 2 {
				t.Errorf("published %d, want 2", res.Published)
			}
		})
	})

	t.Run("AnExplicitTargetLatencyStillProbesBusyBuckets", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 2, func(c *outbox.RelayConfig) {
				c.Doorbell = newTestBell()
				c.Options.TargetLatency = 100 * time.Millisecond
			})
			if got := e.relay.Options().TargetLatency; got != 100*time.Millisecond {
				t.Errorf("TargetLatency %v, want the 100ms set", got)
			}
		})
	})

	// The relay listens for exactly the buckets it holds, and for none once
	// it stopped and released them.
	t.Run("ListensForTheBucketsItHolds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, bell, wait, _ := bellRelay(t, 4, 10*time.Second, func(e *relayEnv) {
				e.store.hold(3, "peer", t0.Add(time.Minute))
				e.store.heartbeat("peer", false)
			})
			time.Sleep(time.Second)
			var held []int
			for b := range 4 {
				if e.store.leaseOwner(b) == "relay-a" {
					held = append(held, b)
				}
			}
			if got := bell.Listening(); len(held) == 0 || !slices.Equal(got, held) {
				t.Errorf("listening for %v, want the buckets held: %v", got, held)
			}
			wait()
			h := bell.history()
			if len(h) == 0 || h[len(h)-1] != nil {
				t.Errorf("listens %v, want the last one for no bucket", h)
			}
			if bell.Deliver(0) {
				t.Error("a ring was taken in after the stop")
			}
		})
	})

	// Per-key order does not depend on the rings: lost, late, repeated and
	// stray rings only move when a bucket is fetched, and the fetch returns
	// a bucket's messages in order under the lease. Every message is
	// published once, in its key's commit order.
	t.Run("LostLateRepeatedRingsNeitherLoseNorReorder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, bell, wait, published := bellRelay(t, 2, 40*time.Second, nil)
			rng := rand.New(rand.NewPCG(7, 11))
			want := map[string][]string{}
			const n = 120
			for range n {
				time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
				// A key's messages share a bucket, as its hash places them.
				k := rng.IntN(3)
				key, b := []string{"a", "b", "c"}[k], k%2
				m := e.store.add(b, key)
				want[key] = append(want[key], string(m.ID[:]))
				switch rng.IntN(5) {
				case 0: // lost
				case 1: // late
					time.AfterFunc(time.Duration(rng.IntN(900))*time.Millisecond, func() { bell.Deliver(b) })
				case 2: // repeated
					bell.Deliver(b)
					bell.Deliver(b)
				case 3: // stray: the other bucket
					bell.Deliver(1 - b)
				default:
					bell.Deliver(b)
				}
			}
			for range n {
				<-published
			}
			res := wait()
			got := map[string][]string{}
			for _, m := range e.pub.sent() {
				got[string(m.Key)] = append(got[string(m.Key)], string(m.ID[:]))
			}
			for key := range want {
				if !slices.Equal(got[key], want[key]) {
					t.Errorf("key %s published out of commit order or not once each: %d published, %d committed", key, len(got[key]), len(want[key]))
				}
			}
			if res.Published != n || e.store.pending() != 0 {
				t.Errorf("published %d of %d, %d left", res.Published, n, e.store.pending())
			}
		})
	})

	// A woken relay fetches the bucket its join check found a message in
	// before it probes every bucket it claimed: the probe is one round trip
	// less on the wake-up's path to the publish.
	t.Run("WokenRelayFetchesItsBucketBeforeTheForcedProbe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 4, nil)
			e.store.add(2, "k")
			var before int
			probed := false
			e.store.beforePending = func() {
				if !probed {
					probed, before = true, len(e.pub.sent())
				}
			}
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{2}, Deadline: t0.Add(time.Minute)})
			if !res.Joined || res.Published != 1 {
				t.Fatalf("joined %v published %d", res.Joined, res.Published)
			}
			if !probed || before != 1 {
				t.Errorf("the forced probe ran with %d published (probed %v), want after the woken bucket's publish", before, probed)
			}
		})
	})

	// The woken path's first sweep fetches the woken bucket on the join
	// check's word and skips the probe once: each key still goes out in
	// commit order, once, across batches, a failed publish, commits made
	// while the run sweeps, and rings for a bucket the relay has not
	// claimed yet.
	t.Run("WokenPathKeepsEachKeysOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bell := newTestBell()
			e := newRelayEnv(t, 4, func(c *outbox.RelayConfig) {
				c.Options.BatchSize = 3
				c.Doorbell = bell
			})
			want := map[string][]outbox.MessageID{}
			add := func(b int, key string) outbox.Message {
				m := e.store.add(b, key)
				want[key] = append(want[key], m.ID)
				return m
			}
			for i := range 7 {
				add(2, []string{"a", "b"}[i%2])
			}
			add(1, "c")
			e.pub.failures[want["a"][1]] = 2
			bell.Deliver(2) // before the claim: not listened for, dropped
			var once sync.Once
			e.pub.onPublish = func([]outbox.Message) {
				once.Do(func() {
					// Commits behind the first publish, one rung, one not.
					add(2, "a")
					add(2, "b")
					bell.Deliver(2)
					add(1, "c")
				})
			}
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{2}, Deadline: t0.Add(time.Minute)})
			if !res.Joined || e.store.pending() != 0 {
				t.Fatalf("joined %v, %d left", res.Joined, e.store.pending())
			}
			wantPublishedInOrder(t, e.pub, want)
		})
	})
}
