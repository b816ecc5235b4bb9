package outboxinbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Re-drive defaults.
const (
	// DefaultRedriveGroup is the consumer group whose committed offsets
	// say how far each dead-letter partition was re-driven.
	DefaultRedriveGroup = "spillway-redrive"
	// DefaultRedriveIdle is how long Redrive waits for a record it knows
	// is there before it reports the partition short.
	DefaultRedriveIdle = 10 * time.Second
)

// RedriveConfig configures Redrive.
type RedriveConfig struct {
	// ClientOpts connect to the cluster: seed brokers, TLS, SASL. Redrive
	// adds its own consumer and producer options. Required.
	ClientOpts []kgo.Opt
	// Topics are the dead-letter topics to re-drive. Default every topic
	// of the cluster whose name ends in ".dlq".
	Topics []string
	// To, when set, sends the records of the one topic Topics names to
	// this topic instead of the topic each was dead-lettered from, each to
	// its key's partition there (see Redrive). Default: each record's own
	// source topic.
	To string
	// Group is the consumer group recording how far each dead-letter
	// partition was re-driven: a run starts at its committed offsets (the
	// log start when it has none) and, when Apply is set, commits past
	// every record it produced, so running again re-drives only the dead
	// letters added since. It must have no members. Default
	// DefaultRedriveGroup.
	Group string
	// Apply produces and commits. Without it Redrive reads and counts
	// only: a dry run.
	Apply bool
	// Idle bounds the wait for a record below the high watermark taken at
	// the start. Default DefaultRedriveIdle.
	Idle time.Duration
	// Logger receives progress. Default slog.Default().
	Logger *slog.Logger
}

// RedriveReport is what a re-drive found and did, per dead-letter topic
// and target.
type RedriveReport struct {
	// Routes are the (dead-letter topic, target topic) pairs with their
	// records, sorted.
	Routes []RedriveRoute
	// Applied says whether the records were produced and the offsets
	// committed (Apply), or only counted.
	Applied bool
}

// RedriveRoute counts the dead letters of one dead-letter topic going back
// to one topic.
type RedriveRoute struct {
	// DeadLetterTopic is where the records are.
	DeadLetterTopic string `json:"deadLetterTopic"`
	// Topic is where they go back to: RedriveConfig.To when set, else the
	// topic in their HeaderSource, else the dead-letter topic's name
	// without ".dlq"; empty when none names one (such records are not
	// re-driven), and on the one row of a dead-letter topic with nothing
	// to re-drive.
	Topic string `json:"topic"`
	// Records counts the records found after the group's committed
	// offsets; Produced those produced (Apply).
	Records  int `json:"records"`
	Produced int `json:"produced"`
}

// Redrive sends the records of dead-letter topics back to the topics they
// were dead-lettered from, so their consumer runs them again (after the
// operator fixed the cause): the inbox lets a dead-lettered message apply
// once more from another delivery, and every other consumer group that
// applied it skips it as a duplicate.
//
// Each record goes to the partition it was dead-lettered from (its
// HeaderSource), so records of one key keep their order. With To, it goes
// to its key's partition of To, where Kafka's default partitioner (and
// the relay) puts the key's records: a key's re-driven records then share
// one partition with each other and with the key's records on To, whatever
// To's partition count (a source partition To happens to have would hold
// other keys' records, and a key's own would be elsewhere). A record
// without a key goes where the default partitioner puts one. Each keeps its
// key, value and headers except those the dead-lettering added
// (HeaderError, HeaderAttempts, HeaderSource, HeaderConsumer); its
// timestamp is the time of the re-drive. A record naming no target stops
// its partition there (the records after it are not re-driven, so order
// holds) and Redrive returns an error naming it. Offsets are committed for
// the group once the records before them were acknowledged; an
// interruption between the two re-drives those records again on the next
// run, which the inbox skips as duplicates.
func Redrive(ctx context.Context, cfg RedriveConfig) (RedriveReport, error) {
	if len(cfg.ClientOpts) == 0 {
		return RedriveReport{}, errors.New("outboxinbox: redrive: no client options (seed brokers)")
	}
	if err := checkRedriveTo(cfg); err != nil {
		return RedriveReport{}, err
	}
	cfg.Group = cmp.Or(cfg.Group, DefaultRedriveGroup)
	cfg.Idle = cmp.Or(cfg.Idle, DefaultRedriveIdle)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	admin, err := kgo.NewClient(cfg.ClientOpts...)
	if err != nil {
		return RedriveReport{}, fmt.Errorf("outboxinbox: redrive: create Kafka client: %w", err)
	}
	defer admin.Close()
	plan, err := planRedrive(ctx, admin, cfg)
	if err != nil {
		return RedriveReport{}, err
	}
	r := &redrive{cfg: cfg, admin: admin, plan: plan, routes: map[[2]string]*RedriveRoute{}}
	err = r.run(ctx)
	return r.report(), err
}

// redrivePartition is one dead-letter partition's range to re-drive:
// [from, end).
type redrivePartition struct {
	topic     string
	topicID   [16]byte // what OffsetCommit v10+ names a topic by
	partition int32
	from, end int64
}

