package scale

import (
	"cmp"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// Defaults of Config.
const (
	DefaultBuckets      = 64
	DefaultRelays       = 16
	DefaultSteadyRounds = 6
	DefaultSeed         = 1
	// relayIDPrefix is the function-name part of the relay ids, as
	// outboxlambda.NewRelayID builds them (name, '-', 16 hex digits): the
	// ids' length sets the size of heartbeat and lease items.
	relayIDPrefix = "spillway-relay"
	// maxStartRounds bounds the rounds a start may take to settle; a fleet
	// still moving leases after that many is reported as not converged.
	maxStartRounds = 20
)

// Backend selects what answers the relays' DynamoDB requests.
type Backend string

// Backends.
const (
	// Embedded is the embedded DynamoDB server (outboxlocal) with its
	// Counter: the reference.
	Embedded Backend = "embedded"
	// Model is the in-memory coordination partition (model.go): the same
	// requests, conditions and capacity rules without HTTP, JSON and
	// minidyn, validated against Embedded by the package's tests.
	Model Backend = "model"
)

// Config describes one run: a fleet of relays in hold mode (every relay
// stays up and runs one acquisition round per LeaseRenewInterval) starting
// together on an empty table.
type Config struct {
	// Buckets is the bucket count. Default 64.
	Buckets int `json:"buckets"`
	// Relays is the fleet size. Default 16.
	Relays int `json:"relays"`
	// LeaseDuration and LeaseRenewInterval are the relays' lease timings.
	// Default the relay's (30 s and 10 s).
	LeaseDuration      time.Duration `json:"leaseDurationNanos"`
	LeaseRenewInterval time.Duration `json:"leaseRenewIntervalNanos"`
	// SteadyRounds is how many renew intervals are measured after the
	// fleet settled. Default 6.
	SteadyRounds int `json:"steadyRounds"`
	// SeedRelays is how many of the relays read the whole partition every
	// round, as the seed's relays (and relays in other languages) do: they
	// do not carry the settled-fleet state from round to round. Relays
	// gives every relay the seed's reads; the default 0 none.
	SeedRelays int `json:"seedRelays"`
	// Commits is a burst's commit count (RunBurst only). Default
	// DefaultBurstCommits.
	Commits int `json:"commits,omitempty"`
	// Backend answers the requests. Default Model.
	Backend Backend `json:"backend"`
	// Seed fixes the relay ids and the relays' start times. Default 1.
	Seed uint64 `json:"seed"`
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Buckets = cmp.Or(c.Buckets, DefaultBuckets)
	c.Relays = cmp.Or(c.Relays, DefaultRelays)
	c.LeaseDuration = cmp.Or(c.LeaseDuration, outbox.DefaultLeaseDuration)
	c.LeaseRenewInterval = cmp.Or(c.LeaseRenewInterval, outbox.DefaultLeaseRenewInterval)
	c.SteadyRounds = cmp.Or(c.SteadyRounds, DefaultSteadyRounds)
	c.Backend = cmp.Or(c.Backend, Model)
	c.Seed = cmp.Or(c.Seed, DefaultSeed)
	return c
}

// Validate reports the first unusable field; call WithDefaults first to
// accept zero fields.
func (c Config) Validate() error {
	const op = "validate scale config"
	switch {
	case c.Buckets < 1:
		return outbox.Misconfigured(op, "Buckets must be >= 1, got %d", c.Buckets)
	case c.Relays < 1:
		return outbox.Misconfigured(op, "Relays must be >= 1, got %d", c.Relays)
	case c.LeaseRenewInterval < time.Second || c.LeaseRenewInterval >= c.LeaseDuration || c.LeaseRenewInterval%time.Second != 0:
		return outbox.Misconfigured(op, "LeaseRenewInterval must be whole seconds, at least 1s and below LeaseDuration %v, got %v", c.LeaseDuration, c.LeaseRenewInterval)
	case c.Commits < 0:
		return outbox.Misconfigured(op, "Commits must be >= 0, got %d", c.Commits)
	case c.SeedRelays < 0 || c.SeedRelays > c.Relays:
		return outbox.Misconfigured(op, "SeedRelays must be within [0, Relays], got %d", c.SeedRelays)
	case c.SteadyRounds < 1:
		return outbox.Misconfigured(op, "SteadyRounds must be >= 1, got %d", c.SteadyRounds)
	case c.Backend != Embedded && c.Backend != Model:
		return outbox.Misconfigured(op, "Backend must be %q or %q, got %q", Embedded, Model, c.Backend)
	}
	return nil
}
