package outboxinbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
)

// Consumer defaults.
const (
	// DefaultMaxPollRecords bounds the records one poll hands to the inbox.
	DefaultMaxPollRecords = 500
	// DefaultMetricsInterval is how often Run writes the inbox's EMF line
	// to MetricsOutput, as the relay does during a run.
	DefaultMetricsInterval = time.Minute
	// DefaultErrorBackoff is the wait after a poll in which a record
	// failed, before its partition is read again from that record.
	DefaultErrorBackoff = time.Second
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
	// ErrorBackoff is the wait after a failed record. Default
	// DefaultErrorBackoff.
	ErrorBackoff time.Duration
	// MetricsOutput receives the inbox's EMF line at most every
	// MetricsInterval and when Run returns. Default none (call
	// Inbox.Metrics().Flush yourself).
	MetricsOutput io.Writer
	// MetricsInterval is the period of the EMF line. Default
	// DefaultMetricsInterval.
	MetricsInterval time.Duration
	// Logger receives failures. Default slog.Default().
	Logger *slog.Logger
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
// fails stops its partition: the partition is read again from that record
// after ErrorBackoff, and the later records wait, so per-key order holds.
type Consumer struct {
	cl  *kgo.Client
	cfg ConsumerConfig

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
	return &Consumer{cl: cl, cfg: cfg}, nil
}

// Close leaves the group without committing anything more.
func (c *Consumer) Close() { c.cl.Close() }

// Run polls and applies records until ctx ends (then it returns nil after
// committing what it applied) or the client is closed.
func (c *Consumer) Run(ctx context.Context) error {
	clock := c.cfg.Inbox.opts.Clock
	lastFlush := clock.Now()
	defer func() { c.flushMetrics(ctx, clock.Now()) }()
	for {
		if now := clock.Now(); now.Sub(lastFlush) >= c.cfg.MetricsInterval {
			c.flushMetrics(ctx, now)
			lastFlush = now
		}
		fetches := c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				c.cfg.Logger.WarnContext(ctx, "outboxinbox: fetch failed; the client retries", "topic", topic, "partition", partition, "error", err)
			}
		})
		failed, err := c.apply(ctx, fetches)
		c.cl.AllowRebalance()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if failed {
			t := time.NewTimer(c.cfg.ErrorBackoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
		}
	}
}

// flushMetrics writes the inbox's EMF line to MetricsOutput, if any.
func (c *Consumer) flushMetrics(ctx context.Context, now time.Time) {
	if c.cfg.MetricsOutput == nil {
		return
	}
	if err := c.cfg.Inbox.metrics.Flush(c.cfg.MetricsOutput, now); err != nil {
		c.cfg.Logger.WarnContext(ctx, "outboxinbox: metrics not written", "error", err)
	}
}

// apply processes a poll's partitions side by side, rewinds each failed
// partition to its failed record and commits the records that got a
// verdict. It reports whether a record failed.
func (c *Consumer) apply(ctx context.Context, fetches kgo.Fetches) (bool, error) {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		done    []*kgo.Record
		rewinds = map[string]map[int32]kgo.EpochOffset{}
	)
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		wg.Go(func() {
			last, failed := c.applyPartition(ctx, p.Records)
			mu.Lock()
			defer mu.Unlock()
			if last != nil {
				done = append(done, last)
			}
			if failed != nil {
				if rewinds[failed.Topic] == nil {
					rewinds[failed.Topic] = map[int32]kgo.EpochOffset{}
				}
				rewinds[failed.Topic][failed.Partition] = kgo.EpochOffset{Epoch: failed.LeaderEpoch, Offset: failed.Offset}
			}
		})
	})
	wg.Wait()
	if len(rewinds) > 0 {
		c.cl.SetOffsets(rewinds)
	}
	if len(done) == 0 {
		return len(rewinds) > 0, nil
	}
	if c.beforeCommit != nil {
		if err := c.beforeCommit(); err != nil {
			return false, err
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := c.cl.CommitRecords(cctx, done...); err != nil {
		// The records are applied; whoever reads them again gets
		// duplicate verdicts.
		c.cfg.Logger.WarnContext(ctx, "outboxinbox: offset commit failed; the records will be read again and skipped as duplicates", "error", err)
	}
	return len(rewinds) > 0, nil
}

// applyPartition processes records in order until one fails. It returns
// the last record with a verdict and the failed one.
func (c *Consumer) applyPartition(ctx context.Context, recs []*kgo.Record) (last, failed *kgo.Record) {
	for _, r := range recs {
		if _, err := c.cfg.Inbox.Process(ctx, fromKgo(r), c.cfg.Handler); err != nil {
			if ctx.Err() == nil {
				c.cfg.Logger.ErrorContext(ctx, "outboxinbox: record failed; its partition waits and reads it again",
					"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "error", err)
			}
			return last, r
		}
		last = r
	}
	return last, nil
}

// fromKgo converts a franz-go record.
func fromKgo(r *kgo.Record) Record {
	hs := make([]outbox.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = outbox.Header{Key: h.Key, Value: h.Value}
	}
	return Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}
}
