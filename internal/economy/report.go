package economy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
)

// Result is the table of one economy run.
type Result struct {
	Prices    Prices `json:"prices"`
	MemoryMB  int    `json:"memoryMB"`
	ValueSize int    `json:"valueSize"`
	Buckets   int    `json:"buckets"`
	Seed      uint64 `json:"seed"`
	// Doorbell reports that the Spillway and Fargate relays listened on
	// the doorbell (Config.Doorbell).
	Doorbell bool `json:"doorbell,omitempty"`
	// Lines holds one object per rate, deployment and part (and a total).
	Lines []Line `json:"lines"`
	// Runs are the steady-scenario runs the Spillway and Fargate figures
	// come from.
	Runs []Measured `json:"runs"`
	// Curve is latency and bill by how a relay learns of a commit.
	Curve []CurvePoint `json:"curve"`
	// Assumptions of the anchors' models and of the scaling.
	Assumptions []string `json:"assumptions"`
}

// Assumptions lists what the figures rest on beyond the runs' counts.
func Assumptions(cfg Config) []string {
	cfg = cfg.withDefaults()
	return []string{
		fmt.Sprintf("prices: %s", OnDemandPrices.Source),
		"all deployments: a 30-day month; free tiers ignored; Kafka (MSK), CloudWatch, X-Ray, NAT and data transfer are the same for all and left out",
		spillwayAssumption(cfg),
		"spillway: Lambda duration is the invocations' simulated time (DynamoDB 5 ms, produce 10 ms, Invoke 15 ms, start 50 ms, cold start 250 ms); CPU time between requests is not simulated",
		fmt.Sprintf("fargate: one ECS Fargate task (%.2g vCPU, %.2g GB, Linux/ARM) all month, polling like the seed: the relay in hold mode (1 s polls, 10 s renewals, 30 s leases) on the same traffic, learning of commits as Spillway's, its DynamoDB requests counted in the same scenario; at 0 msg/s modelled as one heartbeat and %d keeps every 10 s (1 WRU each) and %d head probes every second (0.5 RRU each); no load balancer, no public IPv4",
			FargateVCPU, FargateMemoryGB, cfg.Buckets, cfg.Buckets),
		fmt.Sprintf("streams: the outbox item (value + %d bytes) put inside the business transaction (2 WRU per KB), with a TTL of %v and no counter and no delete (TTL deletes are free); storage of the items the TTL keeps; stream reads by the Lambda trigger are free; batches of up to %d with a %v batching window on one shard; %v billed per batch at %d MB",
			itemOverhead, StreamsTTL, StreamsBatchSize, StreamsWindow, StreamsInvocationTime, StreamsMemoryMB),
		"streams does not give: durability past the stream's 24 h retention (a consumer down longer loses messages), per-key order across writers (records of different items land on different shards), backlog metrics, nor the shared table contract (other relays and tools cannot read or drain the outbox)",
	}
}

// spillwayAssumption says which deployment the Spillway rows price.
func spillwayAssumption(cfg Config) string {
	learn := fmt.Sprintf("busy buckets probed every %v (the target latency)", outbox.DefaultTargetLatency)
	if cfg.Doorbell {
		learn = "the doorbell (Kafka.DoorbellTopic: every commit's writer rings the relay holding its bucket, which fetches it at once; every bucket probed at the 1 s poll)"
	}
	return fmt.Sprintf("spillway: the stack's defaults with %s (drain mode, 1 s poll, 2 s idle timeout or 10 s under steady traffic, 15 min timeout, reserved concurrency %d), relay memory %d MB; every commit's writer notifies as the Go writer and the enqueue function do; one EventBridge Scheduler sweep a minute; a run's counts, drain tail included, are scaled from its write time to the month",
		learn, cfg.Buckets, cfg.MemoryMB)
}

// find returns the line of a deployment, rate and part.
func (r Result) find(deployment string, rate float64, part string) (Line, bool) {
	i := slices.IndexFunc(r.Lines, func(l Line) bool { return l.Deployment == deployment && l.Rate == rate && l.Part == part })
	if i < 0 {
		return Line{}, false
	}
	return r.Lines[i], true
}

// Total is a deployment's monthly total at rate.
func (r Result) Total(deployment string, rate float64) float64 {
	l, _ := r.find(deployment, rate, PartTotal)
	return l.USDPerMonth
}

// LambdaShare is Spillway's Lambda cost (requests and duration) over its
// DynamoDB cost at rate.
func (r Result) LambdaShare(rate float64) float64 {
	req, _ := r.find(Spillway, rate, PartLambdaRequests)
	dur, _ := r.find(Spillway, rate, PartLambdaDuration)
	ddb, _ := r.find(Spillway, rate, PartDynamoDB)
	if ddb.USDPerMonth == 0 {
		return 0
	}
	return (req.USDPerMonth + dur.USDPerMonth) / ddb.USDPerMonth
}

// rates returns the rates of the result, ascending.
func (r Result) rates() []float64 {
	var out []float64
	for _, l := range r.Lines {
		if !slices.Contains(out, l.Rate) {
			out = append(out, l.Rate)
		}
	}
	slices.Sort(out)
	return out
}

