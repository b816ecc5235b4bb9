package scale

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxmem"
)

// Defaults of a burst's Config (RunBurst): the burst.
const (
	DefaultBurstBuckets = 1024
	DefaultBurstRelays  = 128
	DefaultBurstCommits = 1000
)

// The burst's fixed settings: the commits' window, and round trips typical
// of a Lambda function in the table's region. ddbLatency is one DynamoDB
// round trip; lease writes and prunes take ddbLatency / storeParallel
// each, as a store sends storeParallel at once. startLatency is from a
// wake-up being sent to its invocation starting in a warm execution
// environment; a new environment adds coldStart. publisherInit is the
// Kafka client's first initialisation in an environment, between the
// trust check and the second look; a warm environment's is instant, as
// publishing is. The relays poll and idle with the relay's defaults.
const (
	burstWindow   = time.Second
	ddbLatency    = 5 * time.Millisecond
	startLatency  = 65 * time.Millisecond // the Invoke call 15 ms, Lambda's queue 50 ms
	coldStart     = 250 * time.Millisecond
	publisherInit = 100 * time.Millisecond
	storeParallel = 8 // outboxddb's default MaxConcurrency
	// burstRunLimit bounds the simulated time a burst may take to scale
	// back in.
	burstRunLimit = time.Hour
	// burstTimeout is the relay function's timeout, Lambda's longest: a
	// burst's invocations end long before it.
	burstTimeout = 15 * time.Minute
)

// burst is the state of one burst run. Its participants are goroutines of
// the bubble (invocations) and functions the simulation's driver runs
// (commits, the schedule), so mu guards the state they share.
type burst struct {
	cfg   Config
	start time.Time
	be    backend
	fnCfg outboxlambda.Config
	fn    *lambdasim.Function[*lab.RelayEnv]
	sim   *lab.Sim
	// scaledIn is set by the schedule once nothing is pending and the
	// function has no event left: the run is over. The schedule and the
	// driver's step both run on the simulation's driver.
	scaledIn bool

	mu sync.Mutex
	// rng draws the commits and the schedule's phase, then the relay ids
	// in the order the emulator creates environments (under its lock).
	rng *rand.Rand
	rep BurstReport
	// messages holds the unpublished commits: the relays' outbox, outside
	// the coordination partition, in memory and not charged.
	messages  *outboxmem.Store
	committed int
	owners    []string // holder per bucket after its latest round
	ownedAll  bool
	units     units // since the first commit
}
