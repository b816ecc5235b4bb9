package economy

import (
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
)

// TestIdleCost simulates each deployment idle with the real relay engine
// and asserts the exact requests and units, and the hourly rates they scale
// to (the study simulates the full hour). To stay fast under the race
// detector it simulates a quarter of an hour of drain and hold (the hold
// deployment's figures repeat with each 15-minute invocation) and five
// minutes of always-on (whose figures repeat every renewal interval). The expected figures are derived from the
// protocol (facts §12.1, §12.6, the acquisition round and the stop), with
// P = 1 s, I = 10 s, 8 buckets, a 1-minute schedule and a 15-minute
// function timeout:
//
//   - a sweep is 8 eventually consistent Limit-1 probes, 0.5 RRU each;
//   - a round is 1 heartbeat PutItem and 1 strongly consistent coordination
//     Query (1 RRU); the first claims the 8 buckets, every later one keeps
//     half of them (each lease is kept every other round, lease.KeepAhead):
//     1 UpdateItem each, 1 WRU each;
//   - a poll is 8 probes;
//   - a stop is 1 stopped-stamp PutItem, 2 lease Queries, 8 releasing
//     UpdateItems and 8 strongly consistent head reads of the released
//     buckets (1 RRU each: a commit that landed during the stop must not
//     be missed), and, a second later, the continuation watch: the 8
//     released buckets read once more (1 RRU each), for commits whose
//     writers skipped their wake-up while the relay still held them;
//   - the holder of bucket 0 samples the backlog every 30 s (warm
//     invocations of one execution environment included): 8 head queries,
//     and no count when every bucket is empty;
//   - every relay, whatever its poison policy, reads the replay requests
//     (one strongly consistent single-item Query, 1 RRU): a sweep once, a
//     joined relay after each acquisition round, and a stopping one in its
//     work-left probe and its continuation watch.
func TestIdleCost(t *testing.T) {
	t.Parallel()
	var scheduled, alwaysOn IdleResult
	synctest.Test(t, func(t *testing.T) {
		var err error
		env := lab.Config{Settle: synctest.Wait}
		if scheduled, err = RunIdle(t.Context(), env, IdleConfig{Window: 15 * time.Minute, Modes: []string{IdleDrain, IdleHold}}); err != nil {
			t.Fatal(err)
		}
		if alwaysOn, err = RunIdle(t.Context(), env, IdleConfig{Window: 5 * time.Minute, Modes: []string{IdleAlwaysOn}}); err != nil {
			t.Fatal(err)
		}
	})
	modes := append(scheduled.Modes, alwaysOn.Modes...)
	const (
		buckets     = 8
		probe       = 0.5 // RRU of an eventually consistent probe
		headRead    = 1   // RRU of a strongly consistent head read
		sweeps      = 15  // one per minute
		heldPolls   = 895 // t = 0 … 894 s: the budget ends StopMargin (5 s) before the 900 s deadline
		heldRounds  = 90  // t = 0, 10, … 890 s
		heldSamples = 30  // t = 0, 30, … 870 s
		alwaysPolls = 300 // t = 0 … 299 s
		alwaysRound = 30  // t = 0, 10, … 290 s
		alwaysSampl = 10  // t = 0, 30, … 270 s
		// gate is the joining run's read of the generation's predecessor
		// marker (one strongly consistent query; relays of one generation
		// in Lambda, not the always-on relay).
		gate = 1
		// alwaysGate is the always-on relay's (built on relayproc, gated
		// like the function): once per run.
		alwaysGate = 1
		// watch is the stop's continuation watch: one more strongly
		// consistent read of each released bucket.
		watch = buckets
		// replays are the reads of the replay requests.
		drainReplays  = sweeps
		heldReplays   = sweeps + heldRounds + 2
		alwaysReplays = alwaysRound
	)
	want := map[string]IdleCost{
		IdleDrain: {
			Runs: sweeps, Joined: 0,
			Requests:  map[string]int{"Query": sweeps*buckets + drainReplays},
			ReadUnits: sweeps*buckets*probe + drainReplays,
		},
		IdleHold: {
			Runs: sweeps + 1, Joined: 1,
			Requests: map[string]int{
				"Query":      sweeps*buckets + heldPolls*buckets + heldRounds + 2 + buckets + heldSamples*buckets + gate + watch + heldReplays,
				"PutItem":    heldRounds + 1,
				"UpdateItem": buckets + (heldRounds-1)*buckets/2 + buckets,
			},
			ReadUnits:  sweeps*buckets*probe + heldPolls*buckets*probe + heldRounds + 2 + buckets*headRead + heldSamples*buckets*probe + gate + watch*headRead + heldReplays,
			WriteUnits: heldRounds + 1 + buckets + (heldRounds-1)*buckets/2 + buckets,
		},
		IdleAlwaysOn: {
			Runs: 1, Joined: 1,
			Requests: map[string]int{
				"Query":      alwaysPolls*buckets + alwaysRound + alwaysSampl*buckets + alwaysGate + alwaysReplays,
				"PutItem":    alwaysRound,
				"UpdateItem": buckets + (alwaysRound-1)*buckets/2,
			},
			ReadUnits:  alwaysPolls*buckets*probe + alwaysRound + alwaysSampl*buckets*probe + alwaysGate + alwaysReplays,
			WriteUnits: alwaysRound + buckets + (alwaysRound-1)*buckets/2,
		},
	}
	// The windows scaled to an hour. The study simulates a whole hour, as
	// docs/benchmarks.md records: there always-on's first round, with its
	// claims, counts once rather than 12 times (1,444 UpdateItems, not
	// 1,488).
	perHour := map[string]Rate{
		IdleDrain:    {Requests: 480 + 4*drainReplays, ReadUnits: 240 + 4*drainReplays, WriteUnits: 0},
		IdleHold:     {Requests: 30480 + 4 + 4*watch + 364 + 1488 + 4*heldReplays, ReadUnits: 15440 + 4 + 4*watch*headRead + 4*heldReplays, WriteUnits: 1852},
		IdleAlwaysOn: {Requests: 30120 + 360 + 1488 + 12*(alwaysGate+alwaysReplays), ReadUnits: 15240 + 12*(alwaysGate+alwaysReplays), WriteUnits: 1848},
	}
	if len(modes) != len(want) {
		t.Fatalf("got %d modes, want %d", len(modes), len(want))
	}
	for _, got := range modes {
		w := want[got.Mode]
		if got.Runs != w.Runs || got.Joined != w.Joined {
			t.Errorf("%s: %d runs (%d joined), want %d (%d)", got.Mode, got.Runs, got.Joined, w.Runs, w.Joined)
		}
		if !maps.Equal(got.Requests, w.Requests) {
			t.Errorf("%s: requests %v, want %v", got.Mode, got.Requests, w.Requests)
		}
		if got.ReadUnits != w.ReadUnits || got.WriteUnits != w.WriteUnits {
			t.Errorf("%s: %.1f RRU, %.1f WRU, want %.1f, %.1f", got.Mode, got.ReadUnits, got.WriteUnits, w.ReadUnits, w.WriteUnits)
		}
		h := perHour[got.Mode]
		h.USD = OnDemandPrices.USD(h.WriteUnits, h.ReadUnits)
		if got.PerHour != h {
			t.Errorf("%s: per hour %+v, want %+v", got.Mode, got.PerHour, h)
		}
	}
	// Positive control of the ordering: drain is the cheapest, by far.
	if d, a := modes[0].PerHour.USD, modes[2].PerHour.USD; !(d*50 < a) {
		t.Errorf("drain costs %v/h, always-on %v/h: drain should be more than 50 times cheaper", d, a)
	}
}
