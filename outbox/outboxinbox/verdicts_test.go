package outboxinbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// lostResponse commits transactions but answers the first n with an
// error, as a connection reset after DynamoDB committed does.
type lostResponse struct {
	outboxinbox.Client
	n int
}

func (c *lostResponse) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := c.Client.TransactWriteItems(ctx, in, optFns...)
	if err == nil && c.n > 0 {
		c.n--
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return out, err
}

func TestVerdicts(t *testing.T) {
	// An applied commit whose response was lost is applied, not a failure
	// followed by a duplicate.
	t.Run("Process_CommitResponseLost_CountedAsApplied", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", &lostResponse{Client: e.ddb.Client, n: 1})
		id := outbox.NewMessageID()
		rec := record("orders", 0, 1, "k", "v", id)
		if out, err := in.Process(t.Context(), rec, e.handler()); err != nil || out != outboxinbox.Applied {
			t.Fatalf("%v, %v; want applied", out, err)
		}
		if out, err := in.Process(t.Context(), rec, e.handler()); err != nil || out != outboxinbox.Duplicate {
			t.Fatalf("redelivery: %v, %v; want duplicate", out, err)
		}
		if c := in.Metrics().Snapshot(); c.Applied != 1 || c.Duplicates != 1 || c.Failures != 0 || e.applied(t, id.String()) != 1 {
			t.Fatalf("counts %+v; want 1 applied, 1 duplicate, no failure", c)
		}
	})

	// A shutdown in the middle of a record leaves it without a verdict, and
	// is not a failure.
	t.Run("Process_ShutdownMidRecord_NotAFailure", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		ctx, cancel := context.WithCancel(t.Context())
		_, err := in.Process(ctx, record("orders", 0, 1, "k", "v", outbox.NewMessageID()), func(ctx context.Context, _ outboxinbox.Record, _ *outboxinbox.Tx) error {
			cancel()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want the cancellation", err)
		}
		if c := in.Metrics().Snapshot(); c.Failures != 0 {
			t.Fatalf("counts %+v, want no failure", c)
		}
	})

	// A marker committed after the read is judged from the copy DynamoDB
	// returns with the refusal, without another read.
	t.Run("Process_MarkerCommittedAfterTheRead_JudgedFromTheRefusal", func(t *testing.T) {
		e := newEnv(t)
		id := outbox.NewMessageID()
		if _, err := e.inbox(t, "billing", nil).Process(t.Context(), record("orders", 0, 1, "k", "v", id), e.handler()); err != nil {
			t.Fatal(err)
		}
		late := e.inbox(t, "billing", blindReads{e.ddb.Client})
		before := e.ddb.Counter.Snapshot()
		if out, err := late.Process(t.Context(), record("orders", 0, 2, "k", "v", id), e.handler()); err != nil || out != outboxinbox.Duplicate {
			t.Fatalf("same record: %v, %v; want duplicate", out, err)
		}
		_, err := late.Process(t.Context(), record("orders", 0, 3, "k", "other", id), e.handler())
		assertMismatch(t, err, id)
		if got := e.ddb.Counter.Snapshot().Since(before); got.Requests["Query"] != 0 || got.Requests["GetItem"] != 0 || got.Refused != 2 {
			t.Fatalf("requests %v, %d refused; want two refused transactions and no read", got.Requests, got.Refused)
		}
		if n := e.applied(t, id.String()); n != 1 {
			t.Fatalf("effect applied %d times, want 1", n)
		}
	})

	// Every policy takes a record failing for good and a record without the
	// id header, and moves the partition on.
	t.Run("Consumer_FailurePolicies_TakeTheRecordAndMoveOn", func(t *testing.T) {
		for _, policy := range []outboxinbox.FailurePolicy{outboxinbox.MarkOnly, outboxinbox.Callback} {
			t.Run(fmt.Sprint(policy), func(t *testing.T) {
				e := newEnv(t)
				k := outboxtest.NewKafka(t, "orders")
				var s stream
				for i := range 6 {
					s.add("orders", "order-1")
					if i == 2 {
						s.recs = append(s.recs, &kgo.Record{Topic: "orders", Key: []byte("order-1"), Value: []byte("no id")})
					}
				}
				produce(t, k, s.recs)
				var mu sync.Mutex
				var taken []string
				h := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
					if string(rec.Value) == "order-1:4" {
						return errors.New("account closed")
					}
					e.effect(rec, tx)
					return nil
				}
				in := e.inbox(t, "billing", nil)
				stop := running(e.consumer(t, k, in, h, func(c *outboxinbox.ConsumerConfig) {
					c.MaxAttempts = 2
					c.OnFailure = policy
					c.FailureCallback = func(_ context.Context, rec outboxinbox.Record, cause error) error {
						mu.Lock()
						defer mu.Unlock()
						taken = append(taken, string(rec.Value))
						return nil
					}
				}))
				waitFor(t, "every record", func() bool { c := in.Metrics().Snapshot(); return c.Applied+c.DeadLettered == int64(len(s.recs)) })
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprint(append(append([]string{}, s.want["order-1"][:4]...), s.want["order-1"][5:]...))
				if got := fmt.Sprint(e.log(t, "order-1")); got != want {
					t.Fatalf("effects %s, want %s", got, want)
				}
				c := in.Metrics().Snapshot()
				t.Logf("%v: %+v, callback took %v", policy, c, taken)
				if c.DeadLettered != 2 || c.Failures != 4 {
					t.Fatalf("counts %+v, want 2 dead-lettered after 2 failures each", c)
				}
				if policy == outboxinbox.Callback && fmt.Sprint(taken) != "[no id order-1:4]" {
					t.Fatalf("callback took %v, want the record without id, then order-1:4", taken)
				}
				if n := e.count(t, "OUTBOX#INBOX#billing#"); n != 6 {
					t.Fatalf("%d markers, want 6 (5 applied, 1 dead-lettered; none for the record without id)", n)
				}
			})
		}
	})

	// A topic that does not exist ends Run with the error instead of a
	// consumer that waits without a word.
	t.Run("Consumer_MissingTopic_RunReturnsIt", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders")
		c := e.consumer(t, k, e.inbox(t, "billing", nil), e.handler(), func(c *outboxinbox.ConsumerConfig) { c.Topics = []string{"orders", "ordres"} })
		if err := c.Run(t.Context()); !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("Run = %v, want the unknown topic", err)
		}
	})

	// Refused credentials end Run with the error instead of a consumer that
	// retries them in its log.
	t.Run("Consumer_RefusedAuthentication_RunReturnsIt", func(t *testing.T) {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "right"))
		if err != nil {
			t.Fatal(err)
		}
		defer cluster.Close()
		e := newEnv(t)
		c, err := outboxinbox.NewConsumer(outboxinbox.ConsumerConfig{
			Inbox: e.inbox(t, "billing", nil), Handler: e.handler(), Group: "billing", Topics: []string{"orders"}, Brokers: cluster.ListenAddrs(),
			ClientOpts: []kgo.Opt{kgo.SASL(plain.Auth{User: "admin", Pass: "wrong"}.AsMechanism()), kgo.RetryTimeout(time.Second)}, Logger: quiet(),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The embedded broker drops the connection on bad credentials rather
		// than answering SASL_AUTHENTICATION_FAILED: either way Run returns.
		if err := c.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "look up topics") {
			t.Fatalf("Run = %v, want the failed topic lookup", err)
		}
	})
}

// blindReads answers every read with nothing, as when another process
// commits the marker between this one's read and its transaction.
type blindReads struct{ outboxinbox.Client }

func (blindReads) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}
