package outboxddb

import (
	"log/slog"
	"os"
	"strings"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
)

// Defaults of Options. Every writer and relay sharing a table must agree on
// the table name, the key attribute names, the key prefix and the bucket
// count.
const (
	DefaultPartitionKey      = "PK"
	DefaultSortKey           = "SK"
	DefaultKeyPrefix         = "OUTBOX"
	DefaultMaxConcurrency    = 8
	DefaultPendingCountLimit = 10000
)

// reservedAttributes are the item attribute names the outbox writes besides
// the key; a key attribute with one of these names would collide with them.
var reservedAttributes = []string{
	attrMessageID, attrTopic, attrKey, attrValue, attrHeaders, attrPartition,
	attrCreatedAt, attrBucketCount, attrSequence, attrOwner, attrExpiresAt,
	attrLastSeen, attrStoppedAt, attrKeepsAhead, attrTxFirst, attrTxCount, attrParkedReason, attrParkedError, attrAttempts,
	attrFirstFailedAt, attrParkedAt, attrGenerationState, attrSuccessorPrefix,
	attrSuccessorBuckets, attrOpenedAt, attrSealedAt, attrDrainedAt, attrRecordedAt, attrRecordedBy,
}

// Options configure a Store, a Writer and the table helpers. The zero value
// of a field means its default; only TableName is required. Which fields
// each reads:
//
//   - both: TableName, PartitionKey, SortKey, KeyPrefix, BucketCount,
//     MaxConcurrency, Clock, Hooks, Logger;
//   - Store only: PendingCountLimit, CountParked;
//   - Writer only: Getenv, Notifier, Topics, MaxCommitAttempts,
//     GenerationCheck, PreviousKeyPrefix, PreviousBucketCount;
//   - CreateTableInput: TableName, PartitionKey, SortKey;
//   - CreateIfNotExists, ReadLayout and RecordLayout: those, KeyPrefix,
//     BucketCount, Clock and Hooks (the layout record).
//
// Validate checks every field whatever reads it, so one Options value
// serves a process's writer and store alike.
type Options struct {
	// TableName is the table holding the outbox items (required).
	TableName string
	// PartitionKey is the name of the table's string partition key. Default
	// "PK".
	PartitionKey string
	// SortKey is the name of the table's string sort key. Default "SK".
	SortKey string
	// KeyPrefix starts every partition key value the outbox writes; distinct
	// prefixes keep several outboxes, or the outbox and other items, apart in
	// one table. Default "OUTBOX".
	KeyPrefix string
	// BucketCount must equal the relays' count and the table's layout
	// record (which writers and stores check before they write; see
	// ReadLayout). A Writer computes each message's bucket for it and
	// stamps it on every message item, so it is given once, here. Default 8.
	BucketCount int
	// MaxConcurrency bounds the DynamoDB requests one store or writer call
	// keeps in flight (lease writes, probes, counter reservations). Default 8.
	MaxConcurrency int
	// PendingCountLimit (Store only) bounds the messages counted per bucket in
	// one backlog sample; a bucket at the limit reports the limit. Default
	// 10000.
	PendingCountLimit int
	// Clock supplies every timestamp; waits are the time package's. Default
	// outbox.SystemClock.
	Clock outbox.Clock
	// Hooks receive refused conditional writes and throttles; each must
	// implement HookRequest. Default none.
	Hooks []outbox.Hook
	// Logger receives warnings: the Store's refused heartbeats, skipped
	// keeps and failed prunes, the Writer's failed wake-ups. Default
	// slog.Default().
	Logger *slog.Logger
	// Getenv (Writer only) reads the Lambda runtime's _X_AMZN_TRACE_ID, the
	// writer's trace context of last resort (see Writer). Default os.Getenv.
	Getenv func(string) string
	// Notifier (Writer only), when set, is told about committed messages by
	// Commit, Prepared.Committed and the Enqueue methods so a relay wakes up before
	// its next poll. Optional: without it relays find messages by polling.
	Notifier outbox.Notifier
	// Topics (Writer only), when set, are the only topics a Writer accepts: a
	// message for another topic is refused with outbox.ErrInvalidMessage before
	// any request, as the enqueue function refuses it (SPILLWAY_TOPICS), since
	// the relay could not publish it. Default: any topic.
	Topics []string
	// CountParked (Store only) makes backlog samples count the parked
	// partitions too (one more query per bucket): set it where relays
	// quarantine, the only place anything is parked. Default false.
	CountParked bool
	// MaxCommitAttempts (Writer only) bounds the transactions Writer.Commit
	// sends for one call when they lose to concurrent writes. Default
	// DefaultMaxCommitAttempts (4).
	MaxCommitAttempts int
	// GenerationCheck (Writer only) makes the Writer's Enqueue, EnqueueBatch
	// and Commit check, inside their transaction, that this generation
	// (KeyPrefix and BucketCount) is not sealed, so a writer left on it after
	// the operator sealed it is refused with generation.ErrSealed instead
	// of writing where no relay looks any more (see Writer.GenerationCheck). It
	// costs a transaction: Enqueue becomes a TransactWriteItems (twice the
	// put's write units) and every call adds a ConditionCheck (two write
	// units). Set it while the bucket count changes. Default false.
	GenerationCheck bool
	// PreviousKeyPrefix and PreviousBucketCount (Writer only) name the
	// generation this one replaces while the bucket count changes (both or
	// neither). A Writer with them switches at the seal: it writes to the
	// previous generation, checking in the same transaction that it is still
	// open, until it sees it sealed, and to this generation from then on,
	// without a check (sealed is permanent). So every message it commits before
	// the seal is in the previous generation and every one after it in this
	// one, whichever writer instance commits it. Stores ignore them. Keep them
	// until every writer runs with them and the previous generation is sealed.
	// Default: none.
	PreviousKeyPrefix   string
	PreviousBucketCount int
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.PartitionKey == "" {
		o.PartitionKey = DefaultPartitionKey
	}
	if o.SortKey == "" {
		o.SortKey = DefaultSortKey
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.BucketCount == 0 {
		o.BucketCount = outbox.DefaultBucketCount
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.PendingCountLimit == 0 {
		o.PendingCountLimit = DefaultPendingCountLimit
	}
	if o.MaxCommitAttempts == 0 {
		o.MaxCommitAttempts = DefaultMaxCommitAttempts
	}
	if o.Clock == nil {
		o.Clock = outbox.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	return o
}

// Validate reports the first invalid field as an error matching
// outbox.ErrMisconfigured. It checks o as given: call WithDefaults first to
// accept zero fields.
func (o Options) Validate() error {
	const op = "validate dynamodb options"
	for _, f := range []struct{ name, value string }{
		{"TableName", o.TableName},
		{"PartitionKey", o.PartitionKey},
		{"SortKey", o.SortKey},
		{"KeyPrefix", o.KeyPrefix},
	} {
		if strings.TrimSpace(f.value) == "" {
			return outbox.Misconfigured(op, "%s is empty", f.name)
		}
	}
	if o.PartitionKey == o.SortKey {
		return outbox.Misconfigured(op, "PartitionKey and SortKey are both %q; they must differ", o.PartitionKey)
	}
	for _, key := range []struct{ field, name string }{{"PartitionKey", o.PartitionKey}, {"SortKey", o.SortKey}} {
		for _, reserved := range reservedAttributes {
			if key.name == reserved {
				return outbox.Misconfigured(op, "%s %q is an attribute name the outbox writes; pick another key attribute name", key.field, key.name)
			}
		}
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"BucketCount", o.BucketCount}, {"MaxConcurrency", o.MaxConcurrency}, {"PendingCountLimit", o.PendingCountLimit}, {"MaxCommitAttempts", o.MaxCommitAttempts}} {
		if f.n < 1 {
			return outbox.Misconfigured(op, "%s must be >= 1, got %d", f.name, f.n)
		}
	}
	for i, h := range o.Hooks {
		if _, ok := h.(HookRequest); !ok {
			return outbox.Misconfigured(op, "Hooks[%d] (%T) does not implement outboxddb.HookRequest", i, h)
		}
	}
	for i, t := range o.Topics {
		if strings.TrimSpace(t) == "" {
			return outbox.Misconfigured(op, "Topics[%d] is blank", i)
		}
	}
	return o.validatePrevious(op)
}

// validatePrevious requires the previous generation whole and under a key
// prefix of its own.
func (o Options) validatePrevious(op string) error {
	switch {
	case o.PreviousKeyPrefix == "" && o.PreviousBucketCount == 0:
		return nil
	case o.PreviousKeyPrefix == o.KeyPrefix:
		return outbox.Misconfigured(op, "PreviousKeyPrefix equals KeyPrefix %q; a new bucket count needs a new key prefix", o.KeyPrefix)
	}
	return generation.Generation{KeyPrefix: o.PreviousKeyPrefix, BucketCount: o.PreviousBucketCount}.Validate(op)
}

// resolve applies the defaults and validates.
func (o Options) resolve() (Options, error) {
	o = o.WithDefaults()
	return o, o.Validate()
}
