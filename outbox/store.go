package outbox

import (
	"context"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// Backlog is one sample of the pending messages.
type Backlog struct {
	// Pending counts the messages, each bucket capped at the store's limit.
	Pending int64
	// Oldest is the earliest CreatedAt among the bucket heads; zero when
	// nothing is pending.
	Oldest time.Time
	// Parked counts the messages in the buckets' parked partitions, each
	// bucket capped like Pending; zero from a store that does not count
	// them. Relays report it only under PoisonQuarantine.
	Parked int64
}

// Stranded is one count of the messages in buckets beyond the bucket
// count: buckets no relay of the table reads, which only a writer with
// another bucket count fills.
type Stranded struct {
	// Messages counts them, each bucket capped as Backlog caps it.
	Messages int64
	// Buckets lists the buckets holding them, ascending.
	Buckets []int
}

// StrandedCounter is the optional Store capability of counting stranded
// messages. The holder of bucket 0 asks it with every StrandedEvery-th
// backlog interval and reports the count (HookStranded), so an alarm fires
// on messages no relay will ever publish. outboxddb.Store implements it.
type StrandedCounter interface {
	Stranded(ctx context.Context) (Stranded, error)
}

// Store is what the relay needs from the table holding the outbox. It is
// implemented by outboxddb.Store (DynamoDB) and outboxmem.Store (memory),
// and outboxtest.RunStoreTests is the contract both keep, which another
// implementation must pass too.
//
// The seam runs one way: a store sends the requests it is given and
// decides nothing. Its lease primitives (lease.IO) carry the lease
// protocol's writes and reads, each with the time they name; the relay
// runs the protocol over them (lease.AcquireRound for a round, lease.Renew
// for a renewal during a slow publish) and never asks a store to.
type Store interface {
	lease.IO
	// BucketCount is the store's bucket count; a relay with another is a
	// misconfiguration (NewRelay refuses it).
	BucketCount() int
	// ReleaseLeases is the graceful stop: it stamps relayID's heartbeat
	// record stopped, later than every heartbeat this store sent, and frees
	// every lease naming it, guarded by owner and the expiry it read.
	ReleaseLeases(ctx context.Context, relayID string) (lease.Release, error)
	// ReadCoordination returns one consistent view of leases and heartbeats
	// without writing anything.
	ReadCoordination(ctx context.Context) (lease.Coordination, error)
	// PendingBuckets returns, ascending, which of the given buckets hold at
	// least one message (a cheap, eventually consistent probe).
	PendingBuckets(ctx context.Context, buckets []int) ([]int, error)
	// FetchBatch returns up to max messages of a bucket in enqueue order,
	// each placed at its bucket and sequence (Stored). When it reaches a
	// row it cannot read, it returns the messages before that row and an
	// *UnreadableRowError (or, for a row stamped with another bucket count,
	// a misconfiguration), so the valid prefix is relayed and the bad row
	// becomes the bucket's head. A batch of fewer than max messages with no
	// error says the bucket held nothing more to hand out now; one the
	// store ended earlier, with messages behind it, comes with ErrBatchCut,
	// and never empty (an empty batch always waits).
	FetchBatch(ctx context.Context, bucket, max int) ([]Message, error)
	// MarkPublished deletes a contiguous prefix of a fetched batch, in order.
	MarkPublished(ctx context.Context, bucket int, msgs []Message) error
	// Backlog samples the pending messages of every bucket.
	Backlog(ctx context.Context) (Backlog, error)
}

// Publisher sends messages to Kafka. The franz-go implementation is
// outboxkafka.Publisher.
type Publisher interface {
	// Init connects and fetches metadata, bounded by ctx. A relay calls it
	// before joining the fleet so one that cannot reach Kafka claims nothing.
	Init(ctx context.Context) error
	// Publish sends msgs in order and returns how many form the contiguous
	// acknowledged prefix, and the first error. A row that cannot be built
	// stops the batch there.
	Publish(ctx context.Context, msgs []Message) (acked int, err error)
}

// WakeUp asks a relay to look at some buckets now instead of at the next
// schedule.
type WakeUp struct {
	// Buckets are hinted buckets; empty means unknown.
	Buckets []int
	// Hop counts continuation wake-ups in one chain; writers send 0.
	Hop int
	// Join asks the woken relay to take a share even if live peers hold the
	// hinted buckets (fan-out under a large backlog).
	Join bool
}

// Notifier delivers wake-ups after a commit or when a relay stops with work
// left. Implementations must not block the caller for long and their failure
// never fails the caller's write: the schedule still finds the message.
type Notifier interface {
	Notify(ctx context.Context, w WakeUp) error
}
