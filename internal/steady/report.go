package steady

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// MaxCoordinationWritesPerMessage is the scenario's coordination cost target.
const MaxCoordinationWritesPerMessage = 0.1

// MaxInvocationsPerMessage is the Lambda cost target at 1 message/s and
// more: relay invocations per relayed message.
const MaxInvocationsPerMessage = 0.1

// Report is what a run measured. Durations are simulated time: a run is a
// function of its Config, so two runs report the same.
type Report struct {
	// Config is the scenario as run, defaults applied; Relay the relay
	// function's settings it ran with.
	Config Config              `json:"config"`
	Relay  outbox.RelayOptions `json:"relay"`
	// Simulated is the simulated time until the last relay stopped.
	Simulated time.Duration `json:"simulatedNanos"`

	// Committed messages, Relayed (acknowledged at least once) and
	// Duplicates (acknowledged again).
	Committed  int `json:"committed"`
	Relayed    int `json:"relayed"`
	Duplicates int `json:"duplicates"`

	// Coordination writes and reads by kind (see the Kind constants), and
	// the message traffic's requests.
	CoordinationWrites       int            `json:"coordinationWrites"`
	CoordinationWritesByKind map[string]int `json:"coordinationWritesByKind"`
	CoordinationReads        int            `json:"coordinationReads"`
	CoordinationReadsByKind  map[string]int `json:"coordinationReadsByKind"`
	MessageWrites            int            `json:"messageWrites"`
	MessageReads             int            `json:"messageReads"`
	// Counter is what outboxlocal.Counter saw at the SDK layer over the run
	// (attempts, capacity units).
	Counter outboxlocal.Counts `json:"counter"`

	// The relay function's invocations and environments (what the Lambda
	// emulator counted).
	lambdasim.Stats
	// Claims counts buckets claimed; Handovers those claimed from another
	// relay than the bucket's previous claimer.
	Claims    int `json:"claims"`
	Handovers int `json:"handovers"`
	// WriterWakeUps were sent by the writer's notifier, WriterWakeUpsMerged
	// folded into another by coalescing, WriterWakeUpsFailed failed.
	WriterWakeUps       int64 `json:"writerWakeUps"`
	WriterWakeUpsMerged int64 `json:"writerWakeUpsMerged"`
	WriterWakeUpsFailed int64 `json:"writerWakeUpsFailed"`
	// WriterWakeUpsSkipped were not sent because a live relay covered
	// their buckets.
	WriterWakeUpsSkipped int64 `json:"writerWakeUpsSkipped"`
	// The doorbell's Kafka traffic (Config.Doorbell): the records the
	// writer produced, one per bucket rung, and the fetch answers that
	// brought a listening relay at least one ring.
	lab.DoorbellStats

	// Refused conditional writes by kind, and those after the first
	// minute (LateRefusals lists the first few).
	Refused            int            `json:"refused"`
	RefusedByKind      map[string]int `json:"refusedByKind"`
	RefusedAfterWarmup int            `json:"refusedAfterWarmup"`
	LateRefusals       []string       `json:"lateRefusals,omitempty"`

	// Latency is commit → Kafka acknowledgement; LatencyBound the target.
	Latency      Percentiles   `json:"latency"`
	LatencyBound time.Duration `json:"latencyBoundNanos"`
	// MaxOrphan is the longest a bucket with unpublished messages went
	// without a live owner (a running relay holding an unexpired lease on
	// it), with its bucket and start (from the run's start); OrphanTotal
	// sums all such time over buckets; OrphanBound is the target, one
	// invocation start (Config.StartBound).
	MaxOrphan       time.Duration `json:"maxOrphanNanos"`
	MaxOrphanBucket int           `json:"maxOrphanBucket"`
	MaxOrphanAt     time.Duration `json:"maxOrphanAtNanos"`
	OrphanTotal     time.Duration `json:"orphanTotalNanos"`
	OrphanBound     time.Duration `json:"orphanBoundNanos"`
}

// Percentiles of a latency distribution.
type Percentiles struct {
	P50 time.Duration `json:"p50Nanos"`
	P90 time.Duration `json:"p90Nanos"`
	P99 time.Duration `json:"p99Nanos"`
	Max time.Duration `json:"maxNanos"`
}

