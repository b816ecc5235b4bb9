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

// Options are what a Store, a Writer and the table helpers (CreateTableInput,
// CreateIfNotExists, ReadLayout, RecordLayout) share: the table, its layout
// and the knobs every request path reads. StoreOptions and WriterOptions add
// what only a store or only a writer reads. The zero value of a field means
// its default; only TableName is required. CreateTableInput reads
// TableName, PartitionKey and SortKey alone.
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
	// Clock supplies every timestamp; waits are the time package's. Default
	// outbox.SystemClock.
	Clock outbox.Clock
	// Hooks receive refused conditional writes and throttles; each must
	// implement HookRequest. Default none.
	Hooks []outbox.Hook
	// Logger receives warnings: the Store's failed prunes and unfinished
	// releases, the Writer's failed wake-ups. Default slog.Default().
	Logger *slog.Logger
}

// StoreOptions configure a Store: the shared Options and what only a
// store reads.
type StoreOptions struct {
	Options
	// PendingCountLimit bounds the messages counted per bucket in one
	// backlog sample; a bucket at the limit reports the limit. Default
	// 10000.
	PendingCountLimit int
	// CountParked makes backlog samples count the parked partitions too
	// (one more query per bucket): set it where relays quarantine, the only
	// place anything is parked. Default false.
	CountParked bool
}

// WriterOptions configure a Writer: the shared Options and what only a
// writer reads.
type WriterOptions struct {
	Options
	// Getenv reads the Lambda runtime's _X_AMZN_TRACE_ID, the writer's
	// trace context of last resort (see Writer). Default os.Getenv.
	Getenv func(string) string
	// Notifier, when set, is told about committed messages by Commit,
	// Prepared.Committed and the Enqueue methods so a relay wakes up before
	// its next poll. Optional: without it relays find messages by polling.
	Notifier outbox.Notifier
	// Topics, when set, are the only topics the Writer accepts: a message
	// for another topic is refused with outbox.ErrInvalidMessage before any
	// request, as the enqueue function refuses it (SPILLWAY_TOPICS), since
	// the relay could not publish it. Default: any topic.
	Topics []string
	// MaxCommitAttempts bounds the transactions Writer.Commit sends for one
	// call when they lose to concurrent writes. Default
	// DefaultMaxCommitAttempts (4).
	MaxCommitAttempts int
	// GenerationCheck makes the Writer's Enqueue, EnqueueBatch and Commit
	// check, inside their transaction, that this generation (KeyPrefix and
	// BucketCount) is not sealed, so a writer left on it after the operator
	// sealed it is refused with generation.ErrSealed instead of writing
	// where no relay looks any more (see Writer.GenerationCheck). It costs a
	// transaction: Enqueue becomes a TransactWriteItems (twice the put's
	// write units) and every call adds a ConditionCheck (two write units).
	// Set it while the bucket count changes. Default false.
	GenerationCheck bool
	// PreviousKeyPrefix and PreviousBucketCount name the generation this
	// one replaces while the bucket count changes (both or neither). A
	// Writer with them switches at the seal: it writes to the previous
	// generation, checking in the same transaction that it is still open,
	// until it sees it sealed, and to this generation from then on, without
	// a check (sealed is permanent). So every message it commits before the
	// seal is in the previous generation and every one after it in this
	// one, whichever writer instance commits it. Keep them until every
	// writer runs with them and the previous generation is sealed. Default:
	// none.
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
	if o.Clock == nil {
		o.Clock = outbox.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// WithDefaults returns o with every zero field set to its default.
func (o StoreOptions) WithDefaults() StoreOptions {
	o.Options = o.Options.WithDefaults()
	if o.PendingCountLimit == 0 {
		o.PendingCountLimit = DefaultPendingCountLimit
	}
	return o
}

// WithDefaults returns o with every zero field set to its default.
func (o WriterOptions) WithDefaults() WriterOptions {
	o.Options = o.Options.WithDefaults()
	if o.MaxCommitAttempts == 0 {
		o.MaxCommitAttempts = DefaultMaxCommitAttempts
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	return o
}

// validateOp names Validate's operation in its errors.
const validateOp = "validate dynamodb options"

// Validate reports the first invalid field as an error matching
// outbox.ErrMisconfigured. It checks o as given: call WithDefaults first to
// accept zero fields.
func (o Options) Validate() error {
	for _, f := range []struct{ name, value string }{
		{"TableName", o.TableName},
		{"PartitionKey", o.PartitionKey},
		{"SortKey", o.SortKey},
		{"KeyPrefix", o.KeyPrefix},
	} {
		if strings.TrimSpace(f.value) == "" {
			return outbox.Misconfigured(validateOp, "%s is empty", f.name)
		}
	}
	if o.PartitionKey == o.SortKey {
		return outbox.Misconfigured(validateOp, "PartitionKey and SortKey are both %q; they must differ", o.PartitionKey)
	}
	for _, key := range []struct{ field, name string }{{"PartitionKey", o.PartitionKey}, {"SortKey", o.SortKey}} {
		for _, reserved := range reservedAttributes {
			if key.name == reserved {
				return outbox.Misconfigured(validateOp, "%s %q is an attribute name the outbox writes; pick another key attribute name", key.field, key.name)
			}
		}
	}
	if err := atLeastOne("BucketCount", o.BucketCount); err != nil {
		return err
	}
	if err := atLeastOne("MaxConcurrency", o.MaxConcurrency); err != nil {
		return err
	}
	for i, h := range o.Hooks {
		if _, ok := h.(HookRequest); !ok {
			return outbox.Misconfigured(validateOp, "Hooks[%d] (%T) does not implement outboxddb.HookRequest", i, h)
		}
	}
	return nil
}

// Validate reports the first invalid field as Options.Validate does.
func (o StoreOptions) Validate() error {
	if err := o.Options.Validate(); err != nil {
		return err
	}
	return atLeastOne("PendingCountLimit", o.PendingCountLimit)
}

// Validate reports the first invalid field as Options.Validate does.
func (o WriterOptions) Validate() error {
	if err := o.Options.Validate(); err != nil {
		return err
	}
	if err := atLeastOne("MaxCommitAttempts", o.MaxCommitAttempts); err != nil {
		return err
	}
	for i, t := range o.Topics {
		if strings.TrimSpace(t) == "" {
			return outbox.Misconfigured(validateOp, "Topics[%d] is blank", i)
		}
	}
	return o.validatePrevious(validateOp)
}

// atLeastOne refuses a count below 1.
func atLeastOne(name string, n int) error {
	if n < 1 {
		return outbox.Misconfigured(validateOp, "%s must be >= 1, got %d", name, n)
	}
	return nil
}

// validatePrevious requires the previous generation whole and under a key
// prefix of its own.
func (o WriterOptions) validatePrevious(op string) error {
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

// resolve applies the defaults and validates.
func (o StoreOptions) resolve() (StoreOptions, error) {
	o = o.WithDefaults()
	return o, o.Validate()
}

// resolve applies the defaults and validates.
func (o WriterOptions) resolve() (WriterOptions, error) {
	o = o.WithDefaults()
	return o, o.Validate()
}
