package outboxinbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

// Consumer defaults.
const (
	// DefaultMaxPollRecords bounds the records one poll hands to the inbox.
	DefaultMaxPollRecords = 500
	// DefaultMetricsInterval is how often Run writes the inbox's EMF line
	// to MetricsOutput, as the relay does during a run.
	DefaultMetricsInterval = time.Minute
	// DefaultErrorBackoff is how long a partition whose record failed is
	// paused before it is read again from that record.
	DefaultErrorBackoff = time.Second
	// deadLetterSuffix makes a topic's default dead-letter topic.
	deadLetterSuffix = ".dlq"
	// HeaderError and HeaderAttempts are added to a dead-lettered record's
	// own headers: the last error (at most 1 KB) and how many times the
	// record failed.
	HeaderError    = "x-spillway-error"
	HeaderAttempts = "x-spillway-attempts"
	// HeaderSource ("topic/partition@offset", the record dead-lettered)
	// and HeaderConsumer (the inbox's Consumer name) are added too: a
	// re-drive sends the record back to HeaderSource's topic, and the two
	// together identify a dead letter, which may be delivered more than
	// once.
	HeaderSource   = "x-spillway-source"
	HeaderConsumer = "x-spillway-consumer"
	// commitTimeout bounds the offset commit that follows a poll's
	// transactions, also when Run's ctx has ended: committing what was
	// applied saves the next owner the duplicate verdicts.
	commitTimeout = 10 * time.Second
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// Inbox deduplicates and commits each record. Required.
	Inbox *Inbox
	// Handler applies a record. Required.
	Handler Handler
	// Group is the Kafka consumer group. Required.
	Group string
	// Topics are the topics to consume. Required.
	Topics []string
	// Brokers are the seed brokers; they may instead come in ClientOpts.
	Brokers []string
	// ClientOpts are further franz-go options (TLS, SASL, timeouts). The
	// consumer adds its group, its topics, DisableAutoCommit and
	// BlockRebalanceOnPoll, which must not be overridden.
	ClientOpts []kgo.Opt
	// MaxPollRecords bounds one poll. Default DefaultMaxPollRecords.
	MaxPollRecords int
	// ErrorBackoff is how long a failed record's partition is paused
	// before the record runs again; other partitions keep flowing.
	// Default DefaultErrorBackoff.
	ErrorBackoff time.Duration
	// MaxAttempts bounds the failed runs of one record, a recovered panic
	// of the handler included (an interruption by the end of Run's ctx is
	// not one); the last failure hands the record to OnFailure. The runs
	// are counted on the record's marker, so the count goes on across
	// restarts and rebalances (1 write unit per failed run). Default
	// DefaultMaxAttempts.
	MaxAttempts int
	// OnFailure is what becomes of a record that failed MaxAttempts times.
	// Default DeadLetter.
	OnFailure FailurePolicy
	// DeadLetterTopic receives records under DeadLetter. Default the
	// record's topic + ".dlq". It must exist: Run checks it at start, with
	// the consumed topics.
	DeadLetterTopic string
	// FailureCallback takes records under Callback, with the last error;
	// an error from it keeps the record failed (its partition waits and
	// runs it again). Required with Callback.
	FailureCallback func(ctx context.Context, rec Record, cause error) error
	// Metrics, when set, is flushed to MetricsOutput at most every
	// MetricsInterval and when Run returns: an outboxobs/emf.InboxRecorder
	// that is one of the inbox's Options.Hooks. Default none.
	Metrics Flusher
	// MetricsOutput receives Metrics' lines. Default os.Stdout.
	MetricsOutput io.Writer
	// MetricsInterval is the period of the metrics' flush. Default
	// DefaultMetricsInterval.
	MetricsInterval time.Duration
	// Logger receives failures. Default slog.Default().
	Logger *slog.Logger
}

// FailurePolicy says what a Consumer does with a record that failed
// MaxAttempts times. Every policy then writes the record's marker with
// Outcome dead-lettered (a record without a message id has none) and moves
// its partition on. Reading the same delivery again (a crash before the
// offset commit) is a duplicate; another delivery of the message, such as
// a re-drive from the dead-letter topic (spillway inbox redrive), runs the
// handler once more, and applies it once if it succeeds.
type FailurePolicy int

