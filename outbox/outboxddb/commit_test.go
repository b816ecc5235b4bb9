package outboxddb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// commitEnv is an outbox table and a writer with a recording notifier.
func commitEnv(t *testing.T, edit ...func(*WriterOptions)) (*env, *Writer, *recordingNotifier) {
	t.Helper()
	// The table is made with what the edits make of the shared options.
	e := newEnv(t, func(o *Options) {
		w := WriterOptions{Options: *o}
		for _, ed := range edit {
			ed(&w)
		}
		*o = w.Options
	})
	notifier := &recordingNotifier{}
	w := e.writer(t, append([]func(*WriterOptions){func(o *WriterOptions) {
		o.Notifier, o.Topics = notifier, []string{"orders"}
	}}, edit...)...)
	return e, w, notifier
}

// order is a business item in the outbox's table, outside its key prefix,
// with a version for optimistic writes.
func order(e *env, id string, version int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		DefaultPartitionKey: &types.AttributeValueMemberS{Value: "ORDER#" + id},
		DefaultSortKey:      &types.AttributeValueMemberS{Value: "ORDER"},
		"Version":           &types.AttributeValueMemberN{Value: strconv.Itoa(version)},
	}
}

func orderKey(e *env, id string) map[string]types.AttributeValue {
	item := order(e, id, 0)
	delete(item, "Version")
	return item
}

