package outboxinbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failedRecord is the record a partition stopped at: its failed runs as
// this process knows them, and whether its failure policy already took it
// (the dead-letter record produced, the callback done) while its marker
// write failed, so a retry writes the marker without taking it again.
type failedRecord struct {
	offset   int64
	attempts int
	taken    bool
}

// settle handles a failed run of r (or a delivery whose marker counted
// MaxAttempts failed runs already): it counts the failure and, at
// MaxAttempts, hands r to the failure policy. It reports whether the
// partition moves past r, and returns an error that will not heal.
func (c *Consumer) settle(ctx context.Context, r *kgo.Record, rec Record, res result) (bool, error) {
	var (
		n     int
		cause = res.err
	)
	if res.exhausted {
		n = c.remember(r, func(f *failedRecord) { f.attempts = max(f.attempts, res.prior.attempts) })
		cause = fmt.Errorf("outboxinbox: %d failed runs counted on the marker; the last: %s", res.prior.attempts, res.prior.lastError)
	} else {
		n = c.countFailure(ctx, r, rec, res)
	}
	if n < c.cfg.MaxAttempts {
		c.cfg.Logger.ErrorContext(ctx, "outboxinbox: record failed; its partition waits and runs it again",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "attempt", n, "max_attempts", c.cfg.MaxAttempts, "error", cause)
		return false, nil
	}
	if err := c.giveUp(ctx, r, rec, n, cause); err != nil {
		if unhealable(err) {
			return false, fmt.Errorf("outboxinbox: group %s: %w", c.cfg.Group, err)
		}
		c.cfg.Logger.ErrorContext(ctx, "outboxinbox: record failed for the last time and its failure policy failed too; its partition waits and runs it again",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "error", cause, "policy_error", err)
		return false, nil
	}
	c.cfg.Logger.WarnContext(ctx, "outboxinbox: record dead-lettered after its last attempt; its partition moves on",
		"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "attempts", n, "policy", c.cfg.OnFailure.String(), "error", cause)
	return true, nil
}

// countFailure counts a failed run of r, on its marker when it has one of
// its own, and returns its failed runs so far.
func (c *Consumer) countFailure(ctx context.Context, r *kgo.Record, rec Record, res result) int {
	n := c.remember(r, func(f *failedRecord) { f.attempts++ })
	if !res.hasID || errors.Is(res.err, ErrPayloadMismatch) {
		return n
	}
	// Counted also when Run's ctx ends right after the run: a graceful
	// stop must not lose the count a restart continues.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	stored, err := c.cfg.Inbox.countFailure(cctx, rec, res.id, res.prior, res.err)
	if err != nil {
		c.cfg.Logger.WarnContext(ctx, "outboxinbox: failed run not counted on the marker; counted in this process only", "error", err)
		return n
	}
	return c.remember(r, func(f *failedRecord) { f.attempts = max(f.attempts, stored) })
}

// remember updates what this process knows of r, the failed record of its
// partition, and returns its failed runs.
func (c *Consumer) remember(r *kgo.Record, update func(*failedRecord)) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	tp := topicPartition{r.Topic, r.Partition}
	f := c.attempts[tp]
	if f.offset != r.Offset {
		f = failedRecord{offset: r.Offset}
	}
	update(&f)
	c.attempts[tp] = f
	return f.attempts
}

// succeeded forgets the failed runs of r's partition.
func (c *Consumer) succeeded(r *kgo.Record) {
	c.mu.Lock()
	delete(c.attempts, topicPartition{r.Topic, r.Partition})
	c.mu.Unlock()
}

// giveUp applies the failure policy to rec, unless this process did
// already, then records on its marker that it was dead-lettered. A crash
// between the two, or a marker write failing in every later try of this
// process, lets the policy take the record once more: dead letters are
// delivered at least once, and HeaderConsumer with HeaderSource identify a
// copy.
func (c *Consumer) giveUp(ctx context.Context, r *kgo.Record, rec Record, attempts int, cause error) error {
	taken := false
	c.remember(r, func(f *failedRecord) { taken = f.taken })
	if !taken {
		if err := c.take(ctx, rec, attempts, cause); err != nil {
			return err
		}
		c.remember(r, func(f *failedRecord) { f.taken = true })
	}
	if err := c.cfg.Inbox.markDeadLettered(ctx, rec, attempts, cause); err != nil {
		return err
	}
	c.cfg.Inbox.hooks.outcome(DeadLettered)
	return nil
}

