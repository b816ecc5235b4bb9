package scale

import (
	"reflect"
	"testing"
	"time"
)

// TestBurstOnTheModelCountsLikeTheEmbeddedServer runs a small burst, with
// refused claims, throttled deliveries and releases, on both backends.
func TestBurstOnTheModelCountsLikeTheEmbeddedServer(t *testing.T) {
	cfg := BurstConfig{Buckets: 16, Relays: 6, Commits: 40}
	cfg.Backend = Embedded
	emb, err := RunBurst(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backend = Model
	mod, err := RunBurst(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	emb.Config.Backend = Model
	if !reflect.DeepEqual(emb, mod) {
		t.Fatalf("embedded %+v\nmodel    %+v", emb, mod)
	}
	if mod.Refused == 0 || mod.Throttled == 0 || mod.Releases == 0 {
		t.Fatalf("the burst should refuse claims, throttle deliveries and release leases: %+v", mod)
	}
}

// TestBurstOfOneThousandCommitsWakingOneHundredTwentyEightRelays pins the
// issue's burst for seed 1: every commit is published and the fleet scales
// back to nothing, but the relays woken together collide on their claims
// and their trust checks, and each joiner stops after its idle timeout,
// handing its buckets on.
func TestBurstOfOneThousandCommitsWakingOneHundredTwentyEightRelays(t *testing.T) {
	rep, err := RunBurst(t.Context(), BurstConfig{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unpublished != 0 || rep.LeftOwned != 0 {
		t.Fatalf("%d commits unpublished, %d leases left after the last stop", rep.Unpublished, rep.LeftOwned)
	}
	got := []int{rep.WakeUps, rep.Invocations, rep.Throttled, rep.PeerLive, rep.Joined, rep.Rounds, rep.Claims, rep.Releases, rep.Lost, rep.Refused, rep.RefusedAfterOwned}
	want := []int{1000, 1000, 1439, 873, 127, 127, 4059, 4059, 0, 4099, 1704}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("wake-ups, invocations, throttled, peer live, joined, rounds, claims, releases, lost, refused, refused after owned = %v, want %v", got, want)
	}
	times := []time.Duration{rep.AllOwnedAfter, rep.MaxPublishWait, rep.LastStopAfter}
	wantTimes := []time.Duration{3828319663, 3587789623, 18229278376}
	if !reflect.DeepEqual(times, wantTimes) {
		t.Errorf("every bucket owned, longest publish wait, last stop = %v, want %v", times, wantTimes)
	}
	if rep.PeakReadUnits != 7448 || rep.PeakWriteUnits != 3435 {
		t.Errorf("busiest second: %v RCU, %v WCU; want 7448 and 3435", rep.PeakReadUnits, rep.PeakWriteUnits)
	}
}
