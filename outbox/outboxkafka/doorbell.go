package outboxkafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/internal/murmur2"
)

// The doorbell topic carries one small record per bucket a writer's
// commit went to, keyed "{KeyPrefix}#{bucket}" with an empty value, so
// outboxes and generations can share a topic. The Java client's placement
// (murmur2 of the key) puts a bucket's rings on one partition, and a relay
// fetches the partitions of the buckets it holds. A ring is worth nothing
// a second later: one partition per bucket at most, replication as the
// cluster's default and a retention of an hour are plenty.

// ringTimeout bounds a ring's delivery: a ring later than that finds the
// holder's poll done already.
const ringTimeout = 5 * time.Second

// missingTopicRetry is how long a listener waits before asking for a
// doorbell topic the brokers did not list.
const missingTopicRetry = 30 * time.Second

// DoorbellConfig names an outbox's doorbell topic.
type DoorbellConfig struct {
	// Topic is the doorbell topic (required; SPILLWAY_DOORBELL_TOPIC).
	Topic string
	// KeyPrefix is the outbox's key prefix, as outboxddb.Options.KeyPrefix
	// (required).
	KeyPrefix string
	// Logger receives a failed ring, a missing topic and fetch errors.
	// Default slog.Default().
	Logger *slog.Logger
	// Clock dates a listener's start, from which it fetches rings
	// (outbox.DoorbellLookBack before it). Default outbox.SystemClock.
	Clock outbox.Clock
}

func (c DoorbellConfig) withDefaults() (DoorbellConfig, error) {
	if c.Topic == "" || c.KeyPrefix == "" {
		return c, outbox.Misconfigured("kafka doorbell config", "a topic and the outbox's key prefix are required, got %q and %q", c.Topic, c.KeyPrefix)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = outbox.SystemClock{}
	}
	return c, nil
}

// ringKey is bucket's record key.
func (c DoorbellConfig) ringKey(bucket int) []byte {
	return []byte(c.KeyPrefix + "#" + strconv.Itoa(bucket))
}

// ringBucket returns the bucket of a ring's key, false for another
// outbox's ring or a key that is not a ring's.
func (c DoorbellConfig) ringBucket(key []byte) (int, bool) {
	rest, ok := strings.CutPrefix(string(key), c.KeyPrefix+"#")
	if !ok {
		return 0, false
	}
	b, err := strconv.Atoi(rest)
	return b, err == nil && b >= 0
}

// Ringer is a writer's end of the doorbell (outbox.Ringer, for
// outboxwake.NotifierConfig.Doorbell): a franz-go client of its own that
// produces each ring as soon as it is handed over, with the leader's
// acknowledgement only and no idempotence, since a lost ring costs a poll
// and a repeated one a fetch. Ring returns at once; a ring that fails is
// logged and counted (Failed). Close it when the writer is done.
type Ringer struct {
	cl     *kgo.Client
	cfg    DoorbellConfig
	failed atomic.Int64
}

var _ outbox.Ringer = (*Ringer)(nil)

// NewRinger returns a ringer on the brokers of kafka (its connection
// settings: brokers, TLS, SASL; ExtraOpts first, as the publisher's), for
// the doorbell of bell. It does not contact the brokers.
func NewRinger(kafka Config, bell DoorbellConfig) (*Ringer, error) {
	bell, err := bell.withDefaults()
	if err != nil {
		return nil, err
	}
	kafka = kafka.WithDefaults()
	if err := kafka.Validate(); err != nil {
		return nil, err
	}
	conn, err := kafka.connectOpts(kafka.scramSource())
	if err != nil {
		return nil, err
	}
	opts := append(append([]kgo.Opt{}, kafka.ExtraOpts...), conn...)
	opts = append(opts,
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(newPartitioner()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(ringTimeout),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, outbox.Misconfigured("new kafka ringer", "%v", err)
	}
	return &Ringer{cl: cl, cfg: bell}, nil
}

// Ring implements outbox.Ringer: one record per bucket, handed to the
// client; it does not wait for the brokers. ctx's values reach the
// records, not its end: a ring outlives the commit's request.
func (r *Ringer) Ring(ctx context.Context, buckets []int) error {
	ctx = context.WithoutCancel(ctx)
	for _, b := range buckets {
		rec := &kgo.Record{Topic: r.cfg.Topic, Key: r.cfg.ringKey(b), Value: []byte{}}
		r.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				r.failed.Add(1)
				r.cfg.Logger.WarnContext(ctx, "ringing the doorbell failed; the relay's poll finds the message",
					"topic", r.cfg.Topic, "bucket", b, "error", err)
			}
		})
	}
	return nil
}

