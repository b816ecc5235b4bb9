package scale

import (
	"context"
	"maps"
	"testing"
	"testing/synctest"
)

// inBubble runs a simulation in a synctest bubble of its own.
func inBubble[R any](t *testing.T, run func(ctx context.Context) (R, error)) (R, error) {
	t.Helper()
	var r R
	var err error
	synctest.Test(t, func(t *testing.T) { r, err = run(t.Context()) })
	return r, err
}

// The coordination partition of the largest fleet for seed 1: 1,024
// lease items and 128 heartbeat records, without the keep-ahead mark (the
// seed's relays); Spillway's relays add the mark to theirs.
const (
	bigBuckets, bigRelays = 1024, 128
	fullReadBytes         = 107374 // every item: 27 read units
	heartbeatReadBytes    = 10110  // the heartbeat records: 3 read units
	markBytes             = 11     // KeepsAhead (10 bytes) and a BOOL: 27 and 3 read units still
)

func TestScale(t *testing.T) {
	// CoordinationAtOneThousandBucketsAndOneHundredTwentyEightRelays pins
	// the counted figures of the largest fleet, with the seed's reads
	// (every round reads the whole partition, and keeps every lease every
	// round) and with Spillway's relays. A seed round is one heartbeat, one read
	// and one keep per owned bucket, so a renew interval costs Buckets + Relays
	// write units. Spillway's relays keep a lease every other round, half of
	// their leases in each round (lease.KeepAhead), so an interval costs
	// Buckets/2 + Relays; they read everything once a lease duration (every
	// third round) and only the heartbeat records in between.
	t.Run("CoordinationAtOneThousandBucketsAndOneHundredTwentyEightRelays", func(t *testing.T) {
		const intervals = 3 // one lease duration
		for _, c := range []struct {
			name                  string
			seedRelays, fullReads int
			keeps                 int // per renew interval
			startPeakWrite        float64
			startPeakRead         float64
			meanRead, peakRead    float64
			meanWrite, peakWrite  float64
		}{
			{"seed reads", bigRelays, bigRelays * intervals, bigBuckets, 1142, 485, 345.6, 513, 115.2, 171},
			{"settled reads", 0, bigRelays, bigBuckets / 2, 1138, 493, 140.8, 288, 64.0, 95},
		} {
			t.Run(c.name, func(t *testing.T) {
				rep, err := inBubble(t, func(ctx context.Context) (Report, error) {
					return Run(ctx, Config{Buckets: bigBuckets, Relays: bigRelays, SteadyRounds: intervals, SeedRelays: c.seedRelays, Seed: 1})
				})
				if err != nil {
					t.Fatal(err)
				}
				if !rep.Converged || rep.RoundsToConverge != 2 {
					t.Fatalf("settled after %d rounds (converged %v), want 2", rep.RoundsToConverge, rep.Converged)
				}
				start := rep.Start
				if start.Refused != 0 || start.Claims != 2040 || start.Releases != 1016 || start.Lost != 0 {
					t.Errorf("start: refused %d, claims %d, releases %d, lost %d; want 0, 2040, 1016, 0", start.Refused, start.Claims, start.Releases, start.Lost)
				}
				// The first relay to start claims every bucket in one round:
				// more than one partition's write limit in that second.
				if start.PeakWriteUnits != c.startPeakWrite || start.PeakReadUnits != c.startPeakRead {
					t.Errorf("start peaks: %v WCU/s, %v RCU/s; want %v and %v", start.PeakWriteUnits, start.PeakReadUnits, c.startPeakWrite, c.startPeakRead)
				}

				st := rep.Steady
				reads := bigRelays * intervals
				wantRequests := map[string]int{"PutItem": reads, "Query": reads, "UpdateItem": c.keeps * intervals}
				if !maps.Equal(st.Requests, wantRequests) || st.Refused != 0 || st.Claims+st.Releases+st.Lost != 0 {
					t.Fatalf("steady: requests %v, refused %d, moved %d; want %v and nothing refused or moved", st.Requests, st.Refused, st.Claims+st.Releases+st.Lost, wantRequests)
				}
				quiet := reads - c.fullReads
				marks := (bigRelays - c.seedRelays) * markBytes
				fullReadBytes, heartbeatReadBytes := fullReadBytes+marks, heartbeatReadBytes+marks
				if st.ReadPages != reads || st.ReadBytes != c.fullReads*fullReadBytes+quiet*heartbeatReadBytes {
					t.Errorf("steady reads: %d pages, %d bytes; want %d pages: %d of every item, %d of the heartbeats", st.ReadPages, st.ReadBytes, reads, c.fullReads, quiet)
				}
				units := func(bytes int) float64 { return float64((bytes + readUnitBytes - 1) / readUnitBytes) }
				wantRead := float64(c.fullReads)*units(fullReadBytes) + float64(quiet)*units(heartbeatReadBytes)
				if wantWrite := float64((c.keeps + bigRelays) * intervals); st.ReadUnits != wantRead || st.WriteUnits != wantWrite {
					t.Errorf("steady units: %v read, %v write; want %v and %v", st.ReadUnits, st.WriteUnits, wantRead, wantWrite)
				}
				if st.MeanReadUnits() != c.meanRead || st.PeakReadUnits != c.peakRead || st.MeanWriteUnits() != c.meanWrite || st.PeakWriteUnits != c.peakWrite {
					t.Errorf("steady per second: read mean %v peak %v, write mean %v peak %v; want %v, %v, %v, %v",
						st.MeanReadUnits(), st.PeakReadUnits, st.MeanWriteUnits(), st.PeakWriteUnits, c.meanRead, c.peakRead, c.meanWrite, c.peakWrite)
				}
			})
		}
	})

	// MixedFleet_SettledAndSeedRelaysShareTheTable_WithoutARefusal runs
	// relays that read only heartbeats while settled next to relays that read
	// everything and keep every lease every round (the seed's, or another
	// language's), on the embedded server: the seed relays keep their 32
	// leases in each of the 6 rounds, and so do Spillway's relays, since the
	// seed relays' heartbeats carry no keep-ahead mark: their clocks may be
	// LeaseDuration − LeaseRenewInterval apart, more than a lease left
	// unrenewed keeps.
	t.Run("MixedFleet_SettledAndSeedRelaysShareTheTable_WithoutARefusal", func(t *testing.T) {
		rep, err := inBubble(t, func(ctx context.Context) (Report, error) {
			return Run(ctx, Config{Buckets: 64, Relays: 16, SeedRelays: 8, SteadyRounds: 6, Backend: Embedded})
		})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Converged || rep.Start.Refused+rep.Steady.Refused != 0 {
			t.Fatalf("converged %v; refused %d at start, %d settled", rep.Converged, rep.Start.Refused, rep.Steady.Refused)
		}
		if st := rep.Steady; st.Claims+st.Releases+st.Lost != 0 || st.Requests["UpdateItem"] != 32*6+32*6 {
			t.Fatalf("settled fleet moved leases or kept the wrong leases: %+v", st)
		}
	})

	t.Run("ConfigRejectsUnusableFleets", func(t *testing.T) {
		for name, c := range map[string]Config{
			"no buckets":         {Buckets: -1},
			"renew not below":    {LeaseDuration: 10e9, LeaseRenewInterval: 10e9},
			"renew in fractions": {LeaseRenewInterval: 2500e6},
			"unknown backend":    {Backend: "dynamo"},
			"too many seed":      {Relays: 4, SeedRelays: 5},
		} {
			if _, err := Run(t.Context(), c); err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
	})
}
