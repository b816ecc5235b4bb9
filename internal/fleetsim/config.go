package fleetsim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// Config parameterises one simulation. NewConfig derives everything not
// given here from the seed.
type Config struct {
	// Seed fixes the workload and the fault schedule.
	Seed uint64
	// Messages is the number of logical messages the writers enqueue
	// (committed ones and those of cancelled business transactions).
	// Default 3,334.
	Messages int
	// WriteDuration is the simulated time over which the writers enqueue;
	// relays then drain. Default 6 minutes.
	WriteDuration time.Duration
	// OrderFaults adds faults of the order menu (issue 24) to the base
	// menu, each drawn from the seed like the others.
	// Default defaultOrderFaults (NewConfig).
	OrderFaults []OrderFault
	// WallLimit bounds the wall time of the whole run (a timer outside the
	// bubble, which the driver looks at each step); zero means no bound.
	// Default 10 minutes.
	WallLimit time.Duration
	// TraceFile, when set, receives the whole event trace at the end of the
	// run. A failed run writes it in any case, by default to a file named
	// after the seed in os.TempDir().
	TraceFile string
	// Logf receives progress lines; nil logs nothing.
	Logf func(format string, args ...any)

	// Derived from the seed by NewConfig; tests may override them.
	BucketCount   int
	LeaseDuration time.Duration
	RenewInterval time.Duration
	// Concurrency is the relay function's reserved concurrency: the most
	// execution environments alive at once.
	Concurrency int
	// Writers is the number of writer processes; each key belongs to one.
	Writers int
	// Keys is the number of distinct record keys.
	Keys int
}

// Defaults of NewConfig: the CI run is three seeds of ciMessages over
// ciWriteDuration each, and SoakConfig keeps the same message rate.
const (
	ciMessages      = 3334
	ciWriteDuration = 6 * time.Minute
)

// SoakConfig returns the configuration of a long run: seed's draws, writes
// over d of simulated time at the CI run's message rate (about 9.3 per
// second), and no wall-clock bound. A d of six minutes is the CI run of
// seed.
func SoakConfig(seed uint64, d time.Duration) Config {
	c := NewConfig(seed)
	c.WriteDuration = d
	c.Messages = max(1, int(float64(ciMessages)*d.Seconds()/ciWriteDuration.Seconds()+0.5))
	c.WallLimit = 0
	return c
}

// NewConfig returns the configuration of seed with every default filled.
func NewConfig(seed uint64) Config {
	r := newRand(seed, "config")
	c := Config{
		Seed:          seed,
		Messages:      ciMessages,
		WriteDuration: ciWriteDuration,
		OrderFaults:   defaultOrderFaults,
		WallLimit:     10 * time.Minute,
		BucketCount:   []int{4, 8, 8, 12}[r.IntN(4)],
		Concurrency:   3 + r.IntN(4),
		Writers:       3 + r.IntN(3),
		Keys:          40 + r.IntN(60),
	}
	if r.IntN(2) == 0 {
		c.LeaseDuration, c.RenewInterval = 20*time.Second, 5*time.Second
	} else {
		c.LeaseDuration, c.RenewInterval = 30*time.Second, 10*time.Second
	}
	return c
}

// OrderFault is a fault of the order menu: each drives a path on which a
// key's first deliveries could leave commit order.
type OrderFault string

// The order menu.
const (
	// FaultLateRound: a relay's fetch, bucket probe or backlog sample
	// returns late, past the renew interval, once or twice in a row.
	FaultLateRound OrderFault = "late-round"
	// FaultMixedSkew: two long-running relays join the fleet for a
	// while, one of Spillway's and one that keeps every lease every
	// round, as relays of other languages do, its clock ahead by between
	// the two skew limits of outbox.KeepMargin (rounds that keep ahead,
	// rounds that keep every lease).
	FaultMixedSkew OrderFault = "mixed-skew"
	// FaultQuarantineReplay: relays quarantine poison messages (a
	// partition refuses a key's record until its head row is parked) and
	// an operator replays every parked message while the writers go on.
	FaultQuarantineReplay OrderFault = "quarantine-replay"
	// FaultParkLost: as FaultQuarantineReplay, and the park transaction is
	// applied but its response lost, its retries throttled.
	FaultParkLost OrderFault = "park-lost"
	// FaultParkLate: as FaultQuarantineReplay, and the park of the
	// refused head row is held in the network, its relay's renewals
	// throttled, until another relay that claimed the bucket read its
	// parked partition (at most three leases): a park that lands after
	// the lease passed on.
	FaultParkLate OrderFault = "park-late"
	// FaultParkSlow: as FaultQuarantineReplay, and for a while every park
	// takes 7 s (throttled transactions retried), so a loop of parks
	// behind a held-back key outlasts the lease.
	FaultParkSlow OrderFault = "park-slow"
	// FaultReadCommitted: the embedded DynamoDB commits each transaction
	// over up to readCommitMax, its new items visible one at a time
	// (outboxlocal.ReadCommitted, drawn from the seed), as DynamoDB's
	// read-committed queries let a reader see it: a fetch, a count probe or
	// a snapshot that overlaps a commit sees part of it, and a write or a
	// snapshot naming one of its items conflicts (issue 44).
	FaultReadCommitted OrderFault = "read-committed"
	// FaultBlockHolds: with FaultQuarantineReplay, the steady phases' hold
	// relays run under PoisonBlock while the relay function quarantines:
	// a fleet switched back to block, or a drain from a shell without the
	// policy, meets held-back keys with later messages pending and
	// marked replays (issue 39).
	FaultBlockHolds OrderFault = "block-holds"
)

