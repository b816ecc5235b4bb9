package economy

import (
	"fmt"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlot draws the monthly total against the rate, both on log scales,
// for the three deployments, as SVG. A log scale has no 0: the rates above
// 0 are drawn, and the 0 msg/s figures stay in the table.
func (r Result) WritePlot(w io.Writer) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Outbox bill per month (us-east-1, prices of %s)", r.Prices.Date)
	p.X.Label.Text = "messages per second"
	p.Y.Label.Text = "USD per month"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	var args []any
	for _, d := range []string{Spillway, Fargate, Streams} {
		var pts plotter.XYs
		for _, rate := range r.rates() {
			if total := r.Total(d, rate); rate > 0 && total > 0 {
				pts = append(pts, plotter.XY{X: rate, Y: total})
			}
		}
		if len(pts) == 0 {
			continue
		}
		args = append(args, legend(d, r.MemoryMB, r.Doorbell), pts)
	}
	if len(args) == 0 {
		return fmt.Errorf("economy: no rate above 0 to plot")
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("economy: plot: %w", err)
	}
	// A log axis needs a positive range wider than one point: pad by half
	// a decade around the data.
	pad := math.Sqrt(10)
	p.X.Min, p.X.Max = p.X.Min/pad, p.X.Max*pad
	p.Y.Min, p.Y.Max = p.Y.Min/pad, p.Y.Max*pad
	wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, "svg")
	if err != nil {
		return fmt.Errorf("economy: plot: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}

// WriteCurvePlot draws the curve as SVG: for each curve rate, the p99
// commit → publish latency against what the bill adds over the 1 s poll,
// one point per setting (the fault's left out: it is no choice).
func (r Result) WriteCurvePlot(w io.Writer) error {
	p := plot.New()
	p.Title.Text = "How a relay learns of a commit: p99 commit → publish and its price"
	p.X.Label.Text = "p99 commit → publish, ms"
	p.Y.Label.Text = "bill per month over the 1 s poll, %"
	p.Legend.Top = true
	var args []any
	for _, rate := range DefaultCurveRates {
		var pts plotter.XYs
		for _, c := range r.Curve {
			if c.Rate == rate && c.Baseline > 0 && !c.Setting.Down {
				pts = append(pts, plotter.XY{X: float64(c.Run.Latency.P99.Milliseconds()), Y: 100 * (c.USDPerMonth/c.Baseline - 1)})
			}
		}
		if len(pts) > 0 {
			args = append(args, fmt.Sprintf("%g msg/s (%s)", rate, r.curveLabel()), pts)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("economy: no curve to plot")
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("economy: plot: %w", err)
	}
	p.X.Min, p.Y.Min = 0, min(p.Y.Min, 0)
	wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, "svg")
	if err != nil {
		return fmt.Errorf("economy: plot: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}

func legend(d string, memoryMB int, doorbell bool) string {
	switch d {
	case Spillway:
		if doorbell {
			return fmt.Sprintf("Spillway with the doorbell (%d MB relay)", memoryMB)
		}
		return fmt.Sprintf("Spillway, default deployment (%d MB relay)", memoryMB)
	case Fargate:
		return "always-on relay on Fargate (0.25 vCPU, 0.5 GB)"
	}
	return "DynamoDB Streams → Lambda (model)"
}