func percentiles(sorted []time.Duration) Percentiles {
	if len(sorted) == 0 {
		return Percentiles{}
	}
	at := func(q float64) time.Duration {
		i := int(q*float64(len(sorted))+0.5) - 1
		return sorted[min(max(i, 0), len(sorted)-1)]
	}
	return Percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: sorted[len(sorted)-1]}
}

// CoordinationWritesPerMessage is coordination writes per relayed message.
func (r Report) CoordinationWritesPerMessage() float64 {
	return perMessage(r.CoordinationWrites, r.Relayed)
}

// InvocationsPerMessage is relay invocations per relayed message.
func (r Report) InvocationsPerMessage() float64 {
	return perMessage(r.Invocations, r.Relayed)
}

// CoordinationReadsPerMessage is coordination reads per relayed message.
func (r Report) CoordinationReadsPerMessage() float64 {
	return perMessage(r.CoordinationReads, r.Relayed)
}

func perMessage(n, msgs int) float64 {
	if msgs == 0 {
		return 0
	}
	return float64(n) / float64(msgs)
}

// Target is one of the scenario's targets with the run's figure.
type Target struct {
	Name  string
	Value string
	Limit string
	Met   bool
}

// Targets returns the scenario's targets: cost, quiet fleet, no message waiting
// for the schedule, no orphaned bucket, and every message relayed.
func (r Report) Targets() []Target {
	return []Target{
		{"coordination writes per relayed message", fmt.Sprintf("%.4f", r.CoordinationWritesPerMessage()),
			fmt.Sprintf("≤ %.2f", MaxCoordinationWritesPerMessage), r.Relayed > 0 && r.CoordinationWritesPerMessage() <= MaxCoordinationWritesPerMessage},
		{"refused conditional writes after the first minute", fmt.Sprint(r.RefusedAfterWarmup), "0", r.RefusedAfterWarmup == 0},
		{"slowest commit → publish", fmtDur(r.Latency.Max), "≤ " + fmtDur(r.LatencyBound), r.Relayed > 0 && r.Latency.Max <= r.LatencyBound},
		{"longest pending bucket without a live owner", fmtDur(r.MaxOrphan), "≤ " + fmtDur(r.OrphanBound), r.MaxOrphan <= r.OrphanBound},
		{"messages relayed", fmt.Sprintf("%d of %d", r.Relayed, r.Committed), "all", r.Committed > 0 && r.Relayed == r.Committed},
	}
}

// Check returns an error naming every target the run missed, nil when all
// are met.
func (r Report) Check() error {
	var errs []error
	for _, t := range r.Targets() {
		if !t.Met {
			errs = append(errs, fmt.Errorf("%s: %s, want %s", t.Name, t.Value, t.Limit))
		}
	}
	if len(errs) > 0 && len(r.LateRefusals) > 0 {
		errs = append(errs, fmt.Errorf("late refusals: %s", strings.Join(r.LateRefusals, "; ")))
	}
	return errors.Join(errs...)
}

// Tables renders the report as one table of figures against their targets.
func (r Report) Tables() []lab.Table {
	return []lab.Table{{Title: r.title(), Header: []string{"figure", "value", "target"}, Rows: r.rows(), Notes: r.notes()}}
}

// title is one line describing the scenario.
func (r Report) title() string {
	wake := "a wake-up per commit"
	switch {
	case r.Config.WithoutWakeUps:
		wake = "no wake-ups"
	case r.Config.DoorbellDown:
		wake = "a wake-up and a doorbell ring per commit, every ring lost"
	case r.Config.Doorbell:
		wake = "a wake-up and a doorbell ring per commit"
	}
	return fmt.Sprintf("Steady traffic on Lambda: %g commits/s over %d buckets for %v, %s, schedule every %v, timeout %v, reserved concurrency %d, seed %d",
		r.Config.Rate, r.Config.Buckets, r.Config.Duration, wake, scheduleInterval, r.Config.RelayTimeout, r.Config.Buckets, r.Config.Seed)
}

