package outboxinbox_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// failDeadLetterMarks refuses every write that records a message as
// dead-lettered while fails is above zero (or forever when it is
// negative), as a throttled or unreachable table does.
type failDeadLetterMarks struct {
	*dynamodb.Client
	fails atomic.Int64
}

func (c *failDeadLetterMarks) refuse(values ...map[string]types.AttributeValue) bool {
	for _, vs := range values {
		for _, v := range vs {
			if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value == outboxinbox.DeadLettered.String() {
				if c.fails.Load() < 0 || c.fails.Add(-1) >= 0 {
					return true
				}
			}
		}
	}
	return false
}

func (c *failDeadLetterMarks) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		if it.Put != nil && c.refuse(it.Put.Item) {
			return nil, errors.New("table unreachable")
		}
	}
	return c.Client.TransactWriteItems(ctx, in, optFns...)
}

func (c *failDeadLetterMarks) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.refuse(in.ExpressionAttributeValues) {
		return nil, errors.New("table unreachable")
	}
	return c.Client.UpdateItem(ctx, in, optFns...)
}

// poisonStream produces n records of key "k" with the second one refused
// while broken is set; it returns the stream and the handler.
func poisonStream(t *testing.T, e *env, k *outboxlocal.Kafka, n int, broken *atomic.Bool) (*stream, outboxinbox.Handler, *atomic.Int64) {
	t.Helper()
	var s stream
	for range n {
		s.add("orders", "k")
	}
	produce(t, k, s.recs)
	var runs atomic.Int64
	h := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
		if string(rec.Value) == "k:1" {
			runs.Add(1)
			if broken.Load() {
				return errors.New("account closed")
			}
		}
		e.effect(rec, tx)
		return nil
	}
	return &s, h, &runs
}

func sourceHeaders(r *kgo.Record) (source, consumer string) {
	for _, h := range r.Headers {
		switch h.Key {
		case "x-spillway-source":
			source = string(h.Value)
		case "x-spillway-consumer":
			consumer = string(h.Value)
		}
	}
	return source, consumer
}