// Failed counts the rings the brokers did not take.
func (r *Ringer) Failed() int64 { return r.failed.Load() }

// Flush waits until every ring handed over is acknowledged or failed, or
// ctx ends.
func (r *Ringer) Flush(ctx context.Context) error { return r.cl.Flush(ctx) }

// Close closes the client; rings not yet sent fail.
func (r *Ringer) Close() { r.cl.Close() }

// Listener is a relay's end of the doorbell (outbox.Doorbell) on the
// publisher's client: it fetches the partitions that carry the rings of
// the buckets the relay listens for, starting outbox.DoorbellLookBack
// before each Listen that added them, and delivers the rings of this
// outbox's buckets. It subscribes in the background: Listen never waits
// for the brokers. A missing topic or a failed fetch is logged and costs
// only latency (the relay's poll finds the messages). Listen for no bucket
// when the relay stops, and Close it with the publisher.
type Listener struct {
	*outbox.Rings
	cl  *kgo.Client
	cfg DoorbellConfig

	kick chan struct{}
	once sync.Once
	stop context.CancelFunc
	done sync.WaitGroup

	mu sync.Mutex
	// since is when the earliest Listen not yet subscribed was called;
	// partitions is the topic's partition count (0: not known yet);
	// fetching the partitions subscribed, missing whether the last look
	// found no topic.
	since      time.Time
	partitions int
	fetching   map[int32]bool
	missing    bool
}

var _ outbox.Doorbell = (*Listener)(nil)

// Listener returns the doorbell listener of bell on p's client.
func (p *Publisher) Listener(bell DoorbellConfig) (*Listener, error) {
	bell, err := bell.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Listener{Rings: outbox.NewRings(), cl: p.cl, cfg: bell, kick: make(chan struct{}, 1), fetching: map[int32]bool{}}, nil
}

// Listen implements outbox.Doorbell.
func (l *Listener) Listen(buckets []int) {
	l.Rings.Listen(buckets)
	l.mu.Lock()
	if l.since.IsZero() {
		l.since = l.cfg.Clock.Now()
	}
	l.mu.Unlock()
	l.once.Do(l.start)
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Close stops the listener's fetches and waits for them.
func (l *Listener) Close() {
	l.once.Do(func() {})
	if l.stop != nil {
		l.stop()
	}
	l.done.Wait()
}

// start runs the subscriber and the fetch loop until Close.
func (l *Listener) start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	l.done.Add(2)
	go func() {
		defer l.done.Done()
		l.subscribe(ctx)
	}()
	go func() {
		defer l.done.Done()
		l.fetch(ctx)
	}()
}

// subscribe brings the partitions fetched in line with the buckets
// listened for, whenever Listen asks and while the topic is missing.
func (l *Listener) subscribe(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-retry.C:
		}
		if !l.reconcile(ctx) {
			retry.Reset(missingTopicRetry)
		}
	}
}