// rows returns the figures as (figure, value, target) rows, targets marked
// "ok" or "MISSED".
func (r Report) rows() [][]string {
	rows := [][]string{}
	add := func(name, value, target string) { rows = append(rows, []string{name, value, target}) }
	targets := map[string]Target{}
	for _, t := range r.Targets() {
		targets[t.Name] = t
	}
	target := func(name string) string {
		t := targets[name]
		verdict := "ok"
		if !t.Met {
			verdict = "MISSED"
		}
		return t.Limit + " " + verdict
	}
	add("messages committed / relayed / duplicates", fmt.Sprintf("%d / %d / %d", r.Committed, r.Relayed, r.Duplicates), target("messages relayed"))
	add("coordination writes", fmt.Sprint(r.CoordinationWrites), "")
	for _, k := range []string{KindHeartbeat, KindKeep, KindClaim, KindRelease, KindRenew, KindStopped, KindPrune, KindLeaseOther} {
		if n := r.CoordinationWritesByKind[k]; n > 0 {
			add("  "+k, fmt.Sprint(n), "")
		}
	}
	add("coordination writes per relayed message", fmt.Sprintf("%.4f", r.CoordinationWritesPerMessage()), target("coordination writes per relayed message"))
	add("coordination reads", fmt.Sprint(r.CoordinationReads), "")
	for _, k := range []string{KindTrustCheck, KindRoundRead, KindStopRead, KindOwnerView, KindOtherRead} {
		if n := r.CoordinationReadsByKind[k]; n > 0 {
			add("  "+k, fmt.Sprint(n), "")
		}
	}
	add("coordination reads per relayed message", fmt.Sprintf("%.4f", r.CoordinationReadsPerMessage()), "")
	add("message requests (writes / reads) per message", fmt.Sprintf("%.2f / %.2f", perMessage(r.MessageWrites, r.Relayed), perMessage(r.MessageReads, r.Relayed)), "")
	add("DynamoDB attempts / write units / read units per message", fmt.Sprintf("%.2f / %.2f / %.2f",
		perMessage(r.Counter.TotalRequests(), r.Relayed), r.Counter.WriteUnits/float64(max(r.Relayed, 1)), r.Counter.ReadUnits/float64(max(r.Relayed, 1))), "")
	add("relay invocations", fmt.Sprintf("%d (%s)", r.Invocations, formatCounts(r.InvocationsByTrigger)), "")
	add("  outcomes", formatCounts(r.InvocationsByReason), "")
	add("wake-up invocations / exited without joining", fmt.Sprintf("%d / %d", r.WakeUpInvocations, r.WakeUpsWithoutJoining), "")
	add("writer wake-ups sent / merged / skipped / failed", fmt.Sprintf("%d / %d / %d / %d", r.WriterWakeUps, r.WriterWakeUpsMerged, r.WriterWakeUpsSkipped, r.WriterWakeUpsFailed), "")
	if r.Config.Doorbell {
		add("doorbell rings produced / fetch answers to relays", fmt.Sprintf("%d / %d", r.Rings, r.Delivered), "")
	}
	add("relay invocations per message", fmt.Sprintf("%.4f", r.InvocationsPerMessage()), "")
	add("invocations that joined / distinct relays", fmt.Sprintf("%d / %d", r.JoinedInvocations, r.JoinedRelays), "")
	add("bucket claims / handovers", fmt.Sprintf("%d / %d", r.Claims, r.Handovers), "")
	add("function time, all / joined invocations", fmt.Sprintf("%s / %s", fmtDur(r.FunctionTime), fmtDur(r.JoinedFunctionTime)), "")
	add("environments / throttled / dropped / killed", fmt.Sprintf("%d / %d / %d / %d", r.Environments, r.Throttled, r.Dropped, r.Killed), "")
	add("releases skipped / continuation wake-ups", fmt.Sprintf("%d / %d", r.ReleasesSkipped, r.Continuations), "")
	add("refused conditional writes", fmt.Sprintf("%d %s", r.Refused, formatCounts(r.RefusedByKind)), "")
	add("refused conditional writes after the first minute", fmt.Sprint(r.RefusedAfterWarmup), target("refused conditional writes after the first minute"))
	add("commit → publish p50 / p90 / p99", fmt.Sprintf("%s / %s / %s", fmtDur(r.Latency.P50), fmtDur(r.Latency.P90), fmtDur(r.Latency.P99)), "")
	add("slowest commit → publish", fmtDur(r.Latency.Max), target("slowest commit → publish"))
	orphan := fmtDur(r.MaxOrphan)
	if r.MaxOrphanBucket >= 0 {
		orphan += fmt.Sprintf(" (bucket %d at +%s)", r.MaxOrphanBucket, fmtDur(r.MaxOrphanAt))
	}
	add("longest pending bucket without a live owner", orphan, target("longest pending bucket without a live owner"))
	add("pending bucket time without a live owner, total", fmtDur(r.OrphanTotal), "")
	return rows
}