// AllOrderFaults is the whole order menu.
var AllOrderFaults = []OrderFault{FaultLateRound, FaultMixedSkew, FaultQuarantineReplay, FaultParkLost, FaultBlockHolds, FaultReadCommitted, FaultParkLate, FaultParkSlow}

// defaultOrderFaults are the order faults of NewConfig, and so of the CI
// seeds: each broke a key's order before the publisher, quarantine, lease,
// poison-policy and fetch fixes. ORDER_FAULTS=all adds the lease faults of
// the lease keeper (park-late, park-slow), which fail seed 11 on the relay
// without it.
var defaultOrderFaults = []OrderFault{FaultLateRound, FaultMixedSkew, FaultQuarantineReplay, FaultParkLost, FaultBlockHolds, FaultReadCommitted}

// readCommitMax bounds a commit under FaultReadCommitted: DynamoDB answers
// a transaction in tens of milliseconds; the slow tail makes a relay's
// fetch, which comes every target latency on a busy bucket, meet commits
// in progress.
const readCommitMax = 250 * time.Millisecond

// has reports whether c injects the order fault f.
func (c Config) has(f OrderFault) bool { return slices.Contains(c.OrderFaults, f) }

// quarantine reports whether the relays run with PoisonQuarantine.
func (c Config) quarantine() bool {
	return c.has(FaultQuarantineReplay) || c.has(FaultParkLost) || c.has(FaultParkLate) || c.has(FaultParkSlow)
}

func (c Config) validate() error {
	for _, f := range c.OrderFaults {
		if !slices.Contains(AllOrderFaults, f) {
			return fmt.Errorf("fleetsim: unknown order fault %q (known: %v)", f, AllOrderFaults)
		}
	}
	switch {
	case c.has(FaultBlockHolds) && !c.quarantine():
		return fmt.Errorf("fleetsim: order fault %q needs %q or %q: without parked messages it tests nothing", FaultBlockHolds, FaultQuarantineReplay, FaultParkLost)
	case c.Messages < 1:
		return fmt.Errorf("fleetsim: Messages %d < 1", c.Messages)
	case c.WriteDuration < time.Minute:
		return fmt.Errorf("fleetsim: WriteDuration %v shorter than a minute", c.WriteDuration)
	case c.BucketCount < 1 || c.Concurrency < 1 || c.Writers < 1 || c.Keys < c.Writers:
		return fmt.Errorf("fleetsim: invalid sizes in %+v", c)
	case c.RenewInterval <= 0 || c.RenewInterval >= c.LeaseDuration:
		return fmt.Errorf("fleetsim: RenewInterval %v must be in (0, LeaseDuration %v)", c.RenewInterval, c.LeaseDuration)
	}
	return nil
}

// settle is how long a cause (fault or membership change) can still explain
// a refused write after it ended: a crashed relay's leases and heartbeat
// lapse after L on its own clock, which a peer whose clock is behind by up
// to half the tolerated skew reads that much later (a relay whose clock
// ran ahead adds its own skew: cause.linger), and the fleet agrees again
// within two rounds after that.
func (c Config) settle() time.Duration {
	return c.LeaseDuration + c.tolerableSkew()/2 + 2*c.RenewInterval
}

// tolerableSkew is the largest difference between two hosts' clocks the
// fleet tolerates without disagreement: the least a lease has left, on its
// holder's clock, at a round on schedule, less a second of margin: the
// lease a round leaves unrenewed (lease.KeepAhead) is down to
// lease.KeepMargin at the next round, or, kept every round, to that
// function's every-round value (the heartbeat, written every round, always
// has the latter left).
func (c Config) tolerableSkew() time.Duration {
	left := c.LeaseDuration - c.RenewInterval
	if ahead := lease.KeepAhead(c.LeaseDuration, c.RenewInterval); ahead > 0 {
		for left >= ahead {
			left -= c.RenewInterval
		}
	}
	return left - time.Second
}

// mixedSkewLimit is the clock skew between a relay that keeps every round
// and the others that the mixed-fleet check holds the fleet to: the skew
// limit relays of other languages are promised (outbox.KeepMargin when
// every round keeps every lease), less a quarter interval for the
// jitter of the rounds.
func (c Config) mixedSkewLimit() time.Duration {
	return c.LeaseDuration - c.RenewInterval - c.RenewInterval/4
}

// newRand returns a generator for one named stream of the seed, so adding
// draws to one stream does not shift another.
func newRand(seed uint64, stream string, n ...uint64) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(stream))
	s := h.Sum64()
	for _, x := range n {
		s = s*0x100000001b3 ^ x
	}
	return rand.New(rand.NewPCG(seed, s))
}

// uniform returns a duration uniformly drawn from [lo, hi).
func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}
