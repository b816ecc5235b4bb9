package outboxinbox

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/spillway-dev/spillway/outbox"
)

// LambdaHandler applies the batches an AWS Lambda event source mapping for
// Amazon MSK or self-managed Apache Kafka delivers (aws-lambda-go's
// events.KafkaEvent), exactly once per message.
//
// A batch may hold records of several partitions. Each partition's records
// are processed one after the other in offset order; partitions side by
// side. The first failed record stops its partition (its later records are
// not touched, so per-key order holds) and Handle returns a *BatchError
// once the other partitions are done. Lambda then retries the batch: by
// default until it succeeds or its records expire, per the event source
// mapping's MaximumRetryAttempts and MaximumRecordAgeInSeconds, and it
// commits the batch's offsets only after a successful invocation. On the
// retry, the records applied the first time are skipped as duplicates (one
// consistent read each, without running the handler), so a retry never
// doubles an effect. A record whose key or value is not base64 fails its
// partition the same way and is counted in ConsumeFailures. Leave
// BisectBatchOnFunctionError off when order matters: a split batch can
// hand a partition's later records to an invocation before its failed one
// succeeded.
type LambdaHandler struct {
	inbox   *Inbox
	handler Handler
	// Metrics, when set, is flushed to MetricsOutput after each
	// invocation: an outboxobs/emf.InboxRecorder that is one of the
	// inbox's Options.Hooks. Default none.
	Metrics Flusher
	// MetricsOutput receives Metrics' lines. Default os.Stdout, where
	// Lambda's log capture turns EMF into metrics.
	MetricsOutput io.Writer
}

// NewLambdaHandler returns a handler that applies records with h through in.
func NewLambdaHandler(in *Inbox, h Handler) (*LambdaHandler, error) {
	switch {
	case in == nil:
		return nil, outbox.Misconfigured("new inbox Lambda handler", "inbox is nil")
	case h == nil:
		return nil, outbox.Misconfigured("new inbox Lambda handler", "handler is nil")
	}
	return &LambdaHandler{inbox: in, handler: h, MetricsOutput: os.Stdout}, nil
}

// BatchError reports the partitions of a batch that stopped at a failed
// record; the records before it got their verdict and are duplicates on
// Lambda's retry.
type BatchError struct {
	// Failures holds the first failed record of each stopped partition, in
	// partition order.
	Failures []RecordError
}

// RecordError is one record's failure.
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

// Error implements error.
func (e *BatchError) Error() string {
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		parts[i] = fmt.Sprintf("%s/%d@%d: %v", f.Topic, f.Partition, f.Offset, f.Err)
	}
	return fmt.Sprintf("outboxinbox: %d partition(s) of the batch stopped at a failed record; Lambda retries the batch and the applied records are skipped as duplicates: %s",
		len(e.Failures), strings.Join(parts, "; "))
}

// Unwrap returns the records' errors.
func (e *BatchError) Unwrap() []error {
	errs := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		errs[i] = f.Err
	}
	return errs
}

// Handle applies the event's records and writes the inbox's metrics. It
// returns nil when every record got a verdict (applied, duplicate or
// skipped), a *BatchError otherwise.
func (l *LambdaHandler) Handle(ctx context.Context, ev events.KafkaEvent) error {
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		failures []RecordError
	)
	for _, key := range slices.Sorted(maps.Keys(ev.Records)) {
		recs := slices.SortedStableFunc(slices.Values(ev.Records[key]), func(a, b events.KafkaRecord) int { return cmp.Compare(a.Offset, b.Offset) })
		wg.Go(func() {
			if f, failed := l.applyPartition(ctx, recs); failed {
				mu.Lock()
				failures = append(failures, f)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if l.Metrics != nil {
		if err := l.Metrics.Flush(l.MetricsOutput, l.inbox.opts.Clock.Now()); err != nil {
			l.inbox.opts.Logger.WarnContext(ctx, "outboxinbox: metrics not written", "error", err)
		}
	}
	if len(failures) == 0 {
		return nil
	}
	slices.SortFunc(failures, func(a, b RecordError) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return &BatchError{Failures: failures}
}

// applyPartition processes one partition's records in order until one
// fails.
func (l *LambdaHandler) applyPartition(ctx context.Context, recs []events.KafkaRecord) (RecordError, bool) {
	for _, kr := range recs {
		rec, err := fromLambda(kr)
		if err != nil {
			// Process never saw the record, yet it fails the invocation.
			l.inbox.hooks.failure(err)
		} else {
			_, err = l.inbox.Process(ctx, rec, l.handler)
		}
		if err != nil {
			l.inbox.opts.Logger.ErrorContext(ctx, "outboxinbox: record failed; its partition stops here until Lambda retries the batch",
				"topic", kr.Topic, "partition", kr.Partition, "offset", kr.Offset, "error", err)
			return RecordError{Topic: kr.Topic, Partition: int32(kr.Partition), Offset: kr.Offset, Err: err}, true
		}
	}
	return RecordError{}, false
}

// fromLambda converts a record of the event: key and value are base64,
// each header a one-entry object of byte arrays.
func fromLambda(kr events.KafkaRecord) (Record, error) {
	key, err := base64.StdEncoding.DecodeString(kr.Key)
	if err != nil {
		return Record{}, fmt.Errorf("outboxinbox: record %s/%d@%d: key is not base64: %w", kr.Topic, kr.Partition, kr.Offset, err)
	}
	value, err := base64.StdEncoding.DecodeString(kr.Value)
	if err != nil {
		return Record{}, fmt.Errorf("outboxinbox: record %s/%d@%d: value is not base64: %w", kr.Topic, kr.Partition, kr.Offset, err)
	}
	var hs []outbox.Header
	for _, h := range kr.Headers {
		for _, k := range slices.Sorted(maps.Keys(h)) {
			hs = append(hs, outbox.Header{Key: k, Value: []byte(h[k])})
		}
	}
	return Record{
		Topic: kr.Topic, Partition: int32(kr.Partition), Offset: kr.Offset,
		Key: key, Value: value, Headers: hs, Timestamp: kr.Timestamp.Time,
	}, nil
}
