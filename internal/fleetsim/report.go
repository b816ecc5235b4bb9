package fleetsim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Report holds the figures of one simulation.
type Report struct {
	Seed uint64
	// Configuration drawn from the seed.
	BucketCount                  int
	LeaseDuration, RenewInterval time.Duration
	Concurrency, Writers, Keys   int

	// Workload.
	Messages  int // logical messages
	Committed int
	Rejected  int // of cancelled business transactions
	Uncertain int // every attempt failed, at least one ambiguously
	Ops       int
	// AbandonedOps gave up after every retry failed.
	AbandonedOps int

	// Delivery.
	Records    int // records read back from Kafka
	Delivered  int // distinct message ids among them
	Duplicates int // Records - Delivered

	// Fleet.
	Invocations    int // asynchronous invokes, before coalescing
	Runs           int
	Joined         int // runs that took part in the fleet
	Environments   int
	Crashes        int
	Timeouts       int // runs killed at their deadline
	Pauses         int
	ReleaseSkipped int
	FatalRuns      int // publisher initialisation failed
	// OutsideLease counts publishes and deletes started when the relay's
	// modelled lease had lapsed (a stall between the engine's check and the
	// call): duplicates, never loss.
	OutsideLease int
	// LeaseOverlaps counts pairs of beliefs on one bucket that overlapped
	// within what the clock skew explains.
	LeaseOverlaps int

	// Refused conditional writes (Counter), by the cause that explains them.
	Refused        int
	RefusedByCause map[string]int
	// RefusedByOp splits the relays' refusals by request (observer).
	RefusedByOp map[string]int
	// BusinessRefused are the deliberate refusals of cancelled business
	// transactions, not counted in Refused.
	BusinessRefused int
	// QuietTime is the simulated time outside every cause's influence while
	// relays held leases, and QuietRounds the acquisition rounds in it.
	QuietTime   time.Duration
	QuietRounds int
	// SteadyPhases counts the complete steady phases of the write window.
	SteadyPhases int
	// Faults counts injected faults by kind; Causes counts every recorded
	// cause (faults and membership changes).
	Faults map[string]int
	Causes map[string]int
	// OrderFaults lists the order menu's faults the run drew from, and
	// FaultsHit counts what they did: late calls,
	// takeovers by relays that keep every round (mixed-skew), messages
	// re-enqueued by replays, parks whose response was lost.
	OrderFaults []OrderFault
	FaultsHit   map[string]int
	// ReadCommitted is what the embedded DynamoDB's read-committed model
	// did under FaultReadCommitted: commits held in progress, the reads
	// that met one in part (FaultsHit counts them as the fault's hits) and
	// the requests refused as conflicting with one.
	ReadCommitted outboxlocal.ReadCommittedCounts
	// Parked counts the messages the relays parked.
	Parked int
	// Doorbell counts the writers' rings and their drawn fates.
	Doorbell DoorbellCounts
	// ThinPublishes counts publishes that started with less than
	// outbox.KeepMargin of the relay's lease left on its own clock, and LeastLeaseLeft is the least such lease.
	ThinPublishes  int
	LeastLeaseLeft time.Duration

	// DynamoDB.
	Requests     int // attempts, every client of the endpoint
	RequestsByOp map[string]int
	Throttles    int

	Steps       int
	SimDuration time.Duration
	Wall        time.Duration
}

