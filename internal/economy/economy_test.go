package economy

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// testDurations keeps the test short: 5 schedule sweeps at 0 msg/s, about
// 120 messages at 1 msg/s.
func testDurations(rate float64) time.Duration {
	if rate == 0 {
		return 5 * time.Minute
	}
	return 2 * time.Minute
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }

// run runs cfg in a bubble of its own.
func run(t *testing.T, cfg Config) (res Result, err error) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { res, err = Run(t.Context(), cfg) })
	return res, err
}

func TestEconomy(t *testing.T) {
	t.Run("CountsTheBillAtAFixedSeed", func(t *testing.T) {
		// The latency dial at the poll: these bounds are the linger's; the
		// dial's price is TestEconomy/CurvePricesTheLatencyDial's.
		res, err := run(t, Config{Rates: []float64{0, 1}, Duration: testDurations, TargetLatency: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range res.Tables() {
			var b bytes.Buffer
			if err := tb.Write(&b); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", b.String())
		}
		get := func(d string, rate float64, part string) Line {
			t.Helper()
			l, ok := res.find(d, rate, part)
			if !ok {
				t.Fatalf("no line for %s at %v msg/s, %s", d, rate, part)
			}
			return l
		}
		// Idle: only the schedule runs, 5 sweeps in 5 minutes, each one probe
		// of every bucket's head (0.5 read units): 43,200 sweeps a month.
		const sweepsPerMonth = 30 * 24 * 60
		if l := get(Spillway, 0, PartLambdaRequests); !near(l.InvocationsPerMonth, sweepsPerMonth) {
			t.Errorf("idle invocations per month %v, want %v (the schedule's)", l.InvocationsPerMonth, sweepsPerMonth)
		}
		if l := get(Spillway, 0, PartDynamoDB); !near(l.ReadUnitsPerMonth, sweepsPerMonth*8*0.5) || l.WriteUnitsPerMonth != 0 {
			t.Errorf("idle DynamoDB units per month: %v write, %v read; want 0 and %v", l.WriteUnitsPerMonth, l.ReadUnitsPerMonth, sweepsPerMonth*8*0.5)
		}
		// 1 msg/s, the relay's defaults: the message path costs 7 write units
		// (the sequence reservation, the transactional put of an item over
		// 1 KB, the relay's delete); leases and relay starts add the rest.
		// The longer linger under steady traffic keeps relays from stopping
		// between messages (8.9 write and 8.3 read units, 0.12 invocations a
		// message without it: see the control below).
		ddb := get(Spillway, 1, PartDynamoDB)
		if ddb.WriteUnitsPerMessage < 7 || ddb.WriteUnitsPerMessage > 8.5 || ddb.ReadUnitsPerMessage > 7.5 {
			t.Errorf("1 msg/s: %.2f write and %.2f read units per message, want 7–8.5 and ≤ 7.5", ddb.WriteUnitsPerMessage, ddb.ReadUnitsPerMessage)
		}
		if total, fargate := get(Spillway, 1, PartTotal), get(Fargate, 1, PartTotal); total.USDPerMonth >= fargate.USDPerMonth {
			t.Errorf("1 msg/s: Spillway $%.2f a month, not below the Fargate anchor's $%.2f", total.USDPerMonth, fargate.USDPerMonth)
		}
		var drain Measured
		for _, m := range res.Runs {
			if m.Config.Rate == 1 && m.Relay.Mode == "drain" {
				drain = m
			}
		}
		if waste := float64(drain.WakeUpsWithoutJoining) / float64(max(drain.Relayed, 1)); drain.Relayed == 0 || waste > 0.1 {
			t.Errorf("1 msg/s: %d wake-up invocations without joining for %d messages (%.3f), want ≤ 0.1 per message",
				drain.WakeUpsWithoutJoining, drain.Relayed, waste)
		}
		if inv := get(Spillway, 1, PartLambdaRequests).InvocationsPerMessage; inv > 0.08 {
			t.Errorf("1 msg/s: %.3f invocations per message, want ≤ 0.08", inv)
		}
		// The anchors' models.
		if l := get(Fargate, 0, PartFargate); !near(l.USDPerMonth, (0.25*0.03238+0.5*0.00356)*720) {
			t.Errorf("Fargate task per month $%v", l.USDPerMonth)
		}
		if l := get(Streams, 1, PartDynamoDB); l.WriteUnitsPerMessage != 4 || l.ReadUnitsPerMessage != 0 {
			t.Errorf("streams: %v write and %v read units per message, want 4 and 0", l.WriteUnitsPerMessage, l.ReadUnitsPerMessage)
		}
		if l := get(Streams, 1, PartLambdaRequests); !near(l.InvocationsPerMessage, 1) {
			t.Errorf("streams at 1 msg/s: %v invocations per message, want 1 (one per batching window)", l.InvocationsPerMessage)
		}
		if total := get(Spillway, 1, PartTotal); total.USDPerMonth <= ddb.USDPerMonth || !near(total.USDPerMillion, total.USDPerMonth/(1*30*24*3600)*1e6) {
			t.Errorf("total %+v does not add up over DynamoDB %+v", total, ddb)
		}
		var svg bytes.Buffer
		if err := res.WritePlot(&svg); err != nil {
			t.Fatal(err)
		}
		if s := svg.String(); !strings.Contains(s, "<svg") || !strings.Contains(s, "Fargate") || !strings.Contains(s, "Streams") {
			t.Errorf("plot is not an SVG with the three deployments: %.200s", s)
		}
	})

	// Without the longer linger (MaxIdleTimeout equal to IdleTimeout) relays
	// stop between messages at 1 msg/s: the bounds above must fail.
	t.Run("WithoutTheLongerLingerRestartsBetweenMessages", func(t *testing.T) {
		res, err := run(t, Config{Rates: []float64{1}, Duration: testDurations, MaxIdleTimeout: 2 * time.Second, TargetLatency: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ddb, ok := res.find(Spillway, 1, PartDynamoDB)
		inv, _ := res.find(Spillway, 1, PartLambdaRequests)
		if !ok || ddb.WriteUnitsPerMessage <= 8.5 || inv.InvocationsPerMessage <= 0.08 {
			t.Errorf("without the longer linger: %.2f write units and %.3f invocations per message, want > 8.5 and > 0.08",
				ddb.WriteUnitsPerMessage, inv.InvocationsPerMessage)
		}
	})

	// The curve: the 1 s poll (the baseline), the dial's default paid in
	// read units (the probes), the doorbell faster than both for fewer
	// read units than the dial, and the doorbell's rings lost falling back
	// to the poll.
	t.Run("CurvePricesHowARelayLearnsOfACommit", func(t *testing.T) {
		// Two minutes: the run's start (cold starts) weighs under 1 % of
		// its messages.
		res, err := run(t, Config{Rates: []float64{10}, Duration: func(float64) time.Duration { return 2 * time.Minute },
			Doorbell: true, CurveRates: []float64{10}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Curve) != len(DefaultSettings) {
			t.Fatalf("%d curve points, want one per setting: %+v", len(res.Curve), res.Curve)
		}
		poll, dial, bell, down := res.Curve[0], res.Curve[1], res.Curve[2], res.Curve[3]
		if poll.Setting.Target != time.Second || dial.Setting.Target != outbox.DefaultTargetLatency || !bell.Setting.Doorbell || !down.Setting.Down {
			t.Fatalf("curve settings %v, %v, %v, %v", poll.Setting, dial.Setting, bell.Setting, down.Setting)
		}
		if bell.Run.Rings == 0 || bell.Run.Counter.ReadUnits != res.Runs[0].Counter.ReadUnits {
			t.Errorf("the doorbell's point is not the table's run: %d rings", bell.Run.Rings)
		}
		if !(bell.Run.Latency.P99 < dial.Run.Latency.P99 && dial.Run.Latency.P99 < poll.Run.Latency.P99) ||
			!(dial.Run.Counter.ReadUnits > bell.Run.Counter.ReadUnits && bell.Run.Counter.ReadUnits > poll.Run.Counter.ReadUnits) {
			t.Errorf("p99 %v / %v / %v and read units %v / %v / %v (poll, dial, doorbell): want the doorbell fastest for fewer reads than the dial",
				poll.Run.Latency.P99, dial.Run.Latency.P99, bell.Run.Latency.P99, poll.Run.Counter.ReadUnits, dial.Run.Counter.ReadUnits, bell.Run.Counter.ReadUnits)
		}
		if bell.Run.Latency.P99 > 100*time.Millisecond || bell.Run.Refused != 0 {
			t.Errorf("doorbell: p99 %v, %d refused writes; want ≤ 100ms and none", bell.Run.Latency.P99, bell.Run.Refused)
		}
		if down.Run.Latency.P99 < 900*time.Millisecond || down.Run.Relayed != down.Run.Committed || down.Run.Delivered != 0 {
			t.Errorf("rings lost: p99 %v, %d of %d relayed, %d rings delivered; want the poll's and every message",
				down.Run.Latency.P99, down.Run.Relayed, down.Run.Committed, down.Run.Delivered)
		}
		if poll.Baseline != poll.USDPerMonth || dial.USDPerMonth <= bell.USDPerMonth {
			t.Errorf("bills: poll $%.2f (baseline $%.2f), dial $%.2f, doorbell $%.2f", poll.USDPerMonth, poll.Baseline, dial.USDPerMonth, bell.USDPerMonth)
		}
		var svg bytes.Buffer
		if err := res.WriteCurvePlot(&svg); err != nil || !strings.Contains(svg.String(), "<svg") {
			t.Errorf("curve plot: %v", err)
		}
	})

	t.Run("RefusesBadConfigurations", func(t *testing.T) {
		for name, cfg := range map[string]Config{
			"negative rate": {Rates: []float64{-1}},
			"small memory":  {MemoryMB: 64},
			"zero duration": {Rates: []float64{1}, Duration: func(float64) time.Duration { return 0 }},
		} {
			if _, err := run(t, cfg); err == nil || !strings.Contains(err.Error(), "economy") {
				t.Errorf("%s: err %v, want a configuration error", name, err)
			}
		}
	})
}
