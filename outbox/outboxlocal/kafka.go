package outboxlocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// Kafka defaults.
const (
	// DefaultPartitions is the partition count of topics created here.
	DefaultPartitions = 3
	// DefaultConsumeTimeout bounds outboxtest's Consume and ConsumeAll.
	DefaultConsumeTimeout = 15 * time.Second
)

// KafkaConfig configures StartKafka.
type KafkaConfig struct {
	// Topics are created at start (see Kafka.Topic for their names).
	Topics []string
	// Partitions per topic; DefaultPartitions when zero.
	Partitions int32
	// Brokers is the number of embedded brokers; 1 when zero.
	Brokers int
	// Endpoint lists external seed brokers, comma-separated; by default
	// SPILLWAY_KAFKA_BROKERS when set, else the embedded cluster.
	Endpoint string
	// IgnoreEnvironment ignores SPILLWAY_KAFKA_BROKERS.
	IgnoreEnvironment bool
	// InMemory connects the embedded cluster and its clients over an
	// in-memory network (kfake.VirtualNetwork) instead of loopback sockets,
	// the form a testing/synctest bubble needs; it implies
	// IgnoreEnvironment. Clients must start from ClientOpts, which carries
	// the dialer.
	InMemory bool
	// RoundTrip delays every produce and fetch request the embedded
	// cluster answers (by default none): requests on one connection wait
	// in turn, as a broker answers a connection's requests in order, while
	// other connections' go on. StartKafka refuses it with external
	// brokers.
	RoundTrip RoundTrip
}

// Kafka is a Kafka cluster for tests and the local mode: an in-process
// kfake cluster on 127.0.0.1, or external brokers.
type Kafka struct {
	// Brokers are the seed broker addresses.
	Brokers []string
	// Cluster is the embedded cluster, for fault injection with ControlKey
	// and Fault; nil for external brokers.
	Cluster *kfake.Cluster
	// External reports external brokers: topics get unique names (Topic)
	// and Close deletes the topics created here.
	External bool

	partitions int32
	suffix     string
	network    *kfake.VirtualNetwork // nil on loopback
	admin      *kgo.Client

	created created // topics to delete at Close (external only)
}

// TestClientOpts are the client options tests need against kfake: short
// metadata refresh and retry backoff, without which each injected retriable
// error costs about five seconds, and a short fetch wait.
func TestClientOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}
}

// StartKafka starts an embedded cluster, or connects to external brokers,
// and creates the configured topics. Close releases it.
func StartKafka(ctx context.Context, cfg KafkaConfig) (*Kafka, error) {
	k := &Kafka{partitions: cfg.Partitions}
	if k.partitions <= 0 {
		k.partitions = DefaultPartitions
	}
	endpoint := cfg.Endpoint
	if endpoint == "" && !cfg.IgnoreEnvironment && !cfg.InMemory {
		endpoint = os.Getenv(outboxconf.EnvKafkaBrokers)
	}
	if err := cfg.RoundTrip.validate("Kafka"); err != nil {
		return nil, err
	}
	if endpoint != "" && cfg.RoundTrip.Mean > 0 {
		return nil, fmt.Errorf("outboxlocal: a round trip of %v applies to the embedded Kafka only, not to %s", cfg.RoundTrip, endpoint)
	}
	if endpoint != "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		k.External, k.suffix = true, "-"+hex.EncodeToString(b[:])
		for _, broker := range strings.Split(endpoint, ",") {
			if broker = strings.TrimSpace(broker); broker != "" {
				k.Brokers = append(k.Brokers, broker)
			}
		}
	} else {
		opts := []kfake.Opt{kfake.NumBrokers(max(1, cfg.Brokers))}
		if cfg.InMemory {
			k.network = new(kfake.VirtualNetwork)
			// Every broker needs a port of its own on the virtual network.
			ports := make([]int, max(1, cfg.Brokers))
			for i := range ports {
				ports[i] = 9092 + i
			}
			opts = append(opts, kfake.ListenFn(k.network.Listen), kfake.Ports(ports...))
		}
		cluster, err := kfake.NewCluster(opts...)
		if err != nil {
			return nil, fmt.Errorf("outboxlocal: start embedded Kafka: %w", err)
		}
		k.Cluster, k.Brokers = cluster, cluster.ListenAddrs()
		delayRequests(cluster, cfg.RoundTrip.draws())
	}
	admin, err := kgo.NewClient(k.ClientOpts()...)
	if err != nil {
		k.closeCluster()
		return nil, fmt.Errorf("outboxlocal: Kafka admin client for %v: %w", k.Brokers, err)
	}
	k.admin = admin
	for _, topic := range cfg.Topics {
		if err := k.CreateTopic(ctx, k.Topic(topic), k.partitions); err != nil {
			_ = k.Close()
			return nil, err
		}
	}
	return k, nil
}

// Topic returns the name topic has on this cluster: itself on the embedded
// cluster, made unique on external brokers so concurrent runs do not meet.
// Tests that may run against external brokers produce and consume through
// it.
func (k *Kafka) Topic(topic string) string { return topic + k.suffix }

// ClientOpts returns the seed brokers and TestClientOpts, the base of every
// client of this cluster.
func (k *Kafka) ClientOpts() []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, TestClientOpts()...)
	if k.network != nil {
		opts = append(opts, kgo.Dialer(k.network.DialContext))
	}
	return opts
}