// planRedrive lists the dead-letter partitions and the offsets to re-drive
// from and to.
func planRedrive(ctx context.Context, cl *kgo.Client, cfg RedriveConfig) ([]redrivePartition, error) {
	parts, ids, err := deadLetterPartitions(ctx, cl, cfg.Topics)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, nil
	}
	start, err := listOffsets(ctx, cl, parts, -2)
	if err != nil {
		return nil, err
	}
	end, err := listOffsets(ctx, cl, parts, -1)
	if err != nil {
		return nil, err
	}
	committed, err := fetchCommitted(ctx, cl, cfg.Group, parts)
	if err != nil {
		return nil, err
	}
	var plan []redrivePartition
	for _, tp := range parts {
		from := start[tp]
		if c, ok := committed[tp]; ok {
			from = max(from, c)
		}
		plan = append(plan, redrivePartition{topic: tp.topic, topicID: ids[tp.topic], partition: tp.partition, from: from, end: end[tp]})
	}
	return plan, nil
}

// deadLetterPartitions returns the partitions of the named topics (an
// unknown one is an error), or of every topic ending in ".dlq", and the
// topics' ids.
func deadLetterPartitions(ctx context.Context, cl *kgo.Client, topics []string) ([]topicPartition, map[string][16]byte, error) {
	resp, err := topicMetadata(ctx, cl, topics)
	if err != nil {
		return nil, nil, fmt.Errorf("outboxinbox: redrive: list topics: %w", err)
	}
	var parts []topicPartition
	ids := map[string][16]byte{}
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if len(topics) == 0 && (!strings.HasSuffix(name, deadLetterSuffix) || t.IsInternal) {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, nil, fmt.Errorf("outboxinbox: redrive: dead-letter topic %s: %w", name, err)
		}
		ids[name] = t.TopicID
		for _, p := range t.Partitions {
			parts = append(parts, topicPartition{name, p.Partition})
		}
	}
	slices.SortFunc(parts, func(a, b topicPartition) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return parts, ids, nil
}

// listOffsets returns each partition's log start (at -2) or high
// watermark (at -1).
func listOffsets(ctx context.Context, cl *kgo.Client, parts []topicPartition, at int64) (map[topicPartition]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]*kmsg.ListOffsetsRequestTopic{}
	for _, tp := range parts {
		rt := byTopic[tp.topic]
		if rt == nil {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = tp.topic
			rt = &t
			byTopic[tp.topic] = rt
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp = tp.partition, at
		rt.Partitions = append(rt.Partitions, p)
	}
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		req.Topics = append(req.Topics, *byTopic[t])
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("outboxinbox: redrive: list offsets: %w", err)
	}
	out := map[topicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("outboxinbox: redrive: list offsets of %s/%d: %w", t.Topic, p.Partition, err)
			}
			out[topicPartition{t.Topic, p.Partition}] = p.Offset
		}
	}
	return out, nil
}

// fetchCommitted returns the group's committed offsets of parts (absent:
// none).
func fetchCommitted(ctx context.Context, cl *kgo.Client, group string, parts []topicPartition) (map[topicPartition]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("outboxinbox: redrive: read the committed offsets of group %s: %w", group, err)
	}
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case errors.Is(err, kerr.GroupIDNotFound):
		return nil, nil // never committed: some brokers say so
	case err != nil:
		return nil, fmt.Errorf("outboxinbox: redrive: read the committed offsets of group %s: %w", group, err)
	}
	want := map[topicPartition]bool{}
	for _, tp := range parts {
		want[tp] = true
	}
	out := map[topicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			if want[tp] && p.ErrorCode == 0 && p.Offset >= 0 {
				out[tp] = p.Offset
			}
		}
	}
	return out, nil
}

// checkRedriveTo refuses a To that does not name one other topic for one
// dead-letter topic.
func checkRedriveTo(cfg RedriveConfig) error {
	switch {
	case cfg.To == "":
		return nil
	case len(cfg.Topics) != 1:
		return fmt.Errorf("outboxinbox: redrive: To %s needs exactly one dead-letter topic in Topics, got %d", cfg.To, len(cfg.Topics))
	case cfg.To == cfg.Topics[0]:
		return fmt.Errorf("outboxinbox: redrive: To %s is the dead-letter topic itself", cfg.To)
	}
	return nil
}

// redriveTarget returns the topic and partition a dead letter goes back to
// (partition -1: by its key), or ok false when it names none.
func redriveTarget(deadLetterTopic string, hs []kgo.RecordHeader) (topic string, partition int32, ok bool) {
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key != HeaderSource {
			continue
		}
		src := string(hs[i].Value)
		slash, at := strings.LastIndexByte(src, '/'), strings.LastIndexByte(src, '@')
		if slash <= 0 || at < slash {
			break
		}
		p, err := strconv.ParseInt(src[slash+1:at], 10, 32)
		if err != nil || p < 0 {
			break
		}
		return src[:slash], int32(p), true
	}
	if t, found := strings.CutSuffix(deadLetterTopic, deadLetterSuffix); found && t != "" {
		return t, -1, true
	}
	return "", 0, false
}

// redrivePartitioner sends a record to the partition redriveTarget named,
// else by its key as Kafka's default partitioner does.
func redrivePartitioner() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		byKey := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
		return func(r *kgo.Record, n int) int {
			if r.Partition >= 0 && int(r.Partition) < n {
				return int(r.Partition)
			}
			return byKey.Partition(r, n)
		}
	})
}
