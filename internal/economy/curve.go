package economy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
)

// DefaultTargets are the latency dial's settings the curve measures, with
// the relay's default (outbox.DefaultTargetLatency) among them.
var DefaultTargets = []time.Duration{time.Second, 500 * time.Millisecond, 250 * time.Millisecond, 100 * time.Millisecond}

// CurveDuration is how long a rate's curve runs write: shorter than the
// main table's at 1 and 10 msg/s (the probes of a 100 ms target are most
// of a run's requests), long enough for a steady state and a p99 of a few
// hundred messages.
func CurveDuration(rate float64) time.Duration {
	switch {
	case rate < 10:
		return 3 * time.Minute
	case rate < 100:
		return 2 * time.Minute
	}
	return time.Minute
}

// DefaultCurveRates are the rates the curve measures, messages per second.
var DefaultCurveRates = []float64{1, 10, 100}

// CurvePoint is one drain-mode run of the curve: its latency and its
// Spillway bill per month.
type CurvePoint struct {
	Rate   float64       `json:"rate"`
	Target time.Duration `json:"targetNanos"`
	// Default reports the relay's default target.
	Default bool `json:"default,omitempty"`
	// Run is the steady-scenario run; the main table's run at the default.
	Run Measured `json:"run"`
	// USDPerMonth is the Spillway total at this target; Baseline at the
	// largest target measured (the cheapest).
	USDPerMonth float64 `json:"usdPerMonth"`
	Baseline    float64 `json:"baselineUsdPerMonth"`
}

// runCurve measures every target (and the relay's default) at every curve
// rate for CurveDuration, reusing the main table's drain run where it has
// the same target and duration.
func runCurve(ctx context.Context, cfg Config, res Result) ([]CurvePoint, error) {
	targets := slices.Clone(cfg.Targets)
	if !slices.Contains(targets, outbox.DefaultTargetLatency) {
		targets = append(targets, outbox.DefaultTargetLatency)
	}
	slices.SortFunc(targets, func(a, b time.Duration) int { return int(b - a) })
	curve := cfg
	curve.Duration = CurveDuration
	var out []CurvePoint
	for _, rate := range cfg.CurveRates {
		first := len(out)
		for _, target := range targets {
			i := slices.IndexFunc(res.Runs, func(m Measured) bool {
				return m.Config.Rate == rate && m.Relay.Mode == outbox.ModeDrain && m.Config.Duration == CurveDuration(rate) && m.Relay.TargetLatency == target
			})
			var m Measured
			if i >= 0 {
				m = res.Runs[i]
			} else {
				var err error
				if m, err = measure(ctx, curve, rate, outbox.ModeDrain, target); err != nil {
					return nil, err
				}
			}
			out = append(out, CurvePoint{Rate: rate, Target: target, Default: target == outbox.DefaultTargetLatency,
				Run: m, USDPerMonth: spillwayTotal(res.Prices, cfg, m)})
		}
		cheapest := slices.MaxFunc(out[first:], func(a, b CurvePoint) int { return int(a.Target - b.Target) })
		for i := first; i < len(out); i++ {
			out[i].Baseline = cheapest.USDPerMonth
		}
	}
	return out, nil
}

// spillwayTotal is the Spillway total per month of a run.
func spillwayTotal(p Prices, cfg Config, m Measured) float64 {
	for _, l := range spillwayBill(p, cfg, m) {
		if l.Part == PartTotal {
			return l.USDPerMonth
		}
	}
	return 0
}

// curveTable renders the curve.
func (r Result) curveTable() lab.Table {
	t := lab.Table{
		Title:  "Economy: the latency dial (SPILLWAY_TARGET_LATENCY): commit → publish and the Spillway bill per month by target, drain mode, priced as above",
		Header: []string{"msg/s", "target", "p50", "p99", "slowest", "RRU/msg", "refused writes", "total/month", "vs the cheapest"},
	}
	for _, c := range r.Curve {
		target := c.Target.String()
		if c.Default {
			target += " (default)"
		}
		t.Rows = append(t.Rows, []string{fmtRate(c.Rate), target, fmtLatency(c.Run.Latency.P50), fmtLatency(c.Run.Latency.P99), fmtLatency(c.Run.Latency.Max),
			fmt.Sprintf("%.2f", c.Run.Counter.ReadUnits/float64(max(c.Run.Relayed, 1))), fmt.Sprint(c.Run.Refused),
			usd(c.USDPerMonth), fmt.Sprintf("%+.1f%%", 100*(c.USDPerMonth/c.Baseline-1))})
	}
	var windows []string
	for _, rate := range DefaultCurveRates {
		windows = append(windows, fmt.Sprintf("%v at %g msg/s", CurveDuration(rate), rate))
	}
	t.Notes = append(t.Notes, "runs of "+strings.Join(windows, ", ")+" of writes, shorter than the table's above at 1 and 10 msg/s to keep the study fast: their start and drain tail weigh more, so totals differ from the table's; compare targets within a rate")
	t.Notes = append(t.Notes, "target: how soon a running relay looks for a message committed to a bucket it holds that had work in the last 10 s (probed that often, 0.5 read units a probe); other buckets are probed every second; at 1 s it only polls")
	return t
}