// reconcile adds the partitions of the buckets listened for, from the
// look-back before the Listen that asked, and removes the others. It
// reports false when the topic's partitions are not known.
func (l *Listener) reconcile(ctx context.Context) bool {
	l.mu.Lock()
	n := l.partitions
	l.mu.Unlock()
	if n == 0 {
		var err error
		if n, err = l.partitionCount(ctx); err != nil {
			l.mu.Lock()
			report := !l.missing
			l.missing = true
			l.mu.Unlock()
			if report && ctx.Err() == nil {
				l.cfg.Logger.Warn("the doorbell topic cannot be read; the relay polls without it", "topic", l.cfg.Topic, "error", err)
			}
			return false
		}
	}
	want := map[int32]bool{}
	for _, b := range l.Listening() {
		want[int32(murmur2.Partition(l.cfg.ringKey(b), n))] = true
	}
	l.mu.Lock()
	l.partitions, l.missing = n, false
	since := l.since.Add(-outbox.DoorbellLookBack)
	l.since = time.Time{}
	var add []int32
	remove := map[string][]int32{}
	for p := range want {
		if !l.fetching[p] {
			add = append(add, p)
		}
	}
	for p := range l.fetching {
		if !want[p] {
			remove[l.cfg.Topic] = append(remove[l.cfg.Topic], p)
		}
	}
	// Only this goroutine reconciles: the lock guards what Listen and
	// Close read, and is not held across the offset lookups.
	l.fetching = want
	l.mu.Unlock()
	if len(remove) > 0 {
		l.cl.RemoveConsumePartitions(remove)
	}
	if len(add) > 0 {
		l.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{l.cfg.Topic: l.startOffsets(ctx, add, since)})
	}
	return true
}

// startOffsets returns where each partition's fetch starts: at its first
// ring stamped at or after since, or at its end when there is none. The
// end is listed before the ring by time, so a ring produced between the two
// lookups is found by the second; the client's own AfterMilli lists them
// the other way round, and such a ring fell between its by-time answer (no
// ring yet) and the end it then took. A failed lookup falls back to
// AfterMilli: what that misses costs a poll's wait, as a lost ring does.
func (l *Listener) startOffsets(ctx context.Context, partitions []int32, since time.Time) map[int32]kgo.Offset {
	starts := make(map[int32]kgo.Offset, len(partitions))
	ends, err := l.listOffsets(ctx, partitions, -1)
	var byTime map[int32]int64
	if err == nil {
		byTime, err = l.listOffsets(ctx, partitions, since.UnixMilli())
	}
	for _, p := range partitions {
		end, ok := ends[p]
		at, found := byTime[p]
		switch {
		case err != nil || !ok || !found:
			starts[p] = kgo.NewOffset().AfterMilli(since.UnixMilli())
		case at >= 0 && at < end:
			starts[p] = kgo.NewOffset().At(at)
		default:
			starts[p] = kgo.NewOffset().At(end)
		}
	}
	if err != nil && ctx.Err() == nil {
		l.cfg.Logger.Debug("listing the doorbell's offsets failed; its fetch starts from the client's lookup", "topic", l.cfg.Topic, "error", err)
	}
	return starts
}

// listOffsets lists the offset of each partition at timestamp (-1: the
// end; otherwise the first record stamped at or after it, -1 when none is).
// A partition the answer leaves out or fails is left out.
func (l *Listener) listOffsets(ctx context.Context, partitions []int32, timestamp int64) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = l.cfg.Topic
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, timestamp
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, l.cl)
	if err != nil {
		return nil, err
	}
	offsets := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == l.cfg.Topic && kerr.ErrorForCode(rp.ErrorCode) == nil {
				offsets[rp.Partition] = rp.Offset
			}
		}
	}
	return offsets, nil
}

// partitionCount asks the brokers for the topic's partitions.
func (l *Listener) partitionCount(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(l.cfg.Topic)
	req.Topics = append(req.Topics, t)
	// The topic is the operator's: a listener never creates it.
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, l.cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 {
		return 0, fmt.Errorf("outboxkafka: metadata of %s listed %d topics", l.cfg.Topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return 0, fmt.Errorf("outboxkafka: doorbell topic %s: %w", l.cfg.Topic, err)
	}
	if len(resp.Topics[0].Partitions) == 0 {
		return 0, fmt.Errorf("outboxkafka: doorbell topic %s has no partition", l.cfg.Topic)
	}
	return len(resp.Topics[0].Partitions), nil
}

// fetch delivers the rings of every fetch until ctx ends.
func (l *Listener) fetch(ctx context.Context) {
	for {
		fs := l.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			// The publisher closed: nothing more to subscribe to.
			l.stop()
			return
		}
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				l.cfg.Logger.Warn("fetching the doorbell failed; the relay polls meanwhile", "topic", topic, "partition", p, "error", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if b, ok := l.cfg.ringBucket(r.Key); ok {
				l.Deliver(b)
			}
		})
	}
}