func TestDeadLetter(t *testing.T) {
	// A dead-letter topic that does not exist ends Run at once with an
	// error naming it and the fix, instead of a partition that stops at its
	// first poison record without a word.
	t.Run("Consumer_MissingDeadLetterTopic_RunReturnsItNamingTheFix", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders")
		c := e.consumer(t, k, e.inbox(t, "billing", nil), e.handler())
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := c.Run(ctx)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(err.Error(), "orders.dlq") || !strings.Contains(err.Error(), "create it") {
			t.Fatalf("Run = %v, want the missing dead-letter topic orders.dlq and how to create it", err)
		}
		t.Logf("Run: %v", err)
	})

	// The dead-letter marker write fails three times: the record is
	// produced to the dead-letter topic once, and the marker written on a
	// later try.
	t.Run("Consumer_MarkerWriteFails_DeadLetterProducedOnce", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var broken atomic.Bool
		broken.Store(true)
		s, h, _ := poisonStream(t, e, k, 4, &broken)
		client := &failDeadLetterMarks{Client: e.ddb.Client}
		client.fails.Store(3)
		in := e.inbox(t, "billing", client)
		stop := running(e.consumer(t, k, in, h, deadLetterAfter(2)))
		waitFor(t, "the record dead-lettered and the rest applied", func() bool {
			c := in.Metrics().Snapshot()
			return c.DeadLettered == 1 && c.Applied == int64(len(s.recs)-1)
		})
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if dlq := outboxtest.ConsumeAll(t, k, "orders.dlq"); len(dlq) != 1 {
			t.Fatalf("dead-letter topic holds %d copies of the record, want 1", len(dlq))
		}
	})

	// A consumer dies between the dead-letter produce and the marker write
	// (here: every marker write of it fails). Dead letters are delivered at
	// least once: the next owner produces the record again without running
	// the handler again, and both copies carry the same source and consumer
	// headers, the key a dead-letter consumer deduplicates on.
	t.Run("Consumer_CrashBetweenProduceAndMarker_CopiesShareTheirKey", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var broken atomic.Bool
		broken.Store(true)
		s, h, runs := poisonStream(t, e, k, 4, &broken)
		dying := &failDeadLetterMarks{Client: e.ddb.Client}
		dying.fails.Store(-1)
		first := e.inbox(t, "billing", dying)
		c := e.consumer(t, k, first, h, deadLetterAfter(2))
		stop := running(c)
		waitFor(t, "the dead-letter copy of the first consumer", func() bool { return len(outboxtest.ConsumeAll(t, k, "orders.dlq")) == 1 })
		time.Sleep(200 * time.Millisecond) // a few more tries of its marker write
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		c.Close() // leaves the group
		second := e.inbox(t, "billing", nil)
		stop = running(e.consumer(t, k, second, h, deadLetterAfter(2)))
		waitFor(t, "the rest applied by the second consumer", func() bool {
			return second.Metrics().Snapshot().DeadLettered == 1 && e.applied(t, s.ids[3].String()) == 1
		})
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		dlq := outboxtest.ConsumeAll(t, k, "orders.dlq")
		if len(dlq) != 2 {
			t.Fatalf("%d dead-letter copies, want 2 (at least once)", len(dlq))
		}
		src0, cons0 := sourceHeaders(dlq[0])
		src1, cons1 := sourceHeaders(dlq[1])
		t.Logf("copies: %s by %s, %s by %s; handler runs of the poison record: %d", src0, cons0, src1, cons1, runs.Load())
		if src0 == "" || src0 != src1 || cons0 != "billing" || cons1 != cons0 {
			t.Fatalf("copies carry source %q/%q and consumer %q/%q, want one source and consumer billing", src0, src1, cons0, cons1)
		}
		if runs.Load() != 2 {
			t.Fatalf("the poison record's handler ran %d times, want MaxAttempts (2): the count is on its marker", runs.Load())
		}
	})

	// The dead-letter topic disappears while the consumer runs: the
	// dead-letter produce fails for good, and Run returns instead of
	// retrying it forever.
	t.Run("Consumer_DeadLetterTopicDeletedMidRun_RunReturnsIt", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		in := e.inbox(t, "billing", nil)
		refuses := func(context.Context, outboxinbox.Record, *outboxinbox.Tx) error { return errors.New("account closed") }
		c := e.consumer(t, k, in, refuses, deadLetterAfter(1), func(c *outboxinbox.ConsumerConfig) {
			c.ClientOpts = append(c.ClientOpts, kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryTimeout(5*time.Second))
		})
		errc := make(chan error, 1)
		go func() { errc <- c.Run(t.Context()) }()
		deleteTopic(t, k, "orders.dlq")
		produce(t, k, []*kgo.Record{{Topic: "orders", Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(outbox.NewMessageID().String())}}}})
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), "orders.dlq") {
				t.Fatalf("Run = %v, want the failed dead-letter produce", err)
			}
			t.Logf("Run: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("Run still retrying a dead-letter topic that is gone after a minute")
		}
	})

	// The marker table is missing: every record would fail, and after
	// MaxAttempts each would be dead-lettered. Run returns instead, with
	// nothing dead-lettered.
	t.Run("Consumer_MarkerTableMissing_RunReturnsInsteadOfDeadLettering", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		s.add("orders", "k")
		produce(t, k, s.recs)
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.TableName = "no-such-table" })
		c := e.consumer(t, k, in, e.handler(), deadLetterAfter(1))
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		err := c.Run(ctx)
		var rnf *types.ResourceNotFoundException
		if !errors.As(err, &rnf) {
			t.Fatalf("Run = %v, want the missing table", err)
		}
		if dlq := outboxtest.ConsumeAll(t, k, "orders.dlq"); len(dlq) != 0 {
			t.Fatalf("%d records dead-lettered for a missing table", len(dlq))
		}
	})
}

// deleteTopic deletes topic from k.
func deleteTopic(t *testing.T, k *outboxlocal.Kafka, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(k.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{topic}
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("delete %s: %v", topic, err)
		}
	}
}
