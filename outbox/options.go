package outbox

import (
	"time"
)

// Defaults shared by writers, stores and relays. Every writer and relay of one
// table must agree on DefaultBucketCount's replacement if they change it.
const (
	DefaultBucketCount         = 8
	DefaultBatchSize           = 500
	DefaultPollInterval        = time.Second
	DefaultTargetLatency       = 225 * time.Millisecond
	DefaultErrorBackoff        = time.Second
	DefaultLeaseDuration       = 30 * time.Second
	DefaultLeaseRenewInterval  = 10 * time.Second
	DefaultMessageIDHeaderName = "x-outbox-message-id"
	DefaultStopMargin          = 5 * time.Second
	DefaultIdleTimeout         = 2 * time.Second
	DefaultMetricsName         = "outbox"
	DefaultBacklogInterval     = 30 * time.Second
	// DefaultMaxIdleTimeoutFactor gives MaxIdleTimeout's default as a
	// multiple of IdleTimeout: 10 s at the default 2 s.
	DefaultMaxIdleTimeoutFactor = 5
	// DefaultPoisonMaxAttempts is how many failed attempts park a message
	// under PoisonQuarantine when the failure itself looks retriable.
	DefaultPoisonMaxAttempts = 10
	// MaxRelayIDLength bounds a relay id in bytes; it is embedded verbatim
	// in the heartbeat's sort key.
	MaxRelayIDLength = 128
)

// ValidateRelayID checks that id is non-empty printable ASCII of at most
// MaxRelayIDLength bytes. ASCII keeps the ordinal order every relay
// implementation sorts by identical across languages.
func ValidateRelayID(id string) error {
	if id == "" {
		return Misconfigured("validate relay id", "relay id is empty")
	}
	if len(id) > MaxRelayIDLength {
		return Misconfigured("validate relay id", "relay id is %d bytes, at most %d allowed", len(id), MaxRelayIDLength)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return Misconfigured("validate relay id", "relay id %q has byte 0x%02x at %d; use printable ASCII without spaces", id, c, i)
		}
	}
	return nil
}

func positive(op, name string, d time.Duration) error {
	if d <= 0 {
		return Misconfigured(op, "%s must be > 0, got %v", name, d)
	}
	return nil
}

func atLeastOne(op, name string, n int) error {
	if n < 1 {
		return Misconfigured(op, "%s must be >= 1, got %d", name, n)
	}
	return nil
}

// Mode says when a relay stops.
type Mode string

// Relay exit modes.
const (
	// ModeDrain stops once every owned bucket is empty, no free bucket has
	// pending messages and the idle timeout has passed, or at the budget.
	ModeDrain Mode = "drain"
	// ModeHold keeps polling until the budget.
	ModeHold Mode = "hold"
)

// RelayOptions configure a relay. The zero value of a field means its
// default; WithDefaults fills them and Validate checks the result.
type RelayOptions struct {
	// RelayID identifies the relay in leases and heartbeats (required):
	// printable ASCII, at most 128 bytes, never shared by two live relays.
	RelayID string
	// BucketCount must equal the store's and the writers' count. Default 8.
	BucketCount int
	// BatchSize bounds the messages fetched and published per bucket per
	// round trip. Default 500.
	BatchSize int
	// PollInterval is how often owned buckets are probed for work when no
	// wake-up arrives. Default 1 s.
	PollInterval time.Duration
	// TargetLatency is how long a message committed to a busy bucket the
	// relay holds may wait before the relay looks for it: a bucket that
	// had work within the last 10 s is probed every TargetLatency instead
	// of every PollInterval, with the same eventually consistent head read
	// (0.5 read units). Only a probe's timing changes: what it finds is
	// fetched, published and deleted as at the poll, so leases and per-key
	// order do not depend on it. At or above PollInterval it changes
	// nothing (the cheapest bill: one probe per owned bucket per poll).
	// Default DefaultTargetLatency.
	TargetLatency time.Duration
	// ErrorBackoff is the base of the failure backoff. Default 1 s.
	ErrorBackoff time.Duration
	// LeaseDuration is how long a claimed lease lasts. Default 30 s.
	LeaseDuration time.Duration
	// LeaseRenewInterval is the acquisition (renew and rebalance) cadence;
	// strictly less than LeaseDuration. Default 10 s.
	LeaseRenewInterval time.Duration
	// MessageIDHeaderName is the dedup header stamped on every record.
	// Default "x-outbox-message-id".
	MessageIDHeaderName string
	// Mode says when Run returns before its budget. Default ModeDrain.
	Mode Mode
	// IdleTimeout is how long a drain-mode relay lingers with nothing to do
	// before it stops. Default 2 s.
	IdleTimeout time.Duration
	// MaxIdleTimeout is how long a drain-mode relay lingers instead of
	// IdleTimeout while its recent traffic is steady: when its last 8 polls
	// that found work (across the runs of one relay) came at most a quarter
	// of MaxIdleTimeout apart on average. Such a relay would otherwise stop
	// and restart between messages. At least IdleTimeout; equal to it turns
	// the adaptation off. Default DefaultMaxIdleTimeoutFactor × IdleTimeout
	// (10 s).
	MaxIdleTimeout time.Duration
	// StopMargin is reserved before the deadline for the stop: settling
	// what is in flight, deleting and releasing (Run); it never exceeds a
	// third of the time left at start. It is also the default
	// RunInput.StopTimeout, the stop that the end of Run's context starts.
	// Default 5 s.
	StopMargin time.Duration
	// MaxConcurrency bounds buckets drained in parallel. Default 8.
	MaxConcurrency int
	// MaxHeldBytes bounds the messages the relay holds at once (fetched,
	// being published or deleted), summed over its buckets, as heldSize
	// counts them, with the Query page each fetch is decoding: before each
	// fetch a bucket reserves room for a batch of MaxMessageBytes messages
	// and a page (fewer messages when room is short, waiting when none is
	// left) and gives back what the batch does not use. 0 means no bound
	// (the default); MemoryBudgetFor derives it from the memory available.
	MaxHeldBytes int64
	// MaxMessageBytes is the largest message the store can return, the room
	// reserved per message before a fetch. Default 400 KiB, the largest DynamoDB item.
	MaxMessageBytes int64
	// BacklogInterval is how often the holder of bucket 0 samples the
	// backlog for the PendingMessages and OldestPendingAge metrics; only
	// that relay samples, so the fleet pays for one sample per interval.
	// Default 30 s; negative disables sampling.
	BacklogInterval time.Duration
	// PoisonPolicy says what happens to a message Kafka will not take:
	// PoisonBlock (default) retries it while its bucket waits;
	// PoisonQuarantine parks it and its key's later messages. Quarantine
	// needs a Store that implements Quarantine.
	PoisonPolicy PoisonPolicy
	// PoisonMaxAttempts is how many failed attempts park a message under
	// PoisonQuarantine when its failure looks retriable. Default 10.
	PoisonMaxAttempts int
	// KeepEveryRound makes the relay keep every owned lease in every round
	// and leave its heartbeat without the keep-ahead mark, as relays of
	// other languages sharing the table do: its leases then keep the
	// KeepMargin of such rounds ahead (20 s by default), and peers that keep
	// ahead keep every round too while it is around (lease.RelayState.KeepsAhead).
	// It costs a keep per owned lease per round (twice the coordination
	// writes of the default); it exists to run such a fleet's rules, in
	// tests and simulations, with Spillway relays. Default false: rounds
	// leave a lease that still lasts lease.KeepAhead unrenewed.
	KeepEveryRound bool
}