const (
	// DeadLetter produces the record (key, value, its headers plus
	// HeaderError, HeaderAttempts, HeaderSource and HeaderConsumer) to
	// DeadLetterTopic, at least once: a crash between the produce and the
	// marker write produces it again, with the same HeaderSource and
	// HeaderConsumer. The default.
	DeadLetter FailurePolicy = iota
	// Callback hands the record and its last error to FailureCallback.
	Callback
	// MarkOnly records the outcome in the marker and nothing else.
	MarkOnly
)

// String implements fmt.Stringer.
func (p FailurePolicy) String() string {
	switch p {
	case DeadLetter:
		return "dead-letter"
	case Callback:
		return "callback"
	case MarkOnly:
		return "mark-only"
	}
	return "unknown"
}

// Consumer reads Spillway's topics in a Kafka consumer group and applies
// every record through the inbox, exactly once per message.
//
// Records of a partition are processed one after the other, in offset
// order; partitions are processed side by side. An offset is committed only
// after its record's transaction committed or the record was found to be a
// duplicate, so a consumer that dies in between hands the record to the
// next owner, whose inbox reports it as a duplicate. Rebalances wait for
// the poll being processed (kgo.BlockRebalanceOnPoll) and its commit, so a
// partition changes owner between records, never during one. A record that
// fails stops its partition alone: the partition's fetches are paused for
// ErrorBackoff and it is read again from that record, while the later
// records wait, so per-key order holds; after MaxAttempts failures
// (counted on the record's marker, so across restarts) the OnFailure policy
// takes the record and the partition moves on. A panic in the handler is
// a failed run.
type Consumer struct {
	cl  *kgo.Client
	cfg ConsumerConfig

	mu       sync.Mutex                      // guards attempts, which partitions update side by side
	attempts map[topicPartition]failedRecord // the failed record of each partition
	paused   map[topicPartition]time.Time    // when to resume; Run's goroutine only

	// beforeCommit runs after a poll's transactions and before its commit;
	// an error ends Run there (tests use it to kill a consumer).
	beforeCommit func() error
}

// NewConsumer creates the franz-go client; it joins the group on the first
// poll of Run.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	const op = "new inbox consumer"
	switch {
	case cfg.Inbox == nil:
		return nil, outbox.Misconfigured(op, "inbox is nil")
	case cfg.Handler == nil:
		return nil, outbox.Misconfigured(op, "handler is nil")
	case cfg.Group == "":
		return nil, outbox.Misconfigured(op, "consumer group is empty")
	case len(cfg.Topics) == 0:
		return nil, outbox.Misconfigured(op, "no topic to consume")
	}
	if cfg.MaxPollRecords <= 0 {
		cfg.MaxPollRecords = DefaultMaxPollRecords
	}
	if cfg.ErrorBackoff <= 0 {
		cfg.ErrorBackoff = DefaultErrorBackoff
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	switch {
	case cfg.OnFailure == Callback && cfg.FailureCallback == nil:
		return nil, outbox.Misconfigured(op, "failure policy Callback without a FailureCallback")
	case cfg.OnFailure < DeadLetter || cfg.OnFailure > MarkOnly:
		return nil, outbox.Misconfigured(op, "unknown failure policy %d", cfg.OnFailure)
	}
	if cfg.MetricsOutput == nil {
		cfg.MetricsOutput = os.Stdout
	}
	if cfg.MetricsInterval <= 0 {
		cfg.MetricsInterval = DefaultMetricsInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := append([]kgo.Opt{}, cfg.ClientOpts...)
	if len(cfg.Brokers) > 0 {
		opts = append(opts, kgo.SeedBrokers(cfg.Brokers...))
	}
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("outboxinbox: create Kafka client for group %s: %w", cfg.Group, err)
	}
	return &Consumer{cl: cl, cfg: cfg, attempts: map[topicPartition]failedRecord{}, paused: map[topicPartition]time.Time{}}, nil
}

