package scale

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

func TestBurst(t *testing.T) {
	// OnTheModelCountsLikeTheEmbeddedServer runs a small burst, with
	// throttled deliveries and releases, on both backends. Its relays refuse
	// no write: a woken relay leaves a bucket a peer is claiming to that peer
	// (refused writes are compared in the model's own tests).
	t.Run("OnTheModelCountsLikeTheEmbeddedServer", func(t *testing.T) {
		cfg := Config{Buckets: 16, Relays: 6, Commits: 40}
		cfg.Backend = Embedded
		emb, err := inBubble(t, func(ctx context.Context) (BurstReport, error) { return RunBurst(ctx, cfg) })
		if err != nil {
			t.Fatal(err)
		}
		cfg.Backend = Model
		mod, err := inBubble(t, func(ctx context.Context) (BurstReport, error) { return RunBurst(ctx, cfg) })
		if err != nil {
			t.Fatal(err)
		}
		emb.Config.Backend = Model
		if !reflect.DeepEqual(emb, mod) {
			t.Fatalf("embedded %+v\nmodel    %+v", emb, mod)
		}
		if mod.Refused != 0 || mod.Throttled == 0 || mod.Releases == 0 || mod.Unpublished != 0 || mod.LeftOwned != 0 {
			t.Fatalf("the burst should throttle deliveries and release leases, refusing nothing and publishing everything: %+v", mod)
		}
	})

	// OfOneThousandCommitsWakingOneHundredTwentyEightRelays pins
	// the burst for seed 1, every invocation running the real relay
	// handler: every commit is published, every bucket gets an owner, no
	// conditional write is refused, no lease is lost and the fleet scales back
	// to nothing with no lease left. Six relays join and claim a fair share
	// each; the invocations woken while their claims are in flight find them
	// being claimed (lease.Coordination.Uncovered) and exit after their trust
	// check, 96 of them after reading the claimed lease again a ClaimWindow
	// later (the relay's claim confirmation), so 6 of 1,000 join and each bucket is
	// claimed and released once. Four of the six were woken for a bucket
	// another's share took: they wait for it, running their round every poll
	// interval until their linger ends (18 rounds in all); a joiner's trust
	// check runs beside its Kafka connection, so its heartbeat and claims
	// go out that much sooner. Trust checks that
	// find a live owner settle on the hinted lease and the heartbeats
	// (outbox.CoverageReader), which keeps the busiest second's reads under a
	// partition's 3,000 RCU. On the Lambda emulator an environment holds the
	// reserved concurrency from its start (its cold start included), and a
	// warm one is reused: 281 wake-ups are refused at least once, and their
	// retries, 1 and 3 s later, find the owners still live. The last release
	// is 3.67 s after the first commit; the stop then watches the released
	// buckets for a second, so the last relay stops at 4.67 s.
	t.Run("OfOneThousandCommitsWakingOneHundredTwentyEightRelays", func(t *testing.T) {
		rep, err := inBubble(t, func(ctx context.Context) (BurstReport, error) { return RunBurst(ctx, Config{Seed: 1}) })
		if err != nil {
			t.Fatal(err)
		}
		if rep.Unpublished != 0 || rep.LeftOwned != 0 || rep.AllOwnedAfter == 0 {
			t.Fatalf("%d commits unpublished, %d leases left after the last stop, every bucket owned after %v", rep.Unpublished, rep.LeftOwned, rep.AllOwnedAfter)
		}
		peerLive, nothingPending := rep.InvocationsByReason[string(outbox.StopPeerLive)], rep.InvocationsByReason[string(outbox.StopNothingPending)]
		got := []int{rep.WakeUps, rep.Invocations, rep.Throttled, peerLive, nothingPending, rep.JoinedInvocations, rep.ClaimChecks, rep.Rounds, rep.Claims, rep.Releases, rep.Lost, rep.Refused, rep.RefusedAfterOwned}
		want := []int{1000, 1000, 281, 994, 0, 6, 96, 18, 1024, 1024, 0, 0, 0}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("wake-ups, invocations, throttled, peer live, nothing pending, joined, claim checks, rounds, claims, releases, lost, refused, refused after owned = %v, want %v", got, want)
		}
		times := []time.Duration{rep.AllOwnedAfter, rep.MaxPublishWait, rep.LastStopAfter}
		wantTimes := []time.Duration{552205446, 998752521, 4674080446}
		if !reflect.DeepEqual(times, wantTimes) {
			t.Errorf("every bucket owned, longest publish wait, last stop = %v, want %v", times, wantTimes)
		}
		if rep.Environments != 128 || rep.ReadUnits != 3730 || rep.PeakReadUnits != 2584 || rep.PeakWriteUnits != 1034 {
			t.Errorf("%d environments, read units %v, busiest second: %v RCU, %v WCU; want 128, 3730, 2584 and 1034", rep.Environments, rep.ReadUnits, rep.PeakReadUnits, rep.PeakWriteUnits)
		}
	})
}