// WithDefaults returns o with every zero field set to its default.
func (o RelayOptions) WithDefaults() RelayOptions {
	setInt(&o.BucketCount, DefaultBucketCount)
	setInt(&o.BatchSize, DefaultBatchSize)
	setInt(&o.MaxConcurrency, 8)
	setDur(&o.PollInterval, DefaultPollInterval)
	setDur(&o.TargetLatency, DefaultTargetLatency)
	setDur(&o.ErrorBackoff, DefaultErrorBackoff)
	setDur(&o.LeaseDuration, DefaultLeaseDuration)
	setDur(&o.LeaseRenewInterval, DefaultLeaseRenewInterval)
	setDur(&o.IdleTimeout, DefaultIdleTimeout)
	setDur(&o.MaxIdleTimeout, DefaultMaxIdleTimeoutFactor*o.IdleTimeout)
	setDur(&o.StopMargin, DefaultStopMargin)
	setDur(&o.BacklogInterval, DefaultBacklogInterval)
	setInt(&o.PoisonMaxAttempts, DefaultPoisonMaxAttempts)
	if o.PoisonPolicy == "" {
		o.PoisonPolicy = PoisonBlock
	}
	if o.MessageIDHeaderName == "" {
		o.MessageIDHeaderName = DefaultMessageIDHeaderName
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = defaultMaxMessageBytes
	}
	if o.Mode == "" {
		o.Mode = ModeDrain
	}
	return o
}

// Validate reports the first invalid field as a misconfiguration.
func (o RelayOptions) Validate() error {
	const op = "validate relay options"
	if err := ValidateRelayID(o.RelayID); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"BucketCount", o.BucketCount}, {"BatchSize", o.BatchSize}, {"MaxConcurrency", o.MaxConcurrency}, {"PoisonMaxAttempts", o.PoisonMaxAttempts}} {
		if err := atLeastOne(op, c.name, c.n); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"PollInterval", o.PollInterval}, {"TargetLatency", o.TargetLatency}, {"ErrorBackoff", o.ErrorBackoff}, {"LeaseDuration", o.LeaseDuration},
		{"LeaseRenewInterval", o.LeaseRenewInterval}, {"IdleTimeout", o.IdleTimeout}, {"StopMargin", o.StopMargin}} {
		if err := positive(op, c.name, c.d); err != nil {
			return err
		}
	}
	if o.MaxIdleTimeout < o.IdleTimeout {
		return Misconfigured(op, "MaxIdleTimeout (%v) must be at least IdleTimeout (%v)", o.MaxIdleTimeout, o.IdleTimeout)
	}
	if o.MaxHeldBytes < 0 || o.MaxMessageBytes < 1 {
		return Misconfigured(op, "MaxHeldBytes (%d) must be >= 0 and MaxMessageBytes (%d) >= 1", o.MaxHeldBytes, o.MaxMessageBytes)
	}
	if o.LeaseRenewInterval >= o.LeaseDuration {
		return Misconfigured(op, "LeaseRenewInterval (%v) must be strictly less than LeaseDuration (%v)", o.LeaseRenewInterval, o.LeaseDuration)
	}
	if o.MessageIDHeaderName == "" {
		return Misconfigured(op, "MessageIDHeaderName is empty")
	}
	if o.PoisonPolicy != PoisonBlock && o.PoisonPolicy != PoisonQuarantine {
		return Misconfigured(op, "PoisonPolicy %q is neither %q nor %q", o.PoisonPolicy, PoisonBlock, PoisonQuarantine)
	}
	if o.Mode != ModeDrain && o.Mode != ModeHold {
		return Misconfigured(op, "Mode %q is neither %q nor %q", o.Mode, ModeDrain, ModeHold)
	}
	return nil
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setDur(p *time.Duration, v time.Duration) {
	if *p == 0 {
		*p = v
	}
}
