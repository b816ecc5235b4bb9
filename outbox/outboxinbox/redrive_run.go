package outboxinbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// redrive is one run of Redrive.
type redrive struct {
	cfg   RedriveConfig
	admin *kgo.Client
	plan  []redrivePartition
	// routes counts by (dead-letter topic, target topic).
	routes map[[2]string]*RedriveRoute
	// targets holds the target topics known to exist.
	targets map[string]bool
	// stopped names the records that named no target.
	stopped []string
}

// run reads every planned range and, under Apply, produces and commits as
// it goes.
func (r *redrive) run(ctx context.Context) error {
	offsets := map[string]map[int32]kgo.Offset{}
	pending := map[topicPartition]int64{} // end offset of each partition still read
	for _, p := range r.plan {
		if p.from >= p.end {
			continue
		}
		if offsets[p.topic] == nil {
			offsets[p.topic] = map[int32]kgo.Offset{}
		}
		offsets[p.topic][p.partition] = kgo.NewOffset().At(p.from)
		pending[topicPartition{p.topic, p.partition}] = p.end
	}
	if len(pending) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(r.cfg.ClientOpts), kgo.ConsumePartitions(offsets), kgo.RecordPartitioner(redrivePartitioner()))...)
	if err != nil {
		return fmt.Errorf("outboxinbox: redrive: create Kafka client: %w", err)
	}
	defer cl.Close()
	for len(pending) > 0 {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.Idle)
		fetches := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fetchError(fetches); err != nil {
			return fmt.Errorf("outboxinbox: redrive: read dead letters: %w", err)
		}
		if fetches.NumRecords() == 0 {
			return r.short(pending)
		}
		if err := r.batch(ctx, cl, fetches, pending); err != nil {
			return err
		}
	}
	if len(r.stopped) > 0 {
		return fmt.Errorf("outboxinbox: redrive: %d dead letter(s) name no topic to go back to (no %s header, and the dead-letter topic's name does not end in %s); their partitions stop there: %s",
			len(r.stopped), HeaderSource, deadLetterSuffix, strings.Join(r.stopped, ", "))
	}
	return nil
}

// target returns the topic and partition rec goes to (partition -1: by
// its key), or ok false when it names none.
func (r *redrive) target(rec *kgo.Record) (topic string, partition int32, ok bool) {
	if r.cfg.To != "" {
		return r.cfg.To, -1, true
	}
	return redriveTarget(rec.Topic, rec.Headers)
}

// fetchError returns the first error of a poll that is not the end of its
// wait.
func fetchError(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
			return fmt.Errorf("%s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
	}
	return nil
}

// short reports the partitions whose records below their high watermark
// did not arrive within Idle.
func (r *redrive) short(pending map[topicPartition]int64) error {
	var names []string
	for _, tp := range slices.SortedFunc(maps.Keys(pending), func(a, b topicPartition) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	}) {
		names = append(names, fmt.Sprintf("%s/%d (up to offset %d)", tp.topic, tp.partition, pending[tp]))
	}
	return fmt.Errorf("outboxinbox: redrive: no record arrived for %s from %s; run again to go on", r.cfg.Idle, strings.Join(names, ", "))
}

// batch counts, and under Apply produces and commits, one poll's records.
func (r *redrive) batch(ctx context.Context, cl *kgo.Client, fetches kgo.Fetches, pending map[topicPartition]int64) error {
	var (
		out  []*kgo.Record
		from []*kgo.Record // the dead letter of each record in out
		next = map[topicPartition]int64{}
	)
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		tp := topicPartition{p.Topic, p.Partition}
		for _, rec := range p.Records {
			end, reading := pending[tp]
			if !reading || rec.Offset >= end {
				break
			}
			topic, partition, ok := r.target(rec)
			r.route(rec.Topic, topic).Records++
			if !ok {
				r.stopped = append(r.stopped, fmt.Sprintf("%s/%d@%d", rec.Topic, rec.Partition, rec.Offset))
				delete(pending, tp)
				break
			}
			if rec.Offset+1 >= end {
				delete(pending, tp)
			}
			if !r.cfg.Apply {
				continue
			}
			o := &kgo.Record{Topic: topic, Partition: partition, Key: rec.Key, Value: rec.Value}
			for _, h := range rec.Headers {
				if !isDeadLetterHeader(h.Key) {
					o.Headers = append(o.Headers, h)
				}
			}
			out, from = append(out, o), append(from, rec)
			next[tp] = rec.Offset + 1
		}
	})
	if len(out) == 0 {
		return nil
	}
	if err := r.checkTargets(ctx, out); err != nil {
		return err
	}
	results := cl.ProduceSync(ctx, out...)
	failed := map[topicPartition]bool{}
	var firstErr error
	for i, res := range results {
		tp := topicPartition{from[i].Topic, from[i].Partition}
		switch {
		case res.Err != nil:
			failed[tp] = true
			firstErr = cmp.Or(firstErr, fmt.Errorf("outboxinbox: redrive: produce %s/%d@%d to %s: %w", from[i].Topic, from[i].Partition, from[i].Offset, out[i].Topic, res.Err))
		case !failed[tp]:
			r.route(from[i].Topic, out[i].Topic).Produced++
			next[tp] = from[i].Offset + 1
		}
	}
	for tp := range failed {
		// Committed up to the first record not acknowledged; the rest of
		// the partition waits for the next run.
		delete(pending, tp)
		next[tp] = firstFailed(results, from, tp)
	}
	if err := r.commit(ctx, next); err != nil {
		return err
	}
	return firstErr
}