// notes are the lines printed under the table.
func (r Report) notes() []string {
	l := r.Config.Latency
	notes := []string{
		fmt.Sprintf("relay settings: poll %v, target latency %v, idle timeout %v (%v under steady traffic), lease %v renewed every %v, stop margin %v",
			r.Relay.PollInterval, r.Relay.TargetLatency, r.Relay.IdleTimeout, r.Relay.MaxIdleTimeout, r.Relay.LeaseDuration, r.Relay.LeaseRenewInterval, r.Relay.StopMargin),
		fmt.Sprintf("latencies: DynamoDB %v, Kafka %v (first init %v), Invoke %v, start %v (+%v cold)",
			l.DynamoDB, l.Kafka, l.KafkaInit, l.Invoke, l.Start, l.ColdStart),
		fmt.Sprintf("simulated %v; DynamoDB: the embedded server; Kafka: an in-memory publisher",
			r.Simulated.Round(time.Second)),
	}
	if r.Errors > 0 {
		notes = append(notes, fmt.Sprintf("%d invocations failed; last error: %s", r.Errors, r.LastError))
	}
	return notes
}

func formatCounts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.String()
}

// report assembles the Report at the end of a run.
func (s *sim) report(counts outboxlocal.Counts) Report {
	l := s.ledger
	lat := l.latencies()
	r := Report{
		Config: s.cfg, Relay: s.fn.RelayOptions(""), Counter: counts,

		Stats: s.lambda.Stats(),

		Latency:      percentiles(lat),
		LatencyBound: s.cfg.LatencyBound(s.fn.PollInterval),
		OrphanBound:  s.cfg.StartBound(),
	}
	if s.bell != nil {
		r.DoorbellStats = s.bell.Stats()
	}
	if s.notifier != nil {
		ws := s.notifier.Stats()
		r.WriterWakeUps, r.WriterWakeUpsMerged, r.WriterWakeUpsFailed, r.WriterWakeUpsSkipped = ws.Sent, ws.Merged, ws.Failed, ws.Skipped
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Committed, r.Relayed, r.Duplicates = l.committed, l.published, l.duplicates
	r.CoordinationWritesByKind, r.CoordinationReadsByKind = maps.Clone(l.coordWrites), maps.Clone(l.coordReads)
	for _, n := range l.coordWrites {
		r.CoordinationWrites += n
	}
	for _, n := range l.coordReads {
		r.CoordinationReads += n
	}
	r.MessageWrites, r.MessageReads = l.msgWrites, l.msgReads
	r.Claims, r.Handovers = l.claims, l.handovers
	r.RefusedByKind = maps.Clone(l.refused)
	for _, n := range l.refused {
		r.Refused += n
	}
	r.RefusedAfterWarmup = len(l.late)
	for _, ref := range l.late[:min(len(l.late), 5)] {
		r.LateRefusals = append(r.LateRefusals, fmt.Sprintf("%s at +%s", ref.Kind, fmtDur(ref.At.Sub(l.start))))
	}
	r.MaxOrphan, r.MaxOrphanBucket = l.maxOrphan.Length, l.maxOrphan.Bucket
	if l.maxOrphan.Bucket >= 0 {
		r.MaxOrphanAt = l.maxOrphan.From.Sub(l.start)
	}
	r.OrphanTotal = l.orphaned
	r.Simulated = l.end.Sub(l.start)
	return r
}