// CreateTopic creates topic (its full name, see Topic) with the given
// number of partitions; an existing topic is left as it is. On external
// brokers Close deletes it.
func (k *Kafka) CreateTopic(ctx context.Context, topic string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = partitions
	rt.ReplicationFactor = -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.admin)
	if err != nil {
		return fmt.Errorf("outboxlocal: create topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("outboxlocal: create topic %s: %w", topic, err)
		}
	}
	if k.External {
		k.created.add(topic)
	}
	return nil
}

// Consume reads topic from the start until it has n records and returns the
// first n it read (per-partition order, partitions interleaved), with
// headers. When ctx ends first it returns the records read so far with an
// error.
func (k *Kafka) Consume(ctx context.Context, topic string, n int) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(append(k.ClientOpts(),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	if err != nil {
		return nil, fmt.Errorf("outboxlocal: consume %s: %w", topic, err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for len(recs) < n {
		fetches := cl.PollFetches(ctx)
		recs = append(recs, fetches.Records()...)
		if ctx.Err() != nil && len(recs) < n {
			return recs, fmt.Errorf("outboxlocal: consumed %d of %d records from %s: %w", len(recs), n, topic, ctx.Err())
		}
	}
	return recs[:n], nil
}

// ConsumeAll returns every record of topic up to the end offsets it had
// when called, partition by partition (partition 0 first), with headers.
// Offsets are assumed contiguous (no transactional control records), as the
// outbox producer writes them.
func (k *Kafka) ConsumeAll(ctx context.Context, topic string) ([]*kgo.Record, error) {
	ends, err := k.endOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	starts := map[int32]kgo.Offset{}
	for p, end := range ends {
		if end > 0 {
			starts[int32(p)] = kgo.NewOffset().AtStart()
		}
	}
	byPartition := make([][]*kgo.Record, len(ends))
	if len(starts) > 0 {
		cl, err := kgo.NewClient(append(k.ClientOpts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}))...)
		if err != nil {
			return nil, fmt.Errorf("outboxlocal: consume %s: %w", topic, err)
		}
		defer cl.Close()
		for remaining := len(starts); remaining > 0; {
			fetches := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("outboxlocal: consume %s to its end offsets %v: %w", topic, ends, ctx.Err())
			}
			for _, r := range fetches.Records() {
				end := ends[r.Partition]
				if r.Offset >= end {
					continue
				}
				byPartition[r.Partition] = append(byPartition[r.Partition], r)
				if r.Offset == end-1 {
					remaining--
				}
			}
		}
	}
	var out []*kgo.Record
	for _, recs := range byPartition {
		out = append(out, recs...)
	}
	return out, nil
}

// endOffsets returns the next offset of every partition of topic.
func (k *Kafka) endOffsets(ctx context.Context, topic string) ([]int64, error) {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, k.admin)
	if err != nil {
		return nil, fmt.Errorf("outboxlocal: metadata of %s: %w", topic, err)
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("outboxlocal: metadata of %s: %d topics in answer", topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("outboxlocal: metadata of %s: %w", topic, err)
	}
	list := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, p := range mresp.Topics[0].Partitions {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p.Partition
		lp.Timestamp = -1 // latest
		lt.Partitions = append(lt.Partitions, lp)
	}
	list.Topics = append(list.Topics, lt)
	lresp, err := list.RequestWith(ctx, k.admin)
	if err != nil {
		return nil, fmt.Errorf("outboxlocal: end offsets of %s: %w", topic, err)
	}
	ends := make([]int64, len(mresp.Topics[0].Partitions))
	for _, t := range lresp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("outboxlocal: end offset of %s[%d]: %w", topic, p.Partition, err)
			}
			if int(p.Partition) < len(ends) {
				ends[p.Partition] = p.Offset
			}
		}
	}
	return ends, nil
}

// Close deletes the topics created on external brokers, or stops the
// embedded cluster. It is safe to call more than once.
func (k *Kafka) Close() error {
	topics, first := k.created.close()
	if !first {
		return nil
	}

	var errs []error
	if len(topics) > 0 && k.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 30_000
		for _, topic := range topics {
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, dt)
			req.TopicNames = append(req.TopicNames, topic)
		}
		resp, err := req.RequestWith(ctx, k.admin)
		if err != nil {
			errs = append(errs, fmt.Errorf("outboxlocal: delete topics %v: %w", topics, err))
		} else {
			for _, t := range resp.Topics {
				if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
					errs = append(errs, fmt.Errorf("outboxlocal: delete topic %s: %w", derefString(t.Topic), err))
				}
			}
		}
	}
	if k.admin != nil {
		k.admin.Close()
	}
	k.closeCluster()
	return errors.Join(errs...)
}

// delayRequests holds every produce and fetch request the cluster takes for
// its drawn delay, then lets the cluster answer it as usual: the time of a
// produce is the leader's wait for its replicas (acks=all), which other
// requests (metadata, producer ids) do not pay. kfake runs control functions one
// at a time on its loop; a sleeping one yields it (SleepControl), so only
// the requests behind it on its connection wait.
func delayRequests(cluster *kfake.Cluster, d *delays) {
	if d == nil {
		return
	}
	hold := func(kmsg.Request) (kmsg.Response, error, bool) {
		wait := d.next()
		cluster.SleepControl(func() { time.Sleep(wait) })
		// Not handled: the control stays installed, and the cluster
		// answers the request.
		return nil, nil, false
	}
	for _, key := range []kmsg.Key{kmsg.Produce, kmsg.Fetch} {
		cluster.ControlKey(int16(key), hold)
	}
}

func (k *Kafka) closeCluster() {
	if k.Cluster != nil {
		k.Cluster.Close()
	}
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