// maxErrorHeader bounds the error a dead-letter record carries, so a long
// error cannot make the record too large for its topic.
const maxErrorHeader = 1024

// take hands rec to the failure policy.
func (c *Consumer) take(ctx context.Context, rec Record, attempts int, cause error) error {
	switch c.cfg.OnFailure {
	case DeadLetter:
		topic := c.deadLetterTopic(rec.Topic)
		dl := &kgo.Record{Topic: topic, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}
		for _, h := range rec.Headers {
			if !isDeadLetterHeader(h.Key) {
				dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
		}
		dl.Headers = append(dl.Headers,
			kgo.RecordHeader{Key: HeaderError, Value: []byte(truncate(cause.Error(), maxErrorHeader))},
			kgo.RecordHeader{Key: HeaderAttempts, Value: []byte(strconv.Itoa(attempts))},
			kgo.RecordHeader{Key: HeaderSource, Value: []byte(sourceOf(rec))},
			kgo.RecordHeader{Key: HeaderConsumer, Value: []byte(c.cfg.Inbox.opts.Consumer)})
		if err := c.cl.ProduceSync(ctx, dl).FirstErr(); err != nil {
			return fmt.Errorf("outboxinbox: produce %s to dead-letter topic %s: %w", sourceOf(rec), topic, err)
		}
	case Callback:
		if err := c.cfg.FailureCallback(ctx, rec, cause); err != nil {
			return fmt.Errorf("outboxinbox: failure callback for %s: %w", sourceOf(rec), err)
		}
	}
	return nil
}

// unhealable reports an error that retrying the record does not cure: the
// consumer stops instead of counting it against the record (which would
// dead-letter every record in turn).
func unhealable(err error) bool {
	if isFatal(err) {
		return true
	}
	for _, e := range []error{kerr.UnknownTopicOrPartition, kerr.InvalidTopicException, kerr.MessageTooLarge, kerr.RecordListTooLarge} {
		if errors.Is(err, e) {
			return true
		}
	}
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException", "MissingAuthenticationTokenException":
			return true
		}
	}
	return false
}

// TopicError reports a topic the consumer needs that the cluster does not
// have or will not show it: a consumed topic, or the dead-letter topic of
// one.
type TopicError struct {
	// Group is the consumer group.
	Group string
	// Topic is the missing topic.
	Topic string
	// DeadLetterFor is the consumed topic Topic is the dead-letter topic
	// of; empty for a consumed topic.
	DeadLetterFor string
	// Err is the broker's error (kerr.UnknownTopicOrPartition, an
	// authorization failure).
	Err error
}

// Error implements error.
func (e *TopicError) Error() string {
	what := "topic " + e.Topic
	fix := "create it, or correct ConsumerConfig.Topics"
	if e.DeadLetterFor != "" {
		what = fmt.Sprintf("dead-letter topic %s (of %s)", e.Topic, e.DeadLetterFor)
		fix = fmt.Sprintf("create it (kafka-topics.sh --create --topic %s, with the partitions of %s; spillway run --serve --topics %s locally), "+
			"set ConsumerConfig.DeadLetterTopic to a topic that exists, or choose another OnFailure policy; without it a poison record would stop its partition for good", e.Topic, e.DeadLetterFor, e.Topic)
	}
	if !errors.Is(e.Err, kerr.UnknownTopicOrPartition) {
		fix = "check the consumer's permissions on it"
	}
	return fmt.Sprintf("outboxinbox: group %s: %s: %v: %s", e.Group, what, e.Err, fix)
}

// Unwrap returns the broker's error.
func (e *TopicError) Unwrap() error { return e.Err }

// isDeadLetterHeader reports the headers a dead-lettering adds, which a
// dead-letter record does not copy from its record (a re-driven record
// failing again) and a re-drive drops.
func isDeadLetterHeader(key string) bool {
	switch key {
	case HeaderError, HeaderAttempts, HeaderSource, HeaderConsumer:
		return true
	}
	return false
}
