package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// t0 is where the clock of a synctest bubble starts.
var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// relayEnv is one relay on fakes. Its tests run in a synctest bubble: the
// relay reads the bubble's clock (the system clock of a bubble), whose time
// moves only when every goroutine of the bubble is durably blocked, so a
// relay that computes is never overtaken by its timers.
type relayEnv struct {
	clock outbox.Clock
	store *memStore
	pub   *memPublisher
	obs   *recorder
	wakes *notifications
	relay *outbox.Relay
}

func newRelayEnv(t *testing.T, buckets int, tweak func(*outbox.RelayConfig)) *relayEnv {
	t.Helper()
	clk := outbox.SystemClock{}
	if now := clk.Now(); !now.Equal(t0) {
		t.Fatalf("the relay's clock reads %v, want %v: run the test in a synctest bubble", now, t0)
	}
	e := &relayEnv{clock: clk, store: newMemStore(clk, buckets), pub: newMemPublisher(), obs: &recorder{}, wakes: &notifications{}}
	cfg := outbox.RelayConfig{
		Options:   outbox.RelayOptions{RelayID: "relay-a", BucketCount: buckets, BatchSize: 10},
		Store:     e.store.observed,
		Publisher: e.pub,
		Clock:     clk,
		Notifier:  e.wakes,
		Hooks:     []outbox.Hook{e.obs},
		Logger:    slog.New(slog.DiscardHandler),
		MaxHops:   3,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := outbox.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.relay = r
	return e
}

// run executes one relay run and fails the test on an error.
func (e *relayEnv) run(t *testing.T, in outbox.RunInput) outbox.RunResult {
	t.Helper()
	res, err := e.runErr(in)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func (e *relayEnv) runErr(in outbox.RunInput) (outbox.RunResult, error) {
	return e.relay.Run(context.Background(), in)
}

func TestRelay(t *testing.T) {
	t.Run("PublishesEverythingInOrderAndStopsWhenDrained", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 4, nil)
			var want []outbox.Message
			for i := range 95 {
				want = append(want, e.store.add(i%4, "k"))
			}
			res := e.run(t, outbox.RunInput{})
			if res.Reason != outbox.StopDrained {
				t.Fatalf("reason = %s, want drained", res.Reason)
			}
			if res.Published != 95 || res.Deleted != 95 || e.store.pending() != 0 {
				t.Fatalf("published %d deleted %d pending %d, want 95/95/0", res.Published, res.Deleted, e.store.pending())
			}
			sent := e.pub.sent()
			for b := range 4 {
				var got, exp []int64
				for _, m := range sent {
					if m.Bucket() == b {
						got = append(got, m.Sequence())
					}
				}
				for _, m := range want {
					if m.Bucket() == b {
						exp = append(exp, m.Sequence())
					}
				}
				if !slices.Equal(got, exp) {
					t.Fatalf("bucket %d published %v, want %v", b, got, exp)
				}
			}
			// Lingered for the idle timeout, then released every lease.
			if got := res.Ended.Sub(res.Started); got < outbox.DefaultIdleTimeout {
				t.Fatalf("run ended after %v, before the idle timeout", got)
			}
			if !slices.Equal(res.Released, []int{0, 1, 2, 3}) {
				t.Fatalf("released %v", res.Released)
			}
			for b := range 4 {
				if o := e.store.leaseOwner(b); o != "" {
					t.Fatalf("bucket %d still owned by %q", b, o)
				}
			}
			if len(e.wakes.all()) != 0 {
				t.Fatalf("a drained relay sent wake-ups: %v", e.wakes.all())
			}
		})
	})

	t.Run("PartialAckDeletesPrefixAndRetriesOnlyTheFailingBucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 2, nil)
			var b0 []outbox.Message
			for range 5 {
				b0 = append(b0, e.store.add(0, "a"))
			}
			for range 30 {
				e.store.add(1, "b")
			}
			// The third row of bucket 0 fails three times, then goes through.
			e.pub.failures[b0[2].ID] = 3
			res := e.run(t, outbox.RunInput{})
			if e.store.pending() != 0 || res.Deleted != 35 {
				t.Fatalf("pending %d deleted %d", e.store.pending(), res.Deleted)
			}
			if got := e.store.deletedOrder[0]; !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
				t.Fatalf("bucket 0 deleted in order %v", got)
			}
			// Rows behind the failing head are published once more at most: the
			// retries fetch only the head row.
			n, _ := e.obs.count("headRowRetry")
			if n != 3 {
				t.Fatalf("head-row retries = %d, want 3", n)
			}
			count := map[int64]int{}
			for _, m := range e.pub.sent() {
				if m.Bucket() == 0 {
					count[m.Sequence()]++
				}
			}
			if count[1] != 1 || count[2] != 1 || count[3] != 1 || count[4] != 1 || count[5] != 1 {
				t.Fatalf("bucket 0 deliveries per sequence %v, want each once", count)
			}
			// Bucket 1 drained while bucket 0 backed off: its backoffs are per bucket.
			var bucketBackoffs int
			for _, ev := range e.obs.events {
				if ev.kind == "backoff" {
					if ev.bucket != 0 {
						t.Fatalf("backoff event for bucket %d", ev.bucket)
					}
					bucketBackoffs++
				}
			}
			if bucketBackoffs != 3 || res.Errors != 0 {
				t.Fatalf("bucket backoffs %d, cycle errors %d", bucketBackoffs, res.Errors)
			}
		})
	})

	t.Run("PublisherErrorWithEveryMessageAcknowledged_CountsTheBatchAsPublished", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 2, nil)
			for range 15 {
				e.store.add(0, "a")
			}
			e.store.add(1, "b")
			e.pub.trailingErr = errors.New("flush after acks: connection reset")
			res := e.run(t, outbox.RunInput{})
			if e.store.pending() != 0 || res.Deleted != 16 {
				t.Fatalf("pending %d deleted %d, want every message deleted once", e.store.pending(), res.Deleted)
			}
			if got := len(e.pub.sent()); got != 16 {
				t.Fatalf("published %d records, want 16 (no retry of acknowledged messages)", got)
			}
			backoffs, _ := e.obs.count("backoff")
			retries, _ := e.obs.count("retry")
			if n := backoffs + retries; n != 0 {
				t.Fatalf("%d backoffs for a batch that was acknowledged in full", n)
			}
		})
	})

	t.Run("StopsAtBudgetReleasesAndSendsContinuation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 2, nil)
			e.pub.delay = 5 * time.Second
			for range 50 {
				e.store.add(0, "k")
			}
			// Budget = deadline − 5 s stop margin = t0+19s: batches start at 0, 5,
			// 10 and 15 s; the fifth would start after the budget.
			deadline := t0.Add(24 * time.Second)
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{0}, Deadline: deadline, Hop: 1})
			if res.Reason != outbox.StopBudget {
				t.Fatalf("reason %s, want budget", res.Reason)
			}
			if res.ReleaseSkipped || len(res.Released) == 0 {
				t.Fatalf("release skipped %v released %v (%+v)", res.ReleaseSkipped, res.Released, res)
			}
			if !slices.Equal(res.WorkLeft, []int{0}) || !res.WakeUpSent {
				t.Fatalf("work left %v wake-up %v", res.WorkLeft, res.WakeUpSent)
			}
			w := e.wakes.all()
			if len(w) != 1 || w[0].Hop != 2 || !slices.Equal(w[0].Buckets, []int{0}) {
				t.Fatalf("wake-ups %+v, want one for bucket 0 at hop 2", w)
			}
			if res.Deleted != 40 || e.store.pending() != 10 {
				t.Fatalf("deleted %d, pending %d; want 40 and 10", res.Deleted, e.store.pending())
			}
			// The continuation finishes the work.
			res2 := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: w[0].Buckets, Hop: w[0].Hop})
			if e.store.pending() != 0 || res2.Reason != outbox.StopDrained {
				t.Fatalf("continuation left %d pending (%s)", e.store.pending(), res2.Reason)
			}
		})
	})

	t.Run("HopLimitEndsTheChain", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			e.store.add(0, "k")
			e.store.onRelease = func() { e.store.add(0, "late") }
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{0}, Hop: 3})
			if len(res.WorkLeft) != 1 || res.WakeUpSent || len(e.wakes.all()) != 0 {
				t.Fatalf("work left %v sent %v wakes %v: hop 4 > max 3 must not be sent", res.WorkLeft, res.WakeUpSent, e.wakes.all())
			}
		})
	})

	t.Run("SkipsReleaseWhenTheDeadlineLeavesNoTime", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			e.store.add(0, "k")
			deadline := t0.Add(3 * time.Second)
			// A probe that ignores its context answers 100 ms before the
			// deadline, past the stop's returnBy (2.75 s): no time to
			// release. (What honours its context is cut at 2.5 s.)
			e.store.beforePending = func() { time.Sleep(2900 * time.Millisecond) }
			res := e.run(t, outbox.RunInput{Deadline: deadline})
			if !res.ReleaseSkipped || len(res.Released) != 0 {
				t.Fatalf("release skipped %v released %v", res.ReleaseSkipped, res.Released)
			}
			if o := e.store.leaseOwner(0); o != "relay-a" {
				t.Fatalf("lease owner %q, want the relay's lease left to lapse", o)
			}
			if n, sum := e.obs.count("releaseSkipped"); n != 1 || sum != 1 {
				t.Fatalf("release-skipped events %d (%d leases)", n, sum)
			}
		})
	})

	t.Run("TrustsALivePeer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 4, nil)
			e.store.add(2, "k")
			e.store.heartbeat("peer", false)
			e.store.hold(2, "peer", t0.Add(20*time.Second))
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{2}})
			if res.Reason != outbox.StopPeerLive || res.Joined {
				t.Fatalf("reason %s joined %v", res.Reason, res.Joined)
			}
			if e.store.count("coordination") != 1 || e.store.count("heartbeat") != 0 || e.store.count("pending") != 0 {
				t.Fatalf("calls %v: want one coordination read and nothing else", e.store.mem.Calls())
			}
		})
	})

	// LeavesABucketAPeerIsClaimingToThatPeer: a woken relay whose
	// hinted bucket is free but read free by a peer whose round started less
	// than ClaimWindow ago leaves it to that peer only if a second read,
	// ClaimWindow later, finds the peer's claim; when the inference was wrong
	// (the peer's clock is behind: its round read the bucket before the
	// release, and claims nothing) it joins then and publishes the commit. It
	// joins at once when the peer's round is a ClaimWindow old, when the
	// bucket was freed after the peer's heartbeat, or when a continuation
	// wake-up started it: a continuation takes no claim on inference.
	t.Run("LeavesABucketAPeerIsClaimingToThatPeer", func(t *testing.T) {
		for _, c := range []struct {
			name      string
			heartbeat time.Duration // the peer's heartbeat, before the wake-up
			freed     time.Duration // when bucket 2 was released, before the wake-up; 0: never claimed
			claims    bool          // the peer's round claims bucket 2, 200 ms after the wake-up
			hop       int
			join      time.Duration // when the relay publishes; -1: never
		}{
			{"peer's round claims it", 300 * time.Millisecond, 0, true, 0, -1},
			{"peer's round just started, but claims nothing", 300 * time.Millisecond, 0, false, 0, lease.ClaimWindow},
			{"freed before the peer read it, by the peer's clock, which is behind", 300 * time.Millisecond, 500 * time.Millisecond, false, 0, lease.ClaimWindow},
			{"peer's round is over", lease.ClaimWindow, 0, false, 0, 0},
			{"freed after the peer read it", 300 * time.Millisecond, 100 * time.Millisecond, false, 0, 0},
			{"continuation wake-up", 300 * time.Millisecond, 0, true, 1, 0},
		} {
			t.Run(c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newRelayEnv(t, 4, nil)
					e.store.mem.SetHeartbeat("peer", t0.Add(-c.heartbeat), false)
					if c.freed > 0 {
						e.store.hold(2, "", t0.Add(-c.freed))
					}
					e.store.add(2, "k")
					claimed := make(chan struct{})
					go func() {
						defer close(claimed)
						time.Sleep(200 * time.Millisecond)
						if c.claims {
							e.store.hold(2, "peer", e.clock.Now().Add(30*time.Second))
						}
					}()
					defer func() { <-claimed }()
					published := time.Duration(-1)
					e.pub.onPublish = func([]outbox.Message) { published = e.clock.Now().Sub(t0) }
					res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{2}, Hop: c.hop, Deadline: t0.Add(time.Minute)})
					if published != c.join || c.join < 0 && (res.Joined || res.Reason != outbox.StopPeerLive || e.store.count("heartbeat") != 0) {
						t.Fatalf("published at %v (joined %v, reason %s, acquisitions %d); want at %v", published, res.Joined, res.Reason, e.store.count("heartbeat"), c.join)
					}
				})
			})
		}
	})

	t.Run("DoesNotJoinWhenAPeerClaimedTheBucketDuringItsStart", func(t *testing.T) {
		for _, peerStarts := range []bool{true, false} {
			synctest.Test(t, func(t *testing.T) {
				e := newRelayEnv(t, 4, nil)
				e.store.add(2, "k")
				if peerStarts {
					// A relay woken a moment earlier claims every bucket while
					// this one connects to Kafka, which takes a cold
					// connection's 100 ms.
					e.pub.onInit = func() {
						time.Sleep(100 * time.Millisecond)
						e.store.heartbeat("peer", false)
						for b := range 4 {
							e.store.hold(b, "peer", t0.Add(30*time.Second))
						}
					}
				}
				res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{2}, Deadline: t0.Add(time.Minute)})
				switch {
				case peerStarts && (res.Joined || res.Reason != outbox.StopPeerLive || e.store.count("heartbeat") != 0):
					t.Fatalf("peer claimed the bucket: joined %v reason %s acquisitions %d; want no join", res.Joined, res.Reason, e.store.count("heartbeat"))
				case peerStarts && e.store.count("coordination") != 2:
					t.Fatalf("coordination reads %d, want 2 (the pre-join check and its repetition)", e.store.count("coordination"))
				case !peerStarts && (!res.Joined || res.Published != 1):
					t.Fatalf("no peer: joined %v published %d; want the relay to join and publish", res.Joined, res.Published)
				case !peerStarts && e.store.count("coordination") != 1:
					// A warm start is too short for a peer's round to
					// land in it (secondLookDue).
					t.Fatalf("coordination reads %d, want 1 (no second look after a warm start)", e.store.count("coordination"))
				}
			})
		}
	})

	t.Run("JoinsForABucketOfAStoppedPeer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 4, nil)
			e.store.add(2, "k")
			e.store.heartbeat("peer", true)
			// The stopped peer's lease lapses five seconds later.
			e.store.hold(2, "peer", t0.Add(5*time.Second))
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{2}, Deadline: t0.Add(60 * time.Second)})
			if !res.Joined || res.Published != 1 || e.store.pending() != 0 {
				t.Fatalf("joined %v published %d pending %d (%s)", res.Joined, res.Published, e.store.pending(), res.Reason)
			}
		})
	})

	t.Run("SweepWithNothingPendingReadsOnly", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 8, nil)
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerSchedule, Deadline: t0.Add(time.Minute)})
			if res.Reason != outbox.StopNothingPending || res.Joined {
				t.Fatalf("reason %s joined %v", res.Reason, res.Joined)
			}
			if e.store.count("pending") != 1 || e.store.count("heartbeat") != 0 || e.store.count("coordination") != 0 {
				t.Fatalf("calls %v", e.store.mem.Calls())
			}
		})
	})

	t.Run("SweepJoinsForUnownedWork", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 8, nil)
			e.store.add(5, "k")
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerSchedule, Deadline: t0.Add(time.Minute)})
			if !res.Joined || res.Published != 1 || res.Reason != outbox.StopDrained {
				t.Fatalf("joined %v published %d reason %s", res.Joined, res.Published, res.Reason)
			}
		})
	})

	t.Run("MisconfigurationIsFatal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The store refuses the round's read as misconfigured, as the
			// DynamoDB store does when the table's layout record names
			// another bucket count.
			e := newRelayEnv(t, 4, func(c *outbox.RelayConfig) {
				c.Store = outboxtest.Observe(outboxtest.ObservedStore{Store: c.Store,
					SnapshotFunc: func(context.Context, func(context.Context) (lease.Coordination, error)) (lease.Coordination, error) {
						return lease.Coordination{}, outbox.Misconfigured("read coordination", "the table's layout record names 8 buckets, the store 4")
					}})
			})
			_, err := e.runErr(outbox.RunInput{})
			if !errors.Is(err, outbox.ErrMisconfigured) {
				t.Fatalf("err = %v, want misconfiguration", err)
			}
			if e.store.count("heartbeat") != 1 {
				t.Fatalf("a misconfiguration was retried: %d rounds", e.store.count("heartbeat"))
			}
		})
	})

	t.Run("OfAnotherBucketCountThanItsStoreIsRefused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := newMemStore(outbox.SystemClock{}, 4)
			_, err := outbox.NewRelay(outbox.RelayConfig{Store: store.observed, Publisher: newMemPublisher(),
				Options: outbox.RelayOptions{RelayID: "relay-a", BucketCount: 8}})
			if !errors.Is(err, outbox.ErrMisconfigured) || len(store.mem.Calls()) != 0 {
				t.Fatalf("err = %v, calls %v; want a misconfiguration before any call", err, store.mem.Calls())
			}
		})
	})

	t.Run("ThatCannotReachKafkaClaimsNothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 4, nil)
			e.pub.initErr = errors.New("dial tcp 127.0.0.1:1: connection refused")
			res, err := e.runErr(outbox.RunInput{})
			if err == nil || res.Reason != outbox.StopFatal || e.store.count("heartbeat") != 0 {
				t.Fatalf("err %v reason %s acquisitions %d", err, res.Reason, e.store.count("heartbeat"))
			}
		})
	})

	t.Run("RenewsDuringASlowPublish", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			e.store.add(0, "k")
			// Kafka takes 25 s: longer than the renew interval, within the lease.
			e.pub.delay = 25 * time.Second
			res := e.run(t, outbox.RunInput{})
			if n := e.store.count("write renew"); n != 2 {
				t.Fatalf("in-flight renewals during a 25 s publish = %d, want 2 (at 10 s and 20 s)", n)
			}
			if res.Deleted != 1 {
				t.Fatalf("deleted %d, want the message deleted under the renewed lease", res.Deleted)
			}
		})
	})

	t.Run("RefusedRenewalKeepsThePublishedRows", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			e.store.add(0, "k")
			e.store.refuseRenew = true
			e.pub.delay = 15 * time.Second
			res := e.run(t, outbox.RunInput{Deadline: t0.Add(40 * time.Second)})
			if e.store.count("mark") != 0 || res.Deleted != 0 || e.store.pending() != 1 {
				t.Fatalf("rows published after a refused renewal were deleted (%d)", res.Deleted)
			}
			if n, _ := e.obs.count("lost"); n == 0 {
				t.Fatal("no lease-lost event")
			}
		})
	})

	t.Run("BacksOffWithJitterBoundedByTheRenewInterval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			e.store.add(0, "k")
			e.store.failPending = 6
			res := e.run(t, outbox.RunInput{})
			if res.Errors != 6 || e.store.pending() != 0 {
				t.Fatalf("errors %d pending %d", res.Errors, e.store.pending())
			}
			var delays []time.Duration
			for _, ev := range e.obs.events {
				if ev.kind == "retry" {
					delays = append(delays, ev.dur)
				}
			}
			if delays[0] != time.Second {
				t.Fatalf("first backoff %v, want the base", delays[0])
			}
			for _, d := range delays {
				if d < time.Second || d > 10*time.Second {
					t.Fatalf("backoff %v outside [ErrorBackoff, LeaseRenewInterval]", d)
				}
			}
			if slices.Max(delays) == time.Second {
				t.Fatalf("backoffs never grew: %v", delays)
			}
		})
	})

	// The stranded-message race: a message commits into a bucket while its
	// owner is stopping; the woken relay trusts the live owner and exits, and
	// the owner's post-release probe sends the wake-up that publishes it.
	t.Run("StrandedMessageRaceIsResolvedByTheStoppingOwner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 2, nil)
			e.store.add(1, "first")
			rb, err := outbox.NewRelay(outbox.RelayConfig{Options: outbox.RelayOptions{RelayID: "relay-b", BucketCount: 2},
				Store: e.store.observed, Publisher: e.pub, Clock: e.clock, Notifier: e.wakes, Logger: slog.New(slog.DiscardHandler), MaxHops: 3})
			if err != nil {
				t.Fatal(err)
			}
			woken := &relayEnv{clock: e.clock, store: e.store, pub: e.pub, obs: &recorder{}, wakes: e.wakes, relay: rb}
			var wokenResult outbox.RunResult
			e.store.onRelease = func() {
				e.store.onRelease = nil
				// Commit lands while relay-a still holds bucket 1; the writer's
				// wake-up reaches relay-b, which sees a live owner and exits.
				e.store.add(1, "during-stop")
				wokenResult = woken.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{1}})
			}
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{1}})
			if wokenResult.Reason != outbox.StopPeerLive {
				t.Fatalf("woken relay: %s, want it to trust the live owner", wokenResult.Reason)
			}
			w := e.wakes.all()
			if !slices.Equal(res.WorkLeft, []int{1}) || len(w) != 1 {
				t.Fatalf("owner left %v and sent %v, want one wake-up for bucket 1", res.WorkLeft, w)
			}
			res3 := woken.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: w[0].Buckets, Hop: w[0].Hop})
			if !res3.Joined || e.store.pending() != 0 {
				t.Fatalf("the wake-up did not publish the message: joined %v pending %d", res3.Joined, e.store.pending())
			}
		})
	})

	// WatchesReleasedBucketsForSkippedWakeUps is the stop's half of
	// the writers' skipped wake-ups: a commit lands just after the stopping
	// relay's post-release look, and its writer skipped the wake-up because
	// a view read before the release showed the relay holding the bucket. The
	// relay looks at the released buckets again OwnerViewTTL after the
	// release and sends the wake-up itself.
	t.Run("WatchesReleasedBucketsForSkippedWakeUps", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 2, nil)
			e.store.add(1, "first")
			var releasedAt time.Time
			e.store.onRelease = func() {
				e.store.onRelease = nil
				releasedAt = e.clock.Now()
				e.store.afterFetch = func(bucket int) {
					if bucket != 1 {
						return
					}
					e.store.mu.Lock()
					e.store.afterFetch = nil
					e.store.mu.Unlock()
					e.store.add(1, "wake-up skipped")
				}
			}
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{1}})
			if res.Reason != outbox.StopDrained || !slices.Equal(res.WorkLeft, []int{1}) || !res.WakeUpSent {
				t.Fatalf("reason %s, work left %v, wake-up sent %v: want the watch to find bucket 1", res.Reason, res.WorkLeft, res.WakeUpSent)
			}
			if w := e.wakes.all(); len(w) != 1 || !slices.Equal(w[0].Buckets, []int{1}) || w[0].Hop != 1 {
				t.Fatalf("wake-ups %+v, want one for bucket 1 at hop 1", w)
			}
			if waited := e.clock.Now().Sub(releasedAt); waited < lease.OwnerViewTTL {
				t.Fatalf("the relay probed %v after its release, want at least %v", waited, lease.OwnerViewTTL)
			}
		})
	})

	t.Run("CoordinationHeldUntilCountsOnlyLiveHolders", func(t *testing.T) {
		now := t0
		c := lease.Coordination{
			Leases: []lease.State{
				{Bucket: 0, Owner: "a", ExpiresAt: now.Add(30 * time.Second)},
				{Bucket: 1, Owner: "b", ExpiresAt: now.Add(30 * time.Second)}, // stopped
				{Bucket: 2, Owner: "c", ExpiresAt: now.Add(30 * time.Second)}, // silent
				{Bucket: 3, Owner: "a", ExpiresAt: now},                       // expired
				{Bucket: 4, Owner: "", ExpiresAt: now.Add(time.Minute)},       // free
				{Bucket: 5, Owner: "d", ExpiresAt: now.Add(time.Minute)},      // heartbeat ends first
			},
			Relays: []lease.RelayState{
				{RelayID: "a", LastSeen: now},
				{RelayID: "b", LastSeen: now, Stopped: true},
				{RelayID: "c", LastSeen: now.Add(-30 * time.Second)},
				{RelayID: "d", LastSeen: now.Add(-20 * time.Second)},
			},
		}
		got := c.HeldUntil(now, 30*time.Second)
		want := map[int]time.Time{0: now.Add(30 * time.Second), 5: now.Add(10 * time.Second)}
		if !maps.Equal(got, want) {
			t.Fatalf("HeldUntil = %v, want %v", got, want)
		}
	})

	t.Run("WakeUpForAnAlreadyDrainedBucketDoesNotJoin", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 4, nil)
			res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{1}})
			if res.Joined || res.Reason != outbox.StopNothingPending {
				t.Fatalf("joined %v reason %s", res.Joined, res.Reason)
			}
			if e.store.count("heartbeat") != 0 || e.store.count("fetch") != 1 {
				t.Fatalf("calls %v: want one coordination read and one consistent fetch", e.store.mem.Calls())
			}
			// Positive control: the same wake-up with a message joins.
			e.store.add(1, "k")
			if res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{1}}); !res.Joined || res.Published != 1 {
				t.Fatalf("joined %v published %d", res.Joined, res.Published)
			}
		})
	})

	t.Run("HoldingBucketZeroSamplesTheBacklogOncePerInterval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 2, func(c *outbox.RelayConfig) { c.Options.Mode = outbox.ModeHold })
			e.store.add(1, "k")
			time.Sleep(45 * time.Second)
			e.store.add(1, "k")
			// Held for 70 s: samples at the first cycle, then every 30 s.
			res := e.run(t, outbox.RunInput{Deadline: e.clock.Now().Add(75 * time.Second)})
			if res.Published != 2 {
				t.Fatalf("published %d", res.Published)
			}
			var samples []event
			for _, ev := range e.obs.events {
				if ev.kind == "backlog" {
					samples = append(samples, ev)
				}
			}
			if len(samples) != 3 {
				t.Fatalf("%d backlog samples in 70 s, want 3 (at 0, 30 and 60 s)", len(samples))
			}
			if samples[0].count != 2 || samples[0].dur != 45*time.Second {
				t.Fatalf("first sample %d pending, oldest %v; want 2 and 45s", samples[0].count, samples[0].dur)
			}
			if samples[1].count != 0 || samples[1].dur != 0 {
				t.Fatalf("second sample %+v, want an empty backlog", samples[1])
			}
		})
	})

	// NumbersRoundsPerRun: every run, also a warm one of the same
	// relay, starts with round 0, on which the lease round prunes stale
	// heartbeat records; its later rounds do not.
	t.Run("NumbersRoundsPerRun", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Lingering 25 s makes three rounds per run (at 0, 10 and 20 s),
			// each starting with its heartbeat.
			var rounds int
			var prunedAt []int
			e := newRelayEnv(t, 2, func(c *outbox.RelayConfig) {
				c.Options.IdleTimeout = 25 * time.Second
				c.Store = outboxtest.Observe(outboxtest.ObservedStore{Store: c.Store,
					HeartbeatFunc: func(ctx context.Context, id string, now time.Time, mark bool, next func(context.Context, string, time.Time, bool) (bool, error)) (bool, error) {
						rounds++
						return next(ctx, id, now, mark)
					},
					PruneFunc: func(ctx context.Context, id string, p lease.PruneWrite, next func(context.Context, string, lease.PruneWrite) int) int {
						prunedAt = append(prunedAt, rounds)
						return next(ctx, id, p)
					}})
			})
			for run := range 2 {
				e.store.add(run%2, "k")
				// A record silent for an hour is stale: the next pruning
				// round removes it.
				e.store.mem.SetHeartbeat(fmt.Sprintf("gone-%d", run), time.Now().Add(-time.Hour), false)
				first := rounds + 1
				if res := e.run(t, outbox.RunInput{}); res.Reason != outbox.StopDrained || res.Rounds != 3 || rounds != first+2 {
					t.Fatalf("run %d: %+v, rounds %d to %d", run, res, first, rounds)
				}
				if !slices.Equal(prunedAt[run:], []int{first}) {
					t.Fatalf("run %d (rounds %d to %d) pruned in rounds %v, want in its first alone", run, first, rounds, prunedAt[run:])
				}
			}
		})
	})

	// RenewsDuringASlowDelete: a delete phase slower than the lease
	// (throttled deletes) keeps the lease, so a second relay that runs while
	// the first still deletes does not take the bucket and publish its rows
	// again.
	t.Run("RenewsDuringASlowDelete", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			e.store.add(0, "k")
			e.store.markDelay = 45 * time.Second // past the 30 s lease
			rb, err := outbox.NewRelay(outbox.RelayConfig{Options: outbox.RelayOptions{RelayID: "relay-b", BucketCount: 1},
				Store: e.store.observed, Publisher: e.pub, Clock: e.clock, Notifier: e.wakes, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var second outbox.RunResult
			e.store.onMark = func() {
				// The second relay runs at +45 s on the bubble's clock: this
				// goroutine waits for it like any other blocked one.
				done := make(chan outbox.RunResult)
				go func() {
					res, _ := rb.Run(context.Background(), outbox.RunInput{})
					done <- res
				}()
				second = <-done
			}
			res := e.run(t, outbox.RunInput{})
			if second.Published != 0 || len(e.pub.sent()) != 1 {
				t.Fatalf("the second relay published %d; %d publishes of one message", second.Published, len(e.pub.sent()))
			}
			if n := e.store.count("write renew"); n < 4 {
				t.Fatalf("%d in-flight renewals during a 45 s delete, want one at 10, 20, 30 and 40 s", n)
			}
			if res.Deleted != 1 || e.store.pending() != 0 {
				t.Fatalf("deleted %d, pending %d", res.Deleted, e.store.pending())
			}
		})
	})

	// TrustsAnUnrenewedLeaseUntilItsStoredExpiry: with the default
	// timings the store leaves a lease with 15 s or more left unrenewed. The
	// relay then dates its lease back to the stored expiry, yet does not
	// renew in flight right after such a round: the next round keeps the
	// lease. The lease never lapses while the relay holds it.
	t.Run("TrustsAnUnrenewedLeaseUntilItsStoredExpiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, func(c *outbox.RelayConfig) { c.Options.Mode = outbox.ModeHold })
			var lapsed []time.Duration
			e.store.beforePending = func() {
				now := e.clock.Now()
				l := e.store.mem.Lease(0)
				if !l.ExpiresAt.After(now) {
					lapsed = append(lapsed, now.Sub(t0))
				}
				// A commit right after every round from 10 s on: published at
				// once, within the round interval.
				if now.Sub(t0) >= 10*time.Second && e.store.pending() == 0 && len(e.pub.sent()) < 5 {
					e.store.add(0, "k")
				}
			}
			res := e.run(t, outbox.RunInput{Deadline: t0.Add(65 * time.Second)})
			if res.Published < 5 || len(lapsed) > 0 {
				t.Fatalf("published %d; lease lapsed at %v", res.Published, lapsed)
			}
			if n := e.store.count("write renew"); n != 0 {
				t.Fatalf("%d in-flight renewals; the rounds keep the lease", n)
			}
		})
	})
}
