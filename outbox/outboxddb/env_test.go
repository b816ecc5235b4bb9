package outboxddb

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// env is one outbox table on the in-memory embedded DynamoDB server,
// reached through the real SDK client with the request Counter and Faults
// attached. Its tests run in a testing/synctest bubble: newEnv moves the
// bubble's clock to t0 (2026-09-01T08:00:00Z), and clock, every store's
// and writer's clock, is the bubble's, so time moves only when every
// goroutine of the test is blocked (time.Sleep moves it on purpose).
type env struct {
	d      *outboxlocal.DynamoDB
	client Client // d.Client
	clock  outbox.Clock
	opts   Options
}

func newEnv(t *testing.T, edit ...func(*Options)) *env {
	t.Helper()
	return newEnvWith(t, nil, edit...)
}

// newEnvWith is newEnv on a DynamoDB started with dynamo as well.
func newEnvWith(t *testing.T, dynamo []outboxlocal.DynamoOption, edit ...func(*Options)) *env {
	t.Helper()
	if now := time.Now(); now.After(t0) {
		t.Fatalf("the clock reads %v, past t0: run the test in a synctest bubble", now)
	}
	clock := outbox.SystemClock{}
	d := outboxtest.NewDynamoDB(t, append([]outboxlocal.DynamoOption{outboxlocal.InMemory()}, dynamo...)...)
	opts := Options{TableName: d.NewTableName(), Clock: clock, Logger: testLogger(t)}
	for _, e := range edit {
		e(&opts)
	}
	createTable(t, d, opts)
	// The table's creation may have waited on the clock: the test starts
	// at t0 whatever it took.
	time.Sleep(time.Until(t0))
	return &env{d: d, client: d.Client, clock: clock, opts: opts}
}

// testLogger logs through t, so a failing test shows the store's warnings
// next to its own output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// createTable creates the table with CreateIfNotExists, so every test also
// exercises it, and deletes it at the end on an external endpoint.
func createTable(t *testing.T, d *outboxlocal.DynamoDB, opts Options) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// The table helper waits on the wall clock: on a real endpoint
	// creation takes seconds.
	opts.Clock = outbox.SystemClock{}
	if err := CreateIfNotExists(ctx, d.Client, opts); err != nil {
		t.Fatal(err)
	}
	if d.External {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := d.Client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(opts.TableName)}); err != nil {
				t.Errorf("delete table %s: %v", opts.TableName, err)
			}
		})
	}
}

func (e *env) store(t *testing.T, edit ...func(*StoreOptions)) *Store {
	t.Helper()
	opts := StoreOptions{Options: e.opts}
	for _, ed := range edit {
		ed(&opts)
	}
	s, err := NewStore(e.client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) writer(t *testing.T, edit ...func(*WriterOptions)) *Writer {
	t.Helper()
	opts := WriterOptions{Options: e.opts}
	for _, ed := range edit {
		ed(&opts)
	}
	w, err := NewWriter(e.client, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The writer's one read of the layout record, before the test counts
	// its requests: tests measure writes in steady use
	// (TestWriterLayout measures the first one).
	if err := w.CheckLayout(t.Context()); err != nil {
		t.Fatal(err)
	}
	return w
}

// withoutLayout deletes the table's layout record: the table as created
// before the record existed, where nothing stops a writer or relay with
// another bucket count.
func (e *env) withoutLayout(t *testing.T) {
	t.Helper()
	_, err := e.client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(e.opts.TableName), Key: newKeys(e.opts.WithDefaults()).layoutKey()})
	if err != nil {
		t.Fatal(err)
	}
}

// counts runs fn and returns the requests it made.
func (e *env) counts(fn func()) outboxlocal.Counts {
	before := e.d.Counter.Snapshot()
	fn()
	return e.d.Counter.Snapshot().Since(before)
}

// newMessage builds a message with key that a writer of the default bucket
// count stores in bucket.
func newMessage(t *testing.T, topic, key string, bucket int) outbox.Message {
	t.Helper()
	// The explicit partition places it: a writer buckets it partition mod
	// its count.
	p := int32(bucket)
	return outbox.Message{
		ID: outbox.NewMessageID(), Topic: topic, Key: []byte(key), Value: []byte("value of " + key),
		Partition: &p, CreatedAt: t0,
	}
}

// sequences returns the sequence numbers of msgs.
func sequences(msgs []outbox.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Sequence()
	}
	return out
}

func wantRequests(t *testing.T, c outboxlocal.Counts, want map[string]int) {
	t.Helper()
	if !maps.Equal(c.Requests, want) {
		t.Fatalf("requests %v, want %v", c.Requests, want)
	}
}

func wantInts[T int | int64](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// prepareItems is Writer.Prepare for tests that read its items and
// messages.
func prepareItems(ctx context.Context, w *Writer, msgs []outbox.Message) ([]types.TransactWriteItem, []outbox.Message, error) {
	p, err := w.Prepare(ctx, msgs...)
	if err != nil {
		return nil, nil, err
	}
	return p.Items(), p.Messages(), nil
}

// prepareItem is prepareItems for one message.
func prepareItem(ctx context.Context, w *Writer, msg outbox.Message) (types.TransactWriteItem, outbox.Message, error) {
	items, msgs, err := prepareItems(ctx, w, []outbox.Message{msg})
	if err != nil {
		return types.TransactWriteItem{}, outbox.Message{}, err
	}
	return items[0], msgs[0], nil
}

// unstamping is a Client that stores messages without the reservation
// stamp, as a writer of another language (or from before the stamp) does.
type unstamping struct{ Client }

func withoutStamp(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	item = maps.Clone(item)
	delete(item, attrTxFirst)
	delete(item, attrTxCount)
	return item
}

func (c unstamping) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	cp := *in
	cp.Item = withoutStamp(in.Item)
	return c.Client.PutItem(ctx, &cp, optFns...)
}

func (c unstamping) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	cp := *in
	cp.TransactItems = slices.Clone(in.TransactItems)
	for i, it := range cp.TransactItems {
		if it.Put != nil {
			put := *it.Put
			put.Item = withoutStamp(put.Item)
			cp.TransactItems[i].Put = &put
		}
	}
	return c.Client.TransactWriteItems(ctx, &cp, optFns...)
}

// unstampedWriter is a writer whose messages carry no reservation stamp.
func (e *env) unstampedWriter(t *testing.T) *Writer {
	t.Helper()
	w, err := NewWriter(unstamping{e.client}, WriterOptions{Options: e.opts})
	if err != nil {
		t.Fatal(err)
	}
	return w
}
