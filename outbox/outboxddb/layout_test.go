package outboxddb

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// wantLayoutError checks err is the typed refusal naming both counts and
// the table, matching outbox.ErrMisconfigured.
func wantLayoutError(t *testing.T, err error, table string, recorded, configured int) {
	t.Helper()
	var le *LayoutError
	if !errors.As(err, &le) || !errors.Is(err, outbox.ErrMisconfigured) || le.Recorded != recorded || le.Configured != configured || le.Table != table {
		t.Fatalf("error %v, want a *LayoutError of table %s: recorded %d, configured %d", err, table, recorded, configured)
	}
	msg := err.Error()
	for _, want := range []string{table, "bucket count " + strconv.Itoa(recorded), "uses " + strconv.Itoa(configured), "nothing was written", "to " + strconv.Itoa(recorded)} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not say %q", msg, want)
		}
	}
	if strings.Count(msg, ". ") > 0 || strings.Contains(msg, "\n") {
		t.Fatalf("error %q is more than one sentence", msg)
	}
}

// noWrites checks that c holds reads only.
func noWrites(t *testing.T, what string, c map[string]int) {
	t.Helper()
	for op := range c {
		if op != "Query" {
			t.Fatalf("%s sent %v; want reads only", what, c)
		}
	}
}

func TestLayout(t *testing.T) {
	t.Run("CreateIfNotExists_RecordsTheCountOfTheKeyPrefix", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.BucketCount = 12 })
			l, found, err := ReadLayout(t.Context(), e.client, e.opts)
			if err != nil || !found || l.BucketCount != 12 || l.KeyPrefix != DefaultKeyPrefix || l.RecordedBy != RecordedByCreateTable || l.RecordedAt.IsZero() {
				t.Fatalf("layout %+v, %v, %v; want 12 buckets for %s recorded by %s", l, found, err, DefaultKeyPrefix, RecordedByCreateTable)
			}
			// Another key prefix of the same table is another outbox: no record.
			other := e.opts
			other.KeyPrefix = "BILLING"
			if _, found, err := ReadLayout(t.Context(), e.client, other); found || err != nil {
				t.Fatalf("key prefix BILLING: found %v, %v; want no record", found, err)
			}
		})
	})

	t.Run("CreateIfNotExists_OnATableWithAnotherCount_IsRefused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			opts := e.opts
			opts.BucketCount = 16
			wantLayoutError(t, CreateIfNotExists(t.Context(), e.client, opts), e.opts.TableName, 8, 16)
			if err := CreateIfNotExists(t.Context(), e.client, e.opts); err != nil {
				t.Fatalf("the recorded count: %v", err)
			}
		})
	})

	t.Run("CreateIfNotExists_LeavesATableWithoutARecordAsItIs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.withoutLayout(t)
			opts := e.opts
			opts.BucketCount = 16
			var err error
			c := e.counts(func() { err = CreateIfNotExists(t.Context(), e.client, opts) })
			if err != nil {
				t.Fatal(err)
			}
			if _, found, _ := ReadLayout(t.Context(), e.client, opts); found {
				t.Fatal("a table created before the record got one without an operator stating its count")
			}
			if c.Requests["UpdateItem"] != 0 {
				t.Fatalf("requests %v; want no write", c.Requests)
			}
		})
	})

	t.Run("RecordLayout_KeepsTheFirstRecord_AndIsNeverRefused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.withoutLayout(t)
			var l Layout
			var err error
			c := e.counts(func() { l, err = RecordLayout(t.Context(), e.client, e.opts, "test", "test") })
			if err != nil || l.BucketCount != 8 || l.RecordedBy != "test" || !l.RecordedAt.Equal(t0) {
				t.Fatalf("record: %+v, %v", l, err)
			}
			wantRequests(t, c, map[string]int{"UpdateItem": 1})
			wantUnits(t, "record", c, 0, 1)
			time.Sleep(time.Minute)
			opts := e.opts
			opts.BucketCount = 16
			c = e.counts(func() { l, err = RecordLayout(t.Context(), e.client, opts, "later", "later caller") })
			wantLayoutError(t, err, e.opts.TableName, 8, 16)
			if l.BucketCount != 8 || l.RecordedBy != "test" || !l.RecordedAt.Equal(t0) || c.Refused != 0 {
				t.Fatalf("after a second record: %+v, %d refused; want the first record unchanged and no refusal", l, c.Refused)
			}
		})
	})

	// The first reproduction: a writer configured with 16 buckets on
	// a table whose writers and relays use 8 used to commit into bucket 10,
	// which no relay reads. Every write path is refused before its first
	// write.
	t.Run("Writer_WithAnotherCount_WritesNothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, err := NewWriter(e.client, WriterOptions{Options: func() Options { o := e.opts; o.BucketCount = 16; return o }()})
			if err != nil {
				t.Fatal(err)
			}
			msg := newMessage(t, "orders", "order-10", 10)
			calls := map[string]func() error{
				"Enqueue":      func() error { _, err := w.Enqueue(t.Context(), msg); return err },
				"EnqueueBatch": func() error { _, err := w.EnqueueBatch(t.Context(), []outbox.Message{msg}); return err },
				"Commit": func() error {
					_, err := w.Commit(t.Context(), func(_ context.Context, tx *Tx) error { return tx.Enqueue(msg) })
					return err
				},
				"Prepare": func() error { _, err := w.Prepare(t.Context(), msg); return err },
			}
			for name, call := range calls {
				var err error
				c := e.counts(func() { err = call() })
				wantLayoutError(t, err, e.opts.TableName, 8, 16)
				noWrites(t, name, c.Requests)
			}
			if err := w.CheckLayout(t.Context()); err == nil {
				t.Fatal("CheckLayout accepted 16 buckets")
			}
			pending, err := e.store(t, func(o *StoreOptions) { o.BucketCount = 16 }).PendingBuckets(t.Context(), allBucketsUpTo(16))
			if err != nil || len(pending) != 0 {
				t.Fatalf("pending buckets %v, %v; want none", pending, err)
			}
		})
	})

	t.Run("Writer_ReadsTheRecordOncePerWriter_NothingPerCommit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, err := NewWriter(e.client, WriterOptions{Options: e.opts})
			if err != nil {
				t.Fatal(err)
			}
			// Concurrent first commits share the one read.
			var wg sync.WaitGroup
			c := e.counts(func() {
				for i := range 4 {
					wg.Go(func() {
						if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "first", i)); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
			})
			if c.Requests["Query"] != 1 || c.ReadUnits != 1 {
				t.Fatalf("first commits: %v, %.1f read units; want one Query of one read unit", c.Requests, c.ReadUnits)
			}
			c = e.counts(func() {
				for i := range 10 {
					if _, err := w.Commit(t.Context(), func(_ context.Context, tx *Tx) error { return tx.Enqueue(newMessage(t, "t", "later", i)) }); err != nil {
						t.Fatal(err)
					}
				}
			})
			wantRequests(t, c, map[string]int{"UpdateItem": 10, "TransactWriteItems": 10})
		})
	})

	t.Run("Writer_WithoutARecord_WritesUncheckedAndReadsOnce", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.withoutLayout(t)
			w, err := NewWriter(e.client, WriterOptions{Options: func() Options { o := e.opts; o.BucketCount = 16; return o }()})
			if err != nil {
				t.Fatal(err)
			}
			c := e.counts(func() {
				for i := range 3 {
					if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "k", 10+i)); err != nil {
						t.Fatal(err)
					}
				}
			})
			wantRequests(t, c, map[string]int{"Query": 1, "UpdateItem": 3, "PutItem": 3})
		})
	})

	// A relay with another count stops at its round's read: it heartbeats,
	// reads the partition, finds the record and writes no lease.
	t.Run("Relay_WithAnotherCount_ClaimsNothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t, func(o *StoreOptions) { o.BucketCount = 16 })
			var err error
			c := e.counts(func() {
				_, err = s.acquire(t.Context(), lease.Request{RelayID: "relay-16", BucketCount: 16, LeaseDuration: fleetLease}, lease.RoundState{})
			})
			wantLayoutError(t, err, e.opts.TableName, 8, 16)
			wantRequests(t, c, map[string]int{"PutItem": 1, "Query": 1})
			if _, err := s.ReadCoordination(t.Context()); !errors.As(err, new(*LayoutError)) {
				t.Fatalf("ReadCoordination = %v, want the *LayoutError", err)
			}
			view, err := e.store(t).ReadCoordination(t.Context())
			if err != nil || len(view.Leases) != 0 {
				t.Fatalf("leases %+v, %v; want none", view.Leases, err)
			}
		})
	})

	// The record sits in the coordination partition; the lease round reads
	// it with the leases and heartbeats and plans exactly as without it.
	// Relays of other languages take only LEASE# and RELAY# sort keys from
	// that read, as coordinationItems does.
	t.Run("Relay_WithTheRecordedCount_ReadsItForFree", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, 8)
			c := f.e.counts(func() { f.round("relay-a") })
			wantRequests(t, c, map[string]int{"PutItem": 1, "Query": 1, "UpdateItem": 8})
			if c.Refused != 0 {
				t.Fatalf("%d refused writes", c.Refused)
			}
			items, err := f.e.store(t).readCoordinationItems(t.Context(), "")
			if err != nil {
				t.Fatal(err)
			}
			leases, relays := f.e.store(t).keys.coordinationItems(items)
			if len(items) != 10 || len(leases) != 8 || len(relays) != 1 {
				t.Fatalf("%d items: %d leases and %d heartbeats; want the record beside 8 leases and 1 heartbeat", len(items), len(leases), len(relays))
			}
			for _, item := range items {
				sk, _ := stringAttr(item, DefaultSortKey)
				if _, isLease := parseLeaseSortKey(sk); sk == layoutSortKey && (isLease || strings.HasPrefix(sk, leasePrefix) || strings.HasPrefix(sk, relayPrefix)) {
					t.Fatalf("the record's sort key %q reads as a lease or a heartbeat", sk)
				}
			}
		})
	})

	t.Run("OpenGeneration_WithASuccessorOfAnotherCount_IsRefused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			succ := e.opts
			succ.KeyPrefix, succ.BucketCount = successor.KeyPrefix, 64
			if _, err := RecordLayout(t.Context(), e.client, succ, "test", "test"); err != nil {
				t.Fatal(err)
			}
			_, err := e.store(t).OpenGeneration(t.Context(), successor)
			wantLayoutError(t, err, e.opts.TableName, 64, successor.BucketCount)
			if m, _ := e.store(t).ReadGeneration(t.Context()); m.Exists {
				t.Fatalf("marker %+v written; want none", m)
			}
			if p, _ := e.store(t, successorStore).ReadPredecessor(t.Context()); p.Exists {
				t.Fatalf("predecessor marker %+v written; want none", p)
			}
		})
	})

	t.Run("MalformedRecord_StopsWritersAndRelays", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			key := newKeys(e.opts.WithDefaults()).layoutKey()
			if _, err := e.client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: aws.String(e.opts.TableName), Key: key,
				UpdateExpression: aws.String("SET BucketCount = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": str("eight")}}); err != nil {
				t.Fatal(err)
			}
			w, err := NewWriter(e.client, WriterOptions{Options: e.opts})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "k", 1)); !errors.Is(err, outbox.ErrInvalidItem) {
				t.Fatalf("enqueue = %v, want outbox.ErrInvalidItem", err)
			}
			if _, err := e.store(t).ReadCoordination(t.Context()); !errors.Is(err, outbox.ErrInvalidItem) {
				t.Fatalf("coordination read = %v, want outbox.ErrInvalidItem", err)
			}
		})
	})

	// The CDK stack writes the record at deployment with
	// outboxconf.LayoutRecordCall: what it writes is what the library
	// reads, and a deployment with another count is refused.
	t.Run("TheStacksRecord_IsTheLibrarys", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.withoutLayout(t)
			call := func(count int) error {
				_, err := e.client.UpdateItem(t.Context(), stackCall(outboxconf.LayoutRecordCall(e.opts.TableName, DefaultPartitionKey, DefaultSortKey, DefaultKeyPrefix, count, "CDK stack Spillway")))
				return err
			}
			if err := call(8); err != nil {
				t.Fatal(err)
			}
			l, found, err := ReadLayout(t.Context(), e.client, e.opts)
			if err != nil || !found || l.BucketCount != 8 || l.RecordedBy != "CDK stack Spillway" || !l.RecordedAt.IsZero() {
				t.Fatalf("layout %+v, %v, %v; want 8 buckets recorded by the stack, undated", l, found, err)
			}
			if err := call(8); err != nil {
				t.Fatalf("a deployment with the same count: %v", err)
			}
			if err := call(16); !isConditionFailed(err) {
				t.Fatalf("a deployment with 16: %v, want the condition to fail", err)
			}
			if attrBucketCount != outboxconf.LayoutBucketCount {
				t.Fatalf("the record's count attribute %q is not the messages' stamp %q", outboxconf.LayoutBucketCount, attrBucketCount)
			}
		})
	})

	t.Run("RecordShape", func(t *testing.T) {
		f := &fakeDB{update: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return &dynamodb.UpdateItemOutput{Attributes: map[string]types.AttributeValue{attrBucketCount: num(8)}}, nil
		}}
		if _, err := RecordLayout(t.Context(), f, Options{TableName: "orders-outbox", Clock: newStepClock(t0)}, "test", "test"); err != nil {
			t.Fatal(err)
		}
		wantShapes(t, f, "UpdateItem", &dynamodb.UpdateItemInput{
			TableName:                aws.String("orders-outbox"),
			Key:                      map[string]types.AttributeValue{"PK": str("OUTBOX#COORDINATION"), "SK": str("LAYOUT")},
			UpdateExpression:         aws.String(exprRecordLayout),
			ExpressionAttributeNames: map[string]string{"#count": "BucketCount", "#at": "RecordedAtUtc", "#by": "RecordedBy"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":count": num(8), ":now": num(lease.Ticks(t0)), ":by": str("test"),
			},
			ReturnValues: types.ReturnValueAllNew,
		})
	})
}

// allBucketsUpTo returns 0..n-1.
func allBucketsUpTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// stackCall turns a call in the AWS SDK for JavaScript's parameter form
// (strings and numbers as {"S": …} and {"N": …}) into the Go SDK's input.
func stackCall(p map[string]any) *dynamodb.UpdateItemInput {
	values := func(m any) map[string]types.AttributeValue {
		out := map[string]types.AttributeValue{}
		for k, v := range m.(map[string]any) {
			av := v.(map[string]any)
			if s, ok := av["S"]; ok {
				out[k] = str(s.(string))
			} else {
				out[k] = &types.AttributeValueMemberN{Value: av["N"].(string)}
			}
		}
		return out
	}
	names := map[string]string{}
	for k, v := range p["ExpressionAttributeNames"].(map[string]any) {
		names[k] = v.(string)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(p["TableName"].(string)),
		Key:                       values(p["Key"]),
		UpdateExpression:          aws.String(p["UpdateExpression"].(string)),
		ConditionExpression:       aws.String(p["ConditionExpression"].(string)),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values(p["ExpressionAttributeValues"]),
	}
}