// firstFailed returns the offset of tp's first dead letter whose produce
// failed.
func firstFailed(results kgo.ProduceResults, from []*kgo.Record, tp topicPartition) int64 {
	for i, res := range results {
		if res.Err != nil && from[i].Topic == tp.topic && from[i].Partition == tp.partition {
			return from[i].Offset
		}
	}
	return -1
}

// checkTargets makes sure every target topic of out exists before any
// record is produced: a missing one would stall the producer.
func (r *redrive) checkTargets(ctx context.Context, out []*kgo.Record) error {
	var ask []string
	for _, o := range out {
		if !r.targets[o.Topic] && !slices.Contains(ask, o.Topic) {
			ask = append(ask, o.Topic)
		}
	}
	if len(ask) == 0 {
		return nil
	}
	resp, err := topicMetadata(ctx, r.admin, ask)
	if err != nil {
		return fmt.Errorf("outboxinbox: redrive: look up target topics: %w", err)
	}
	if r.targets == nil {
		r.targets = map[string]bool{}
	}
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("outboxinbox: redrive: topic %s, where dead letters go back to: %w; nothing was produced from this batch", name, err)
		}
		r.targets[name] = true
	}
	return nil
}

// commit commits next for the group as a client outside the group does
// (generation -1): refused while the group has members.
func (r *redrive) commit(ctx context.Context, next map[topicPartition]int64) error {
	ids, names := map[string][16]byte{}, map[[16]byte]string{}
	for _, p := range r.plan {
		ids[p.topic], names[p.topicID] = p.topicID, p.topic
	}
	group := r.cfg.Group
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	byTopic := map[string]*kmsg.OffsetCommitRequestTopic{}
	for tp, off := range next {
		if off < 0 {
			continue
		}
		t := byTopic[tp.topic]
		if t == nil {
			nt := kmsg.NewOffsetCommitRequestTopic()
			nt.Topic, nt.TopicID = tp.topic, ids[tp.topic] // by name before v10, by id since
			t = &nt
			byTopic[tp.topic] = t
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.partition, off, -1
		t.Partitions = append(t.Partitions, p)
	}
	for _, name := range slices.Sorted(maps.Keys(byTopic)) {
		req.Topics = append(req.Topics, *byTopic[name])
	}
	if len(req.Topics) == 0 {
		return nil
	}
	resp, err := req.RequestWith(ctx, r.admin)
	if err != nil {
		return fmt.Errorf("outboxinbox: redrive: commit the re-driven offsets for group %s: %w", group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("outboxinbox: redrive: commit %s/%d for group %s (the records were produced; a run again produces them again, and the inbox skips them as duplicates): %w; the group must have no members",
					cmp.Or(t.Topic, names[t.TopicID]), p.Partition, group, err)
			}
		}
	}
	return nil
}

// route returns the counts of (dead-letter topic, topic).
func (r *redrive) route(dlq, topic string) *RedriveRoute {
	k := [2]string{dlq, topic}
	if r.routes[k] == nil {
		r.routes[k] = &RedriveRoute{DeadLetterTopic: dlq, Topic: topic}
	}
	return r.routes[k]
}

// report returns the counts, with a zero row (no target) for every
// dead-letter topic with nothing to re-drive.
func (r *redrive) report() RedriveReport {
	seen := map[string]bool{}
	for k := range r.routes {
		seen[k[0]] = true
	}
	for _, p := range r.plan {
		if !seen[p.topic] {
			seen[p.topic] = true
			r.route(p.topic, "")
		}
	}
	rep := RedriveReport{Applied: r.cfg.Apply}
	for _, k := range slices.SortedFunc(maps.Keys(r.routes), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	}) {
		rep.Routes = append(rep.Routes, *r.routes[k])
	}
	return rep
}
