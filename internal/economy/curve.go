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

// Setting is one way a relay learns of a commit that the curve measures:
// the latency dial's probes (Target, SPILLWAY_TARGET_LATENCY) or the
// doorbell (SPILLWAY_DOORBELL_TOPIC, the relay then probing at the poll).
type Setting struct {
	// Target is the dial; zero takes the function's default for the
	// setting (the poll with a doorbell, outbox.DefaultTargetLatency
	// without).
	Target time.Duration `json:"targetNanos,omitempty"`
	// Doorbell rings the relay holding the bucket after every commit.
	Doorbell bool `json:"doorbell,omitempty"`
	// Down loses every ring: the doorbell's path has failed (a fault).
	Down bool `json:"down,omitempty"`
}

// String names the setting in the curve's table.
func (s Setting) String() string {
	switch {
	case s.Down:
		return "doorbell, rings lost"
	case s.Doorbell:
		return "doorbell"
	case s.Target >= time.Second:
		return s.Target.String() + " poll"
	}
	return s.Target.String() + " dial"
}

// DefaultSettings are the curve's settings: the cheapest bill (every
// bucket probed at the 1 s poll), the dial's default without a doorbell,
// the doorbell, and the doorbell with every ring lost.
var DefaultSettings = []Setting{
	{Target: time.Second}, {Target: outbox.DefaultTargetLatency}, {Doorbell: true}, {Doorbell: true, Down: true},
}

// DefaultCurveRates are the rates the curve measures, messages per second.
var DefaultCurveRates = []float64{0.1, 1, 10, 100}

// CurvePoint is one drain-mode run of the curve: its latency and its
// Spillway bill per month.
type CurvePoint struct {
	Rate    float64 `json:"rate"`
	Setting Setting `json:"setting"`
	// Run is the steady-scenario run; the main table's where it has the
	// same setting.
	Run Measured `json:"run"`
	// USDPerMonth is the Spillway total with this setting; Baseline with
	// the first setting measured (the 1 s poll: the cheapest).
	USDPerMonth float64 `json:"usdPerMonth"`
	Baseline    float64 `json:"baselineUsdPerMonth"`
}

// runCurve measures every setting at every curve rate for the rate's
// Duration, reusing the main table's drain run where it has the same
// setting.
func runCurve(ctx context.Context, cfg Config, res Result) ([]CurvePoint, error) {
	var out []CurvePoint
	for _, rate := range cfg.CurveRates {
		first := len(out)
		for _, s := range cfg.Settings {
			i := slices.IndexFunc(res.Runs, func(m Measured) bool {
				return m.Config.Rate == rate && m.Relay.Mode == outbox.ModeDrain && m.Setting == s
			})
			var m Measured
			if i >= 0 {
				m = res.Runs[i]
			} else {
				var err error
				if m, err = measure(ctx, cfg, rate, outbox.ModeDrain, s); err != nil {
					return nil, err
				}
			}
			out = append(out, CurvePoint{Rate: rate, Setting: s, Run: m, USDPerMonth: spillwayTotal(res.Prices, cfg, m)})
		}
		for i := first; i < len(out); i++ {
			out[i].Baseline = out[first].USDPerMonth
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
		Title:  "Economy: how a relay learns of a commit: commit → publish and the Spillway bill per month by setting, drain mode, priced as above",
		Header: []string{"msg/s", "setting", "p50", "p99", "slowest", "RRU/msg", "refused writes", "doorbell rings", "total/month", "vs 1 s poll"},
	}
	for _, c := range r.Curve {
		rings := "-"
		if c.Setting.Doorbell {
			rings = fmt.Sprint(c.Run.Rings)
		}
		t.Rows = append(t.Rows, []string{fmtRate(c.Rate), c.Setting.String(), fmtLatency(c.Run.Latency.P50), fmtLatency(c.Run.Latency.P99), fmtLatency(c.Run.Latency.Max),
			fmt.Sprintf("%.2f", c.Run.Counter.ReadUnits/float64(max(c.Run.Relayed, 1))), fmt.Sprint(c.Run.Refused), rings,
			usd(c.USDPerMonth), fmt.Sprintf("%+.1f%%", 100*(c.USDPerMonth/c.Baseline-1))})
	}
	t.Notes = append(t.Notes,
		"runs as the table's above (the doorbell's rows are its Spillway runs); RRU/msg is read units per message",
		fmt.Sprintf("1 s poll: every bucket a relay holds probed every second (0.5 read units a probe), the cheapest bill; %v dial: busy buckets (work in the last 10 s) probed every %v, the default without a doorbell (SPILLWAY_TARGET_LATENCY)",
			outbox.DefaultTargetLatency, outbox.DefaultTargetLatency),
		"doorbell: the writer rings the relay holding the commit's bucket on a Kafka topic (one record per bucket, the produce and the relay's waiting fetch each a 10 ms round trip), the relay fetches it at once, every bucket probed at the 1 s poll (SPILLWAY_DOORBELL_TOPIC); rings lost: every ring produced and none delivered, the poll the floor",
	)
	return t
}

// curveLabel lists the curve's settings in the order measured.
func (r Result) curveLabel() string {
	var out []string
	for _, c := range r.Curve {
		if s := c.Setting.String(); !c.Setting.Down && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}