// Close leaves the group without committing anything more.
func (c *Consumer) Close() { c.cl.Close() }

// Run polls and applies records until ctx ends (then it returns nil after
// committing what it applied), the client is closed, or it meets an error
// no retry cures, which it returns: a consumed or dead-letter topic
// missing when Run starts (a *TopicError), a refused authentication or
// authorization, a dead-letter produce refused for good (the topic gone,
// not authorized, the record too large), a missing table or refused
// credentials on DynamoDB. A record that failed for such a reason is not
// counted as a failed run and its offset is not committed.
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.checkTopics(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	clock := c.cfg.Inbox.opts.Clock
	lastFlush := clock.Now()
	defer func() { c.flushMetrics(ctx, clock.Now()) }()
	for {
		now := clock.Now()
		if now.Sub(lastFlush) >= c.cfg.MetricsInterval {
			c.flushMetrics(ctx, now)
			lastFlush = now
		}
		fetches := c.poll(ctx, now)
		if fetches.IsClientClosed() {
			return nil
		}
		var fatal error
		fetches.EachError(func(topic string, partition int32, err error) {
			switch {
			case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			case isFatal(err):
				fatal = cmp.Or(fatal, fmt.Errorf("outboxinbox: consume %s/%d in group %s: %w", topic, partition, c.cfg.Group, err))
			default:
				c.cfg.Logger.WarnContext(ctx, "outboxinbox: fetch failed; the client retries", "topic", topic, "partition", partition, "error", err)
			}
		})
		err := c.apply(ctx, fetches)
		c.cl.AllowRebalance()
		if err := cmp.Or(err, fatal); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// checkTopics asks the cluster once for the consumed topics and, under
// DeadLetter, their dead-letter topics: a group consumer waits for a
// missing topic without a word, a missing dead-letter topic would stop its
// partition at the first poison record, and the first request is where a
// refused authentication shows.
func (c *Consumer) checkTopics(ctx context.Context) error {
	deadLetterOf := map[string]string{} // dead-letter topic → a topic it serves
	topics := slices.Clone(c.cfg.Topics)
	if c.cfg.OnFailure == DeadLetter {
		for _, t := range c.cfg.Topics {
			dl := c.deadLetterTopic(t)
			if _, seen := deadLetterOf[dl]; !seen && !slices.Contains(topics, dl) {
				topics = append(topics, dl)
			}
			deadLetterOf[dl] = cmp.Or(deadLetterOf[dl], t)
		}
	}
	resp, err := topicMetadata(ctx, c.cl, topics)
	if err != nil {
		return fmt.Errorf("outboxinbox: group %s: look up topics %v: %w", c.cfg.Group, topics, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			name := aws.ToString(t.Topic)
			return &TopicError{Group: c.cfg.Group, Topic: name, DeadLetterFor: deadLetterOf[name], Err: err}
		}
	}
	return nil
}

// deadLetterTopic is where DeadLetter produces topic's records.
func (c *Consumer) deadLetterTopic(topic string) string {
	return cmp.Or(c.cfg.DeadLetterTopic, topic+deadLetterSuffix)
}

// poll resumes the paused partitions whose backoff is over and polls until
// records arrive, ctx ends or the next paused partition is due.
func (c *Consumer) poll(ctx context.Context, now time.Time) kgo.Fetches {
	resume := map[string][]int32{}
	var next time.Time
	for tp, at := range c.paused {
		if !at.After(now) {
			resume[tp.topic] = append(resume[tp.topic], tp.partition)
			delete(c.paused, tp)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if len(resume) > 0 {
		c.cl.ResumeFetchPartitions(resume)
	}
	if next.IsZero() {
		return c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
	}
	pctx, cancel := context.WithTimeout(ctx, next.Sub(now))
	defer cancel()
	return c.cl.PollRecords(pctx, c.cfg.MaxPollRecords)
}

// isFatal reports a client error that retrying does not cure. A missing
// topic is found by checkTopics: during a run the same code can be a
// passing state of a partition move, which the client retries.
func isFatal(err error) bool {
	for _, e := range []error{kerr.SaslAuthenticationFailed, kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// flushMetrics flushes Metrics to MetricsOutput, if set.
func (c *Consumer) flushMetrics(ctx context.Context, now time.Time) {
	if c.cfg.Metrics == nil {
		return
	}
	if err := c.cfg.Metrics.Flush(c.cfg.MetricsOutput, now); err != nil {
		c.cfg.Logger.WarnContext(ctx, "outboxinbox: metrics not written", "error", err)
	}
}

// topicPartition names a partition.
type topicPartition struct {
	topic     string
	partition int32
}

// apply processes a poll's partitions side by side, pauses and rewinds each
// failed partition to its failed record and commits the records that got
// a verdict. It returns the first error that will not heal.
func (c *Consumer) apply(ctx context.Context, fetches kgo.Fetches) error {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		done    []*kgo.Record
		fatal   error
		rewinds = map[string]map[int32]kgo.EpochOffset{}
		pause   = map[string][]int32{}
	)
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		wg.Go(func() {
			last, failed, err := c.applyPartition(ctx, p.Records)
			mu.Lock()
			defer mu.Unlock()
			fatal = cmp.Or(fatal, err)
			if last != nil {
				done = append(done, last)
			}
			if failed != nil {
				if rewinds[failed.Topic] == nil {
					rewinds[failed.Topic] = map[int32]kgo.EpochOffset{}
				}
				rewinds[failed.Topic][failed.Partition] = kgo.EpochOffset{Epoch: failed.LeaderEpoch, Offset: failed.Offset}
				pause[failed.Topic] = append(pause[failed.Topic], failed.Partition)
			}
		})
	})
	wg.Wait()
	if len(rewinds) > 0 {
		c.cl.SetOffsets(rewinds)
		c.cl.PauseFetchPartitions(pause)
		at := c.cfg.Inbox.opts.Clock.Now().Add(c.cfg.ErrorBackoff)
		for topic, ps := range pause {
			for _, p := range ps {
				c.paused[topicPartition{topic, p}] = at
			}
		}
	}
	return cmp.Or(c.commit(ctx, done), fatal)
}

// commit commits the offsets of the records that got a verdict.
func (c *Consumer) commit(ctx context.Context, done []*kgo.Record) error {
	if len(done) == 0 {
		return nil
	}
	if c.beforeCommit != nil {
		if err := c.beforeCommit(); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := c.cl.CommitRecords(cctx, done...); err != nil {
		// The records are applied; whoever reads them again gets
		// duplicate verdicts.
		c.cfg.Logger.WarnContext(ctx, "outboxinbox: offset commit failed; the records will be read again and skipped as duplicates", "error", err)
	}
	return nil
}

// applyPartition processes records in order until one fails short of its
// last attempt, or with an error that will not heal (returned). It returns
// the last record with a verdict and the failed one.
func (c *Consumer) applyPartition(ctx context.Context, recs []*kgo.Record) (last, failed *kgo.Record, fatal error) {
	for _, r := range recs {
		rec := fromKgo(r)
		res := c.cfg.Inbox.process(ctx, rec, c.cfg.Handler, c.cfg.MaxAttempts)
		if res.err == nil && !res.exhausted {
			c.succeeded(r)
			last = r
			continue
		}
		if ctx.Err() != nil {
			return last, r, nil // interrupted: read again by whoever owns it next
		}
		if res.err != nil && unhealable(res.err) {
			return last, r, fmt.Errorf("outboxinbox: group %s: record %s: %w", c.cfg.Group, sourceOf(rec), res.err)
		}
		moveOn, err := c.settle(ctx, r, rec, res)
		if !moveOn {
			return last, r, err
		}
		c.succeeded(r)
		last = r
	}
	return last, nil, nil
}

// fromKgo converts a franz-go record.
func fromKgo(r *kgo.Record) Record {
	hs := make([]outbox.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = outbox.Header{Key: h.Key, Value: h.Value}
	}
	return Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}
}

// topicMetadata asks the cluster about topics (every topic when none is
// named) without creating any.
func topicMetadata(ctx context.Context, cl *kgo.Client, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl)
}
