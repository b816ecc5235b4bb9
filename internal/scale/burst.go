package scale

import (
	"cmp"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// Defaults of BurstConfig: the burst, and round trips typical of a
// Lambda function in the table's region.
const (
	DefaultBurstBuckets  = 1024
	DefaultBurstRelays   = 128
	DefaultBurstCommits  = 1000
	DefaultBurstWindow   = time.Second
	DefaultLatency       = 5 * time.Millisecond
	DefaultStartLatency  = 65 * time.Millisecond // the Invoke call 15 ms, Lambda's queue 50 ms
	DefaultColdStart     = 250 * time.Millisecond
	DefaultPublisherInit = 100 * time.Millisecond
	DefaultStoreParallel = 8 // outboxddb's default MaxConcurrency
	// burstRunLimit bounds the simulated time a burst may take to scale
	// back in.
	burstRunLimit = time.Hour
	// burstTimeout is the relay function's timeout, Lambda's longest: a
	// burst's invocations end long before it.
	burstTimeout = 15 * time.Minute
)

// BurstConfig describes a burst: Commits commits at seeded instants within
// Window over Buckets buckets, each sending a wake-up to the relay function
// on the Lambda emulator (internal/lambdasim), which starts an invocation
// while fewer than Relays run (the function's reserved concurrency); each
// invocation runs the real relay handler in drain mode, until the fleet
// has scaled back to nothing.
type BurstConfig struct {
	Buckets int           `json:"buckets"`
	Relays  int           `json:"relays"`
	Commits int           `json:"commits"`
	Window  time.Duration `json:"windowNanos"`
	// Lease and relay timings; zero takes the relay's defaults.
	LeaseDuration      time.Duration `json:"leaseDurationNanos"`
	LeaseRenewInterval time.Duration `json:"leaseRenewIntervalNanos"`
	PollInterval       time.Duration `json:"pollIntervalNanos"`
	IdleTimeout        time.Duration `json:"idleTimeoutNanos"`
	// Latency is one DynamoDB round trip; lease writes and prunes take
	// Latency / StoreParallel each, as a store sends StoreParallel at once.
	Latency       time.Duration `json:"latencyNanos"`
	StoreParallel int           `json:"storeParallel"`
	// StartLatency is from a wake-up being sent to its invocation
	// starting in a warm execution environment; a new environment adds
	// ColdStart. PublisherInit is the Kafka client's first initialisation
	// in an environment, between the trust check and the second look; a
	// warm environment's is instant, as publishing is.
	StartLatency  time.Duration `json:"startLatencyNanos"`
	ColdStart     time.Duration `json:"coldStartNanos"`
	PublisherInit time.Duration `json:"publisherInitNanos"`
	Backend       Backend       `json:"backend"`
	Seed          uint64        `json:"seed"`
	RelayIDPrefix string        `json:"relayIdPrefix"`
}

// WithDefaults returns c with every zero field set to its default.
func (c BurstConfig) WithDefaults() BurstConfig {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.Buckets, DefaultBurstBuckets)
	set(&c.Relays, DefaultBurstRelays)
	set(&c.Commits, DefaultBurstCommits)
	set(&c.StoreParallel, DefaultStoreParallel)
	setDur(&c.Window, DefaultBurstWindow)
	setDur(&c.LeaseDuration, outbox.DefaultLeaseDuration)
	setDur(&c.LeaseRenewInterval, outbox.DefaultLeaseRenewInterval)
	setDur(&c.PollInterval, outbox.DefaultPollInterval)
	setDur(&c.IdleTimeout, outbox.DefaultIdleTimeout)
	setDur(&c.Latency, DefaultLatency)
	setDur(&c.StartLatency, DefaultStartLatency)
	setDur(&c.ColdStart, DefaultColdStart)
	setDur(&c.PublisherInit, DefaultPublisherInit)
	c.Backend = cmp.Or(c.Backend, Model)
	c.Seed = cmp.Or(c.Seed, DefaultSeed)
	c.RelayIDPrefix = cmp.Or(c.RelayIDPrefix, DefaultRelayIDPrefix)
	return c
}

// Validate reports the first unusable field; call WithDefaults first.
func (c BurstConfig) Validate() error {
	const op = "validate burst config"
	switch {
	case c.Buckets < 1 || c.Relays < 1 || c.Commits < 1 || c.StoreParallel < 1:
		return outbox.Misconfigured(op, "Buckets, Relays, Commits and StoreParallel must be >= 1, got %d, %d, %d, %d", c.Buckets, c.Relays, c.Commits, c.StoreParallel)
	case c.Window <= 0 || c.Latency <= 0 || c.StartLatency < 0 || c.ColdStart < 0 || c.PublisherInit < 0:
		return outbox.Misconfigured(op, "Window and Latency must be > 0, StartLatency, ColdStart and PublisherInit >= 0")
	case c.LeaseRenewInterval >= c.LeaseDuration || c.PollInterval <= 0 || c.IdleTimeout <= 0:
		return outbox.Misconfigured(op, "LeaseRenewInterval must be below LeaseDuration; PollInterval and IdleTimeout > 0")
	case c.Backend != Embedded && c.Backend != Model:
		return outbox.Misconfigured(op, "Backend must be %q or %q, got %q", Embedded, Model, c.Backend)
	}
	return nil
}

// burst is the state of one burst run. Its participants are goroutines of
// the bubble (commits, the schedule, invocations), so mu guards the state
// they share.
type burst struct {
	cfg   BurstConfig
	start time.Time
	be    backend
	fnCfg outboxlambda.Config
	fn    *lambdasim.Function[*lab.RelayEnv]
	sim   *lab.Sim

	mu sync.Mutex
	// rng draws the commits and the schedule's phase, then the relay ids
	// in the order the emulator creates environments (under its lock).
	rng *rand.Rand
	rep BurstReport
	// messages holds each bucket's unpublished commits in commit order:
	// the relays' outbox, outside the coordination partition.
	messages  [][]outbox.Message
	committed int
	owners    []string // holder per bucket after its latest round
	ownedAll  bool
	units     units // since the first commit
}
