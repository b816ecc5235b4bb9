package outboxinbox

import (
	"log/slog"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// Defaults of Options.
const (
	// DefaultTTL is how long a marker is kept after its message was
	// processed, as NServiceBus's DynamoDB outbox keeps its records.
	DefaultTTL = 7 * 24 * time.Hour
	// DefaultMaxAttempts bounds the runs of the handler for one record when
	// its transaction keeps losing conflicts with other writers.
	DefaultMaxAttempts = 5
	// DefaultConflictBackoff is the first wait before re-running a handler
	// whose transaction lost a conflict; it doubles per attempt.
	DefaultConflictBackoff = 20 * time.Millisecond
	// DefaultPartitionKey and DefaultSortKey are the key attributes of the
	// outbox table, where most consumers keep their markers too.
	DefaultPartitionKey = "PK"
	DefaultSortKey      = "SK"
)

// MissingIDPolicy says what Process does with a record that carries no
// message id header (one not produced by Spillway).
type MissingIDPolicy int

const (
	// RefuseMissingID returns a *MissingIDError and runs nothing: the
	// consumer stops on the record until an operator looks. The default.
	RefuseMissingID MissingIDPolicy = iota
	// SkipMissingID reports a record without the header as Skipped
	// without running the handler: the record has no effect and its
	// offset moves on. A header that is present but not a message id is
	// damage, not absence, and is still refused.
	SkipMissingID
)

// Options configures an Inbox.
type Options struct {
	// TableName is the table holding the markers; it needs string key
	// attributes PartitionKey and SortKey. Required. It may be the outbox
	// table or the table of the business items.
	TableName string
	// Consumer names the consumer: every consumer of a topic keeps its own
	// markers, so two services reading one message each apply it once.
	// Required; printable ASCII without '#'. It is the Consumer dimension
	// of the metrics.
	Consumer string
	// KeyPrefix starts every marker's partition key,
	// "{KeyPrefix}#INBOX#{Consumer}#{message id}": services may share it,
	// since the consumer is in the key. Default "OUTBOX"
	// (outboxddb.DefaultKeyPrefix), the outbox table's own prefix.
	KeyPrefix string
	// PartitionKey and SortKey name the table's key attributes. Default
	// "PK" and "SK".
	PartitionKey, SortKey string
	// TTL is how long a marker outlives its processing (the ExpiresAt
	// attribute; enable TTL on it in the table). Default DefaultTTL.
	TTL time.Duration
	// MessageIDHeader is the header carrying the message id. Default
	// "x-outbox-message-id" (outbox.DefaultMessageIDHeaderName).
	MessageIDHeader string
	// MissingID says what a record without the header does; a header
	// present but not a message id is always refused. Default
	// RefuseMissingID.
	MissingID MissingIDPolicy
	// MaxAttempts bounds the handler runs for one record when its
	// transaction is cancelled by a conflict. Default DefaultMaxAttempts.
	MaxAttempts int
	// ConflictBackoff is the first wait after a conflict, doubled per
	// attempt with jitter. Default DefaultConflictBackoff.
	ConflictBackoff time.Duration
	// Clock stamps ProcessedAt and ExpiresAt; the backoff waits on the
	// time package's clock. Default the system clock.
	Clock outbox.Clock
	// Tracer opens a "consume" span per record, linked to the writer's
	// span the record's trace headers name. Default none.
	Tracer outbox.Tracer
	// Logger receives conflicts and refusals. Default slog.Default().
	Logger *slog.Logger
	// Hooks each implement HookConsume and hear of every verdict, failure
	// and conflict (outboxobs/emf.InboxRecorder writes them as metrics).
	// Default none.
	Hooks []outbox.Hook
	// Writer is the outbox writer through which the handlers' Tx.Enqueue
	// adds messages (consume-transform-produce): they commit with the
	// record's marker and the business writes, and the writer's relays are
	// woken after the commit. Default none: Tx.Enqueue is then refused.
	Writer *outboxddb.Writer
}

func (o Options) withDefaults() Options {
	if o.KeyPrefix == "" {
		o.KeyPrefix = outboxddb.DefaultKeyPrefix
	}
	if o.PartitionKey == "" {
		o.PartitionKey = DefaultPartitionKey
	}
	if o.SortKey == "" {
		o.SortKey = DefaultSortKey
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.MessageIDHeader == "" {
		o.MessageIDHeader = outbox.DefaultMessageIDHeaderName
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.ConflictBackoff == 0 {
		o.ConflictBackoff = DefaultConflictBackoff
	}
	if o.Clock == nil {
		o.Clock = outbox.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

func (o Options) validate() error {
	const op = "new inbox"
	switch {
	case o.TableName == "":
		return outbox.Misconfigured(op, "table name is empty")
	case o.Consumer == "":
		return outbox.Misconfigured(op, "consumer name is empty")
	case strings.Contains(o.Consumer, "#") || strings.Contains(o.KeyPrefix, "#"):
		return outbox.Misconfigured(op, "consumer %q or key prefix %q contains '#', the marker key separator", o.Consumer, o.KeyPrefix)
	case o.TTL < time.Minute:
		return outbox.Misconfigured(op, "TTL %s is under a minute; duplicates arrive later than that", o.TTL)
	case o.MaxAttempts < 1:
		return outbox.Misconfigured(op, "max attempts %d is under 1", o.MaxAttempts)
	case o.ConflictBackoff < 0:
		return outbox.Misconfigured(op, "conflict backoff %s is negative", o.ConflictBackoff)
	case o.MissingID != RefuseMissingID && o.MissingID != SkipMissingID:
		return outbox.Misconfigured(op, "unknown missing-id policy %d", o.MissingID)
	}
	for i := 0; i < len(o.Consumer); i++ {
		if c := o.Consumer[i]; c < 0x21 || c > 0x7e {
			return outbox.Misconfigured(op, "consumer name %q is not printable ASCII", o.Consumer)
		}
	}
	return nil
}
