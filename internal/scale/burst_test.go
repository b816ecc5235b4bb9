package scale

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestBurstOnTheModelCountsLikeTheEmbeddedServer runs a small burst, with
// throttled deliveries and releases, on both backends. Its relays refuse
// no write: a woken relay leaves a bucket a peer is claiming to that peer
// (refused writes are compared in the model's own tests).
func TestBurstOnTheModelCountsLikeTheEmbeddedServer(t *testing.T) {
	cfg := BurstConfig{Buckets: 16, Relays: 6, Commits: 40}
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
	if mod.Refused != 0 || mod.Throttled == 0 || mod.Releases == 0 {
		t.Fatalf("the burst should throttle deliveries and release leases, refusing nothing: %+v", mod)
	}
}

// TestBurstOfOneThousandCommitsWakingOneHundredTwentyEightRelays pins
// the burst for seed 1: every commit is published, no conditional
// write is refused and the fleet scales back to nothing. The first relay to
// join claims every bucket; the invocations woken while its claims are in
// flight find them being claimed (outbox.Coordination.Uncovered) and exit
// after their trust check, 76 of them after reading the claimed lease again
// a ClaimWindow later (outbox.ConfirmClaims), so 6 of 1,000 join and each
// bucket is claimed and released once. Trust checks that find a live owner
// settle on the hinted lease and the heartbeats (outbox.CoverageReader),
// which keeps the busiest second's reads under a partition's 3,000 RCU. On
// the Lambda emulator an environment holds the reserved concurrency from
// its start (its cold start included), and a warm one is reused: 295
// wake-ups are refused at least once, and their retries, 1 and 3 s later,
// find the owners still live, so the last relay stops 3.7 s after the
// first commit.
func TestBurstOfOneThousandCommitsWakingOneHundredTwentyEightRelays(t *testing.T) {
	rep, err := inBubble(t, func(ctx context.Context) (BurstReport, error) { return RunBurst(ctx, BurstConfig{Seed: 1}) })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unpublished != 0 || rep.LeftOwned != 0 {
		t.Fatalf("%d commits unpublished, %d leases left after the last stop", rep.Unpublished, rep.LeftOwned)
	}
	got := []int{rep.WakeUps, rep.Invocations, rep.Throttled, rep.PeerLive, rep.NothingPending, rep.Joined, rep.ClaimChecks, rep.Rounds, rep.Claims, rep.Releases, rep.Lost, rep.Refused, rep.RefusedAfterOwned}
	want := []int{1000, 1000, 295, 994, 0, 6, 76, 6, 1024, 1024, 0, 0, 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("wake-ups, invocations, throttled, peer live, nothing pending, joined, claim checks, rounds, claims, releases, lost, refused, refused after owned = %v, want %v", got, want)
	}
	times := []time.Duration{rep.AllOwnedAfter, rep.MaxPublishWait, rep.LastStopAfter}
	wantTimes := []time.Duration{567205446, 999893525, 3689080446}
	if !reflect.DeepEqual(times, wantTimes) {
		t.Errorf("every bucket owned, longest publish wait, last stop = %v, want %v", times, wantTimes)
	}
	if rep.Environments != 128 || rep.ReadUnits != 3640 || rep.PeakReadUnits != 2594 || rep.PeakWriteUnits != 1030 {
		t.Errorf("%d environments, read units %v, busiest second: %v RCU, %v WCU; want 128, 3640, 2594 and 1030", rep.Environments, rep.ReadUnits, rep.PeakReadUnits, rep.PeakWriteUnits)
	}
}