// Tables renders the bill and the runs.
func (r Result) Tables() []lab.Table {
	bills := lab.Table{
		Title: fmt.Sprintf("Economy: the AWS bill per month by traffic rate (1 KB values = %d B, %d buckets, relay memory %d MB, seed %d; prices of %s)",
			r.ValueSize, r.Buckets, r.MemoryMB, r.Seed, r.Prices.Date),
		Header: []string{"msg/s", "deployment", "WRU/msg", "RRU/msg", "invocations/msg", "GB-s/month", "DynamoDB", "Lambda req", "Lambda dur", "schedule", "Fargate", "total/month", "per M msgs"},
	}
	for _, rate := range r.rates() {
		for _, d := range []string{Spillway, Fargate, Streams} {
			bills.Rows = append(bills.Rows, r.row(d, rate))
		}
	}
	bills.Notes = append(bills.Notes, r.verdicts()...)
	bills.Notes = append(bills.Notes, r.Assumptions...)
	runs := lab.Table{
		Title:  "Economy: the steady-scenario runs behind the Spillway and Fargate figures",
		Header: []string{"msg/s", "relay mode", "simulated writes", "messages", "write units", "read units", "invocations", "wake-ups not joining", "function time", "p99", "slowest"},
	}
	for _, m := range r.Runs {
		runs.Rows = append(runs.Rows, []string{fmtRate(m.Config.Rate), string(m.Relay.Mode), m.Config.Duration.String(), fmt.Sprint(m.Relayed),
			fmt.Sprintf("%.1f", m.Counter.WriteUnits), fmt.Sprintf("%.1f", m.Counter.ReadUnits), fmt.Sprint(m.Invocations), fmt.Sprint(m.WakeUpsWithoutJoining),
			m.FunctionTime.Round(time.Millisecond).String(), fmtLatency(m.Latency.P99), fmtLatency(m.Latency.Max)})
	}
	return []lab.Table{bills, runs, r.curveTable()}
}

// row is one deployment's bill at one rate.
func (r Result) row(d string, rate float64) []string {
	get := func(part string) Line { l, _ := r.find(d, rate, part); return l }
	ddb, req, dur, sched, task, total := get(PartDynamoDB), get(PartLambdaRequests), get(PartLambdaDuration), get(PartSchedule), get(PartFargate), get(PartTotal)
	perM := "-"
	if rate > 0 {
		perM = usd(total.USDPerMillion)
	}
	name := d
	if total.Modelled {
		name += " (model)"
	}
	return []string{fmtRate(rate), name, fmt.Sprintf("%.2f", ddb.WriteUnitsPerMessage), fmt.Sprintf("%.2f", ddb.ReadUnitsPerMessage),
		fmt.Sprintf("%.4f", req.InvocationsPerMessage), fmt.Sprintf("%.0f", dur.GBSecondsPerMonth),
		usd(ddb.USDPerMonth), usd(req.USDPerMonth), usd(dur.USDPerMonth), usd(sched.USDPerMonth), usd(task.USDPerMonth), usd(total.USDPerMonth), perM}
}

// verdicts states the goals: cheaper than the Fargate anchor, the Lambda
// share at 10 msg/s, and the ratio to the Streams pattern.
func (r Result) verdicts() []string {
	var out, cheaper, dearer, ratios []string
	for _, rate := range r.rates() {
		s, f, st := r.Total(Spillway, rate), r.Total(Fargate, rate), r.Total(Streams, rate)
		if s < f {
			cheaper = append(cheaper, fmtRate(rate))
		} else {
			dearer = append(dearer, fmt.Sprintf("%s (%s vs %s)", fmtRate(rate), usd(s), usd(f)))
		}
		if st > 0 {
			ratios = append(ratios, fmt.Sprintf("%s msg/s %.1fx", fmtRate(rate), s/st))
		}
	}
	out = append(out, fmt.Sprintf("cheaper than the Fargate anchor at msg/s: %s; not at: %s", orNone(cheaper), orNone(dearer)))
	if slices.Contains(r.rates(), 10) {
		out = append(out, fmt.Sprintf("Lambda share (requests + duration) at 10 msg/s: %.0f%% of the DynamoDB share (goal ≤ 25%%)", 100*r.LambdaShare(10)))
	}
	out = append(out, "Spillway / Streams pattern, total per month: "+orNone(ratios))
	return out
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func fmtRate(r float64) string { return fmt.Sprintf("%g", r) }

func fmtLatency(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

// usd renders a monthly bill's figure: cents, and four decimals under a
// cent.
func usd(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.01:
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// unitUSD renders the cost and idle studies' unit costs (per hour of an
// idle deployment, per million messages), which go down to tens of
// micro-dollars: five decimals under a cent, seven under a hundredth of
// one. It is not usd: one formatter for both would change the figures
// docs/lab/cost.txt and idle.txt or economy.txt record.
func unitUSD(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.0001:
		return fmt.Sprintf("$%.7f", v)
	case v < 0.01:
		return fmt.Sprintf("$%.5f", v)
	default:
		return fmt.Sprintf("$%.2f", v)
	}
}
