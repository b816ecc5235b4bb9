package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
)

// The demo's inbox consumer: a consumer group on the demo topics that
// applies each message to the orders in the demo table exactly once. It
// publishes a copy of every injectEvery-th record it reads (marked with
// injectedHeader, so copies are not copied again), so the duplicates it
// skips are never zero. It refuses its refuseAt-th record for good (an
// account closed), so one record is dead-lettered after
// inboxDemoMaxAttempts runs while its partition moves on.
const (
	inboxDemoGroup       = "spillway-run-orders"
	injectEvery          = 10
	injectedHeader       = "x-spillway-run-copy"
	refuseAt             = 5
	inboxDemoMaxAttempts = 2
	inboxDemoDeadLetters = "spillway-run.dlq"
)

// errAccountClosed is the demo's refusal for good.
var errAccountClosed = errors.New("account closed: the demo refuses this record for good")

type inboxDemo struct {
	inbox    *outboxinbox.Inbox
	consumer *outboxinbox.Consumer
	copies   *kgo.Client
	table    string
	injected atomic.Int64
	inFlight atomic.Int64 // copies produced but not acknowledged
	seen     atomic.Int64
	refused  atomic.Pointer[string] // message id of the record refused for good
}

// newInboxDemo builds the consumer on client's table and the brokers.
func newInboxDemo(client outboxinbox.Client, table string, brokers []string, log *slog.Logger) (*inboxDemo, error) {
	in, err := outboxinbox.New(client, outboxinbox.Options{TableName: table, Consumer: "run-orders", Logger: log})
	if err != nil {
		return nil, err
	}
	copies, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	d := &inboxDemo{inbox: in, copies: copies, table: table}
	d.consumer, err = outboxinbox.NewConsumer(outboxinbox.ConsumerConfig{
		Inbox: in, Handler: d.apply, Group: inboxDemoGroup, Topics: demoTopics, Brokers: brokers, Logger: log,
		MaxAttempts: inboxDemoMaxAttempts, ErrorBackoff: 100 * time.Millisecond, DeadLetterTopic: inboxDemoDeadLetters,
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		copies.Close()
		return nil, err
	}
	return d, nil
}

// run consumes until ctx ends, then closes the clients.
func (d *inboxDemo) run(ctx context.Context) error {
	defer d.copies.Close()
	defer d.consumer.Close()
	return d.consumer.Run(ctx)
}

// apply counts the message on its order's item. Publishing the copy is
// the demo's fault injection, outside the transaction on purpose: a
// handler's own effects belong in tx.
func (d *inboxDemo) apply(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
	seen := d.seen.Add(1)
	id := header(rec, outbox.DefaultMessageIDHeaderName)
	if seen == refuseAt {
		d.refused.CompareAndSwap(nil, &id)
	}
	if r := d.refused.Load(); r != nil && *r == id {
		return errAccountClosed
	}
	if seen%injectEvery == 0 && header(rec, injectedHeader) == "" {
		cp := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: []kgo.RecordHeader{{Key: injectedHeader, Value: []byte("1")}}}
		for _, h := range rec.Headers {
			cp.Headers = append(cp.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		d.inFlight.Add(1)
		d.copies.Produce(ctx, cp, func(_ *kgo.Record, err error) {
			if err == nil {
				d.injected.Add(1)
			}
			d.inFlight.Add(-1)
		})
	}
	tx.Add(types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(d.table),
		Key: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "ORDER#" + rec.Topic + "#" + string(rec.Key)},
			"SK": &types.AttributeValueMemberS{Value: "ORDER"},
		},
		UpdateExpression:          aws.String("ADD #applied :one"),
		ExpressionAttributeNames:  map[string]string{"#applied": "Applied"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	}})
	return nil
}

// header returns the value of rec's last header named name, "" when none.
func header(rec outboxinbox.Record, name string) string {
	for _, h := range slices.Backward(rec.Headers) {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

// done reports whether want messages got their verdict (applied, or the
// refused one dead-lettered) and every copy injected was skipped.
func (d *inboxDemo) done(want int) bool {
	// The counts first: a record counted as applied has already started
	// its copy, so the in-flight check below sees it.
	c := d.inbox.Metrics().Snapshot()
	return c.Applied+c.DeadLettered >= int64(want) && d.inFlight.Load() == 0 && c.Duplicates >= d.injected.Load()
}

// inboxFigures is the inbox consumer's part of the run's summary.
type inboxFigures struct {
	Applied    int64 `json:"effectsApplied"`
	Duplicates int64 `json:"duplicatesSkipped"`
	Injected   int64 `json:"duplicatesInjected"`
	// DeadLettered are the records refused for good, produced to
	// inboxDemoDeadLetters after Failures runs.
	DeadLettered int64 `json:"deadLettered"`
	Failures     int64 `json:"failures"`
	Conflicts    int64 `json:"conflicts"`
}

// figures returns what the consumer did so far.
func (d *inboxDemo) figures() inboxFigures {
	c := d.inbox.Metrics().Snapshot()
	return inboxFigures{Applied: c.Applied, Duplicates: c.Duplicates, Injected: d.injected.Load(), DeadLettered: c.DeadLettered, Failures: c.Failures, Conflicts: c.Conflicts}
}

// failed reports what is wrong with the consumer's figures for want
// messages, "" when nothing: every message applied once but the one
// refused for good, dead-lettered after exactly its attempts, and every
// injected copy skipped.
func (f inboxFigures) failed(want int) string {
	if f.Applied+f.DeadLettered != int64(want) || f.DeadLettered != 1 || f.Failures != inboxDemoMaxAttempts || f.Duplicates < f.Injected {
		return fmt.Sprintf("the inbox consumer applied %d effects and dead-lettered %d records (want 1, after %d failures; %d failures counted) for %d messages, and skipped %d duplicates of %d injected",
			f.Applied, f.DeadLettered, inboxDemoMaxAttempts, f.Failures, want, f.Duplicates, f.Injected)
	}
	return ""
}

// print writes the consumer's line of the run's summary.
func (f inboxFigures) print(w io.Writer) {
	fmt.Fprintf(w, "  inbox consumer: %d effects applied exactly once, %d duplicates skipped (%d injected), %d dead-lettered to %s after %d failed runs, %d conflicts\n",
		f.Applied, f.Duplicates, f.Injected, f.DeadLettered, inboxDemoDeadLetters, f.Failures, f.Conflicts)
}