// String renders the report as the note's table rows.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d buckets, L=%v I=%v, concurrency %d, %d writers, %d keys\n",
		r.Seed, r.BucketCount, r.LeaseDuration, r.RenewInterval, r.Concurrency, r.Writers, r.Keys)
	fmt.Fprintf(&b, "  messages %d (committed %d, rejected %d, uncertain %d) in %d operations, %d abandoned\n",
		r.Messages, r.Committed, r.Rejected, r.Uncertain, r.Ops, r.AbandonedOps)
	fmt.Fprintf(&b, "  records %d, delivered %d, duplicates %d; every key's first deliveries in commit order\n", r.Records, r.Delivered, r.Duplicates)
	fmt.Fprintf(&b, "  invocations %d, runs %d (joined %d) on %d environments; crashes %d, timeouts %d, pauses %d, releases skipped %d, fatal %d\n",
		r.Invocations, r.Runs, r.Joined, r.Environments, r.Crashes, r.Timeouts, r.Pauses, r.ReleaseSkipped, r.FatalRuns)
	fmt.Fprintf(&b, "  lease overlaps within skew %d, publishes/deletes outside the lease %d, publishes with less than L − 2I left %d (least %v)\n",
		r.LeaseOverlaps, r.OutsideLease, r.ThinPublishes, r.LeastLeaseLeft.Round(time.Millisecond))
	fmt.Fprintf(&b, "  refused writes %d by cause %s; by request %s; business %d\n", r.Refused, render(r.RefusedByCause), render(r.RefusedByOp), r.BusinessRefused)
	fmt.Fprintf(&b, "  quiet windows %v with %d rounds, 0 refusals\n", r.QuietTime.Round(time.Second), r.QuietRounds)
	fmt.Fprintf(&b, "  faults %s\n", render(r.Faults))
	fmt.Fprintf(&b, "  order faults %v: hit %s; parked %d\n", r.OrderFaults, render(r.FaultsHit), r.Parked)
	if rc := r.ReadCommitted; rc.Commits > 0 {
		fmt.Fprintf(&b, "  read-committed commits %d: reads that met one in part %d (of them counts %d), requests refused as conflicting %d\n",
			rc.Commits, rc.PartialReads, rc.PartialCounts, rc.Conflicts)
	}
	fmt.Fprintf(&b, "  doorbell rings %d: lost %d, late %d, repeated %d; fetch answers %d\n",
		r.Doorbell.Rings, r.Doorbell.Lost, r.Doorbell.Late, r.Doorbell.Repeated, r.Doorbell.Delivered)
	fmt.Fprintf(&b, "  causes %s\n", render(r.Causes))
	fmt.Fprintf(&b, "  DynamoDB attempts %d, throttled %d; %d steps, simulated %v, wall %v",
		r.Requests, r.Throttles, r.Steps, r.SimDuration.Round(time.Second), r.Wall.Round(time.Millisecond))
	return b.String()
}

func render(m map[string]int) string {
	if len(m) == 0 {
		return "{}"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// Violation is a broken invariant, with what it takes to replay and
// understand it.
type Violation struct {
	Seed      uint64
	Invariant string
	Detail    string
	// At is the simulated time of detection.
	At time.Duration
	// Trace is the excerpt of the events concerning the violation.
	Trace []string
	// TraceFile holds every event of the run, when it could be written.
	TraceFile string

	relays   []string
	bucket   int
	duration time.Duration
}

// violation returns the violation of invariant on bucket (-1: none)
// that format and args describe; run sets its time.
func violation(invariant string, bucket int, format string, args ...any) *Violation {
	return &Violation{Invariant: invariant, bucket: bucket, Detail: fmt.Sprintf(format, args...)}
}

// Error implements error: the seed, the invariant, a replay command and
// the trace excerpt.
func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet simulation seed %d: %s violated at T+%.3fs: %s\n", v.Seed, v.Invariant, v.At.Seconds(), v.Detail)
	fmt.Fprintf(&b, "replay: make soak SEED=%d DURATION=%v (or go test -run 'TestFleet/seed=%d' -v ./internal/fleetsim/ for a CI seed)\n", v.Seed, v.duration, v.Seed)
	if v.TraceFile != "" {
		fmt.Fprintf(&b, "full trace: %s\n", v.TraceFile)
	}
	if len(v.Trace) > 0 {
		fmt.Fprintf(&b, "events concerning it (%d):\n", len(v.Trace))
		for _, l := range v.Trace {
			b.WriteString("  ")
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// RefusalBound is the most refused writes one cause may explain: every
// relay that can be alive at once (the function's concurrency and the
// steady phase's hold relays) losing a race for every bucket twice, plus
// one refused heartbeat per round of the cause's influence (a host clock
// set back refuses its heartbeat every round until it caught up).
func (r *Report) RefusalBound() int {
	rounds := int((r.LeaseDuration+2*r.RenewInterval)/r.RenewInterval) + 1
	return 2*r.BucketCount*(r.Concurrency+maxHolds) + rounds
}

// RefusalBoundExceeded reports a cause kind whose refused writes exceed
// RefusalBound per recorded cause, or "".
func (r *Report) RefusalBoundExceeded() string {
	for kind, n := range r.RefusedByCause {
		if limit := r.Causes[kind] * r.RefusalBound(); n > limit {
			return fmt.Sprintf("%d refused writes explained by %d %s causes, more than %d each", n, r.Causes[kind], kind, r.RefusalBound())
		}
	}
	return ""
}
