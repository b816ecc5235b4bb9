package scale

import (
	"maps"
	"testing"
)

// TestCoordinationAtOneThousandBucketsAndOneHundredTwentyEightRelays pins the
// counted figures of the largest fleet for seed 1. A steady round is
// one heartbeat, one consistent read of the whole partition (one page) and
// one keep per owned bucket, so a renew interval costs Buckets + Relays
// write units and Relays reads of every lease and heartbeat item.
func TestCoordinationAtOneThousandBucketsAndOneHundredTwentyEightRelays(t *testing.T) {
	const buckets, relays, intervals = 1024, 128, 3
	rep, err := Run(t.Context(), Config{Buckets: buckets, Relays: relays, SteadyRounds: intervals, Seed: 1})
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
	// The first relay to start claims every bucket in one round: more
	// than one partition's write limit in that second.
	if start.PeakWriteUnits != 1142 || start.PeakReadUnits != 485 {
		t.Errorf("start peaks: %v WCU/s, %v RCU/s; want 1142 and 485", start.PeakWriteUnits, start.PeakReadUnits)
	}

	st := rep.Steady
	wantRequests := map[string]int{"PutItem": relays * intervals, "Query": relays * intervals, "UpdateItem": buckets * intervals}
	if !maps.Equal(st.Requests, wantRequests) || st.Refused != 0 || st.Claims+st.Releases+st.Lost != 0 {
		t.Fatalf("steady: requests %v, refused %d, moved %d; want %v and nothing refused or moved", st.Requests, st.Refused, st.Claims+st.Releases+st.Lost, wantRequests)
	}
	const bytesPerRead = 107374 // 1,024 lease items and 128 heartbeats
	if st.ReadPages != relays*intervals || st.ReadBytes != bytesPerRead*relays*intervals {
		t.Errorf("steady reads: %d pages, %d bytes; want %d pages of %d bytes", st.ReadPages, st.ReadBytes, relays*intervals, bytesPerRead)
	}
	unitsPerRead := float64((bytesPerRead + readUnitBytes - 1) / readUnitBytes)
	if st.ReadUnits != unitsPerRead*relays*intervals || st.WriteUnits != (buckets+relays)*intervals {
		t.Errorf("steady units: %v read, %v write; want %v and %v", st.ReadUnits, st.WriteUnits, unitsPerRead*relays*intervals, (buckets+relays)*intervals)
	}
	if st.MeanReadUnits() != 345.6 || st.PeakReadUnits != 513 || st.MeanWriteUnits() != 115.2 || st.PeakWriteUnits != 171 {
		t.Errorf("steady per second: read mean %v peak %v, write mean %v peak %v; want 345.6, 513, 115.2, 171",
			st.MeanReadUnits(), st.PeakReadUnits, st.MeanWriteUnits(), st.PeakWriteUnits)
	}
}

func TestConfigRejectsUnusableFleets(t *testing.T) {
	for name, c := range map[string]Config{
		"no buckets":         {Buckets: -1},
		"renew not below":    {LeaseDuration: 10e9, LeaseRenewInterval: 10e9},
		"renew in fractions": {LeaseRenewInterval: 2500e6},
		"unknown backend":    {Backend: "dynamo"},
		"relay id too long":  {RelayIDPrefix: string(make([]byte, 120))},
	} {
		if _, err := Run(t.Context(), c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