// readVersion returns the order's version, 0 when it does not exist.
func readVersion(t *testing.T, e *env, id string) int {
	t.Helper()
	out, err := e.client.(*dynamodb.Client).GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(e.opts.TableName), Key: orderKey(e, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := intAttr(out.Item, "Version")
	return int(v)
}

// putVersion is an optimistic Put of the order at version next, on the
// condition that the stored version is still next-1.
func putVersion(e *env, id string, next int) types.Put {
	return types.Put{
		TableName:                 aws.String(e.opts.TableName),
		Item:                      order(e, id, next),
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR Version = :prev"),
		ExpressionAttributeNames:  map[string]string{"#pk": DefaultPartitionKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":prev": num(int64(next - 1))},
	}
}

func TestCommit(t *testing.T) {
	t.Run("WritesTheBusinessItemAndItsMessageInOneTransactionThenNotifies", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, w, notifier := commitEnv(t)
			msg, err := outbox.NewMessage("orders", []byte("order-1"), []byte(`{"total":42}`), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var stored []outbox.Message
			c := e.counts(func() {
				stored, err = w.Commit(t.Context(), func(_ context.Context, tx *Tx) error {
					tx.Put(putVersion(e, "1", 1))
					return tx.Enqueue(msg)
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"UpdateItem": 1, "TransactWriteItems": 1}
			if !reflect.DeepEqual(c.Requests, want) {
				t.Fatalf("requests %v, want one reservation and one transaction %v", c.Requests, want)
			}
			if len(stored) != 1 || stored[0].ID != msg.ID || stored[0].Sequence() != 1 {
				t.Fatalf("stored %+v, want message %s at sequence 1", stored, msg.ID)
			}
			if v := readVersion(t, e, "1"); v != 1 {
				t.Fatalf("order version %d, want 1", v)
			}
			batch, err := e.store(t).FetchBatch(t.Context(), stored[0].Bucket(), 10)
			if err != nil || len(batch) != 1 || batch[0].ID != msg.ID {
				t.Fatalf("fetched %+v, %v; want the committed message", batch, err)
			}
			if got := notifier.got(); len(got) != 1 || !reflect.DeepEqual(got[0].Buckets, []int{stored[0].Bucket()}) {
				t.Fatalf("wake-ups %+v, want one for bucket %d", got, stored[0].Bucket())
			}
		})
	})

	// The seed's rule: a transaction rebuilt after losing a race reserves
	// again, so its message takes a number newer than the write that won.
	t.Run("RebuildsAndReservesAgainAfterLosingARace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, _, notifier := commitEnv(t)
			rival := e.writer(t)
			var rivalMsg outbox.Message
			racing := &beforeTransact{Client: e.client}
			// Another writer commits the same order and its own message after
			// the first attempt read the state and reserved its number.
			racing.hook = func(ctx context.Context) {
				m, err := outbox.NewMessage("orders", []byte("order-1"), []byte("shipped"), outbox.MessageOptions{})
				if err != nil {
					t.Fatal(err)
				}
				msgs, err := rival.Commit(ctx, func(_ context.Context, rtx *Tx) error {
					rtx.Put(putVersion(e, "1", readVersion(t, e, "1")+1))
					return rtx.Enqueue(m)
				})
				if err != nil {
					t.Fatal(err)
				}
				rivalMsg = msgs[0]
			}
			w, err := NewWriter(racing, e.writer(t).opts)
			if err != nil {
				t.Fatal(err)
			}
			w.opts.Clock, w.opts.Notifier = outbox.SystemClock{}, notifier
			msg, err := outbox.NewMessage("orders", []byte("order-1"), []byte("paid"), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			attempts := 0
			stored, err := w.Commit(t.Context(), func(ctx context.Context, tx *Tx) error {
				attempts++
				tx.Put(putVersion(e, "1", readVersion(t, e, "1")+1))
				return tx.Enqueue(msg)
			})
			if err != nil {
				t.Fatal(err)
			}
			if attempts != 2 {
				t.Fatalf("build ran %d times, want 2 (one rebuild after the lost race)", attempts)
			}
			if v := readVersion(t, e, "1"); v != 2 {
				t.Fatalf("order version %d, want 2", v)
			}
			// Sequence 1 went to the lost attempt (a gap), 2 to the rival, 3 to
			// the rebuild: the rebuilt message follows the write that won. Reusing
			// the first reservation would publish it before the rival's.
			if rivalMsg.Sequence() != 2 || stored[0].Sequence() != 3 {
				t.Fatalf("rival at %d and rebuilt message at %d, want 2 and 3", rivalMsg.Sequence(), stored[0].Sequence())
			}
			if len(notifier.got()) != 1 {
				t.Fatalf("wake-ups %+v, want one, after the commit", notifier.got())
			}
		})
	})

	t.Run("GivesUpAfterMaxAttemptsWithAConflictError", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, w, notifier := commitEnv(t, func(o *WriterOptions) { o.MaxCommitAttempts = 3 })
			msg, err := outbox.NewMessage("orders", []byte("order-1"), []byte("paid"), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			builds := 0
			_, err = w.Commit(t.Context(), func(_ context.Context, tx *Tx) error {
				builds++
				tx.Put(types.Put{TableName: aws.String(e.opts.TableName), Item: order(e, "1", 1),
					ConditionExpression: aws.String("attribute_exists(Version)")})
				return tx.Enqueue(msg)
			})
			var conflict *ConflictError
			if !errors.As(err, &conflict) || !errors.Is(err, ErrConflict) || conflict.Attempts != 3 || !reflect.DeepEqual(conflict.Items, []int{0}) {
				t.Fatalf("error %v (%+v), want a *ConflictError after 3 attempts naming item 0", err, conflict)
			}
			if builds != 3 {
				t.Fatalf("build ran %d times, want 3", builds)
			}
			if batch, _ := e.store(t).FetchBatch(t.Context(), msg.Bucket(), 10); len(batch) != 0 || len(notifier.got()) != 0 {
				t.Fatalf("fetched %d messages and sent %d wake-ups, want none", len(batch), len(notifier.got()))
			}
		})
	})

	t.Run("ReturnsTheBuildErrorWithoutARequest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, w, _ := commitEnv(t)
			stop := errors.New("order already shipped")
			var err error
			c := e.counts(func() {
				_, err = w.Commit(t.Context(), func(context.Context, *Tx) error { return stop })
			})
			if !errors.Is(err, stop) || c.TotalRequests() != 0 {
				t.Fatalf("error %v after %v, want the build's error and no request", err, c.Requests)
			}
		})
	})

	// The bucket count is given once, to the writer: one message value suits
	// writers of any count, each storing it in the bucket its key hashes to at
	// its own count, on every path that enqueues.
	t.Run("WriterAssignsTheBucketForItsOwnCount", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, w, _ := commitEnv(t, func(o *WriterOptions) { o.BucketCount = 16 })
			// A key whose bucket differs between 8 and 16 buckets, so a writer
			// that hashed for the default count would land it elsewhere.
			var key []byte
			want := -1
			for i := 0; want < 8; i++ {
				key = fmt.Appendf(nil, "order-%d", i)
				want, _ = outbox.ComputeBucket(key, outbox.MessageID{}, 16, nil)
			}
			msg, err := outbox.NewMessage("orders", key, []byte("v"), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			calls := map[string]func() ([]outbox.Message, error){
				"Enqueue": func() ([]outbox.Message, error) {
					m, err := w.Enqueue(t.Context(), msg)
					return []outbox.Message{m}, err
				},
				"EnqueueBatch": func() ([]outbox.Message, error) { return w.EnqueueBatch(t.Context(), []outbox.Message{msg}) },
				"Commit": func() ([]outbox.Message, error) {
					return w.Commit(t.Context(), func(_ context.Context, tx *Tx) error { return tx.Enqueue(msg) })
				},
			}
			store := e.store(t, func(o *StoreOptions) { o.BucketCount = 16 })
			for name, call := range calls {
				stored, err := call()
				if err != nil || len(stored) != 1 || stored[0].Bucket() != want {
					t.Errorf("%s: stored %+v, %v; want the message in bucket %d of 16", name, stored, err, want)
				}
			}
			batch, err := store.FetchBatch(t.Context(), want, 10)
			if err != nil || len(batch) != len(calls) || batch[0].ID != msg.ID {
				t.Fatalf("fetched %d messages from bucket %d, %v; want the %d enqueued", len(batch), want, err, len(calls))
			}
			if msg.Bucket() != 0 || msg.Sequence() != 0 {
				t.Fatalf("the caller's message was placed at bucket %d, sequence %d; only what the writer returns is", msg.Bucket(), msg.Sequence())
			}
		})
	})
}

// beforeTransact runs hook before the first TransactWriteItems it passes on.
type beforeTransact struct {
	Client
	hook func(ctx context.Context)
}

func (c *beforeTransact) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if hook := c.hook; hook != nil {
		c.hook = nil
		hook(ctx)
	}
	return c.Client.TransactWriteItems(ctx, in, opts...)
}
