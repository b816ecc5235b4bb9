package outboxlocal

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestFaults(t *testing.T) {
	t.Parallel()
	t.Run("ThrottleNext", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t, WithoutEnvironment(), WithMaxAttempts(1))
		table := createTable(t, d)

		d.Faults.ThrottleNext("PutItem", 1)
		_, err := d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("P", "1")})
		var exceeded *types.ProvisionedThroughputExceededException
		if !errors.As(err, &exceeded) {
			t.Fatalf("got %v, want ProvisionedThroughputExceededException", err)
		}
		if get(t, d.Client, table, "P", "1") != nil {
			t.Fatal("the throttled put reached the server")
		}
		d.Faults.ThrottleNextWith("GetItem", 1, Throttling)
		_, err = d.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("P", "1")})
		var throttling *types.ThrottlingException
		if !errors.As(err, &throttling) {
			t.Fatalf("got %v, want ThrottlingException", err)
		}
		if got := d.Counter.Snapshot(); got.Throttles != 2 || got.Requests["PutItem"] != 1 || got.Requests["GetItem"] != 2 || got.OpWriteUnits["PutItem"] != 0 {
			t.Fatalf("counts %+v", got)
		}

		// With retries, two throttles cost two extra attempts and then the
		// put succeeds; without throttle retries the first one is returned.
		retrying := d.NewClient(func(o *dynamodb.Options) { o.RetryMaxAttempts = 3 })
		before := d.Counter.Snapshot()
		d.Faults.ThrottleNext("PutItem", 2)
		put(t, retrying, table, key("P", "2"))
		if got := d.Counter.Snapshot().Since(before); got.Requests["PutItem"] != 3 || got.Throttles != 2 || got.WriteUnits != 1 {
			t.Fatalf("retried put: %+v", got)
		}
		strict := newDynamoDB(t, WithoutEnvironment(), WithoutThrottleRetries())
		strictTable := createTable(t, strict)
		strict.Faults.ThrottleNext("PutItem", 1)
		_, err = strict.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(strictTable), Item: key("P", "1")})
		if !errors.As(err, &exceeded) || strict.Counter.Snapshot().Requests["PutItem"] != 1 {
			t.Fatalf("without throttle retries: %v after %d attempts", err, strict.Counter.Snapshot().Requests["PutItem"])
		}
	})

	t.Run("UnprocessedDeletes", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t, WithoutEnvironment())
		table := createTable(t, d)
		deletes := func(sks ...string) map[string][]types.WriteRequest {
			var writes []types.WriteRequest
			for _, sk := range sks {
				writes = append(writes, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key("B", sk)}})
			}
			return map[string][]types.WriteRequest{table: writes}
		}
		for i := range 5 {
			put(t, d.Client, table, key("B", strconv.Itoa(i)))
		}
		before := d.Counter.Snapshot()
		d.Faults.UnprocessedDeletes(2)
		out, err := d.Client.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: deletes("0", "1", "2", "3", "4")})
		if err != nil {
			t.Fatal(err)
		}
		var held []string
		for _, w := range out.UnprocessedItems[table] {
			held = append(held, scalarText(w.DeleteRequest.Key[DefaultSortKey]))
		}
		if !slices.Equal(held, []string{"3", "4"}) {
			t.Fatalf("unprocessed %v, want the last two deletes", held)
		}
		rest, err := query(t.Context(), d.Client, table, "B", true)
		if err != nil || !slices.Equal(sortKeys(rest.Items), []string{"3", "4"}) {
			t.Fatalf("left in the table: %v, %v", sortKeys(rest.Items), err)
		}
		if got := d.Counter.Snapshot().Since(before); got.OpWriteUnits["BatchWriteItem"] != 3 {
			t.Fatalf("charged %v write units for 3 processed deletes", got.OpWriteUnits["BatchWriteItem"])
		}

		// A batch left with nothing to send is answered without a round trip.
		d.Faults.UnprocessedDeletes(10)
		out, err = d.Client.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: deletes("3", "4")})
		if err != nil || len(out.UnprocessedItems[table]) != 2 {
			t.Fatalf("all held: %v, %v", out, err)
		}
		if got := d.Counter.Snapshot().Since(before); got.Requests["BatchWriteItem"] != 2 {
			t.Fatalf("counted %d batches, want 2", got.Requests["BatchWriteItem"])
		}
		out, err = d.Client.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: deletes("3", "4")})
		if err != nil || len(out.UnprocessedItems[table]) != 0 {
			t.Fatalf("the fault outlived its batch: %v, %v", out.UnprocessedItems, err)
		}
	})

	t.Run("HideFromNextQuery", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t, WithoutEnvironment())
		table := createTable(t, d)
		for i := 1; i <= 3; i++ {
			put(t, d.Client, table, key("M", strconv.Itoa(i)))
		}
		d.Faults.HideFromNextQuery("M", "2")
		first, err := query(t.Context(), d.Client, table, "M", true)
		if err != nil {
			t.Fatal(err)
		}
		second, err := query(t.Context(), d.Client, table, "M", true)
		if err != nil {
			t.Fatal(err)
		}
		if got := sortKeys(first.Items); !slices.Equal(got, []string{"1", "3"}) || first.Count != 2 {
			t.Fatalf("first query: %v (count %d), want 1 and 3", got, first.Count)
		}
		if got := sortKeys(second.Items); !slices.Equal(got, []string{"1", "2", "3"}) {
			t.Fatalf("second query: %v, want every item", got)
		}
	})

	t.Run("LatencyRunsOnTheClock", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			d := newDynamoDB(t, InMemory(), WithoutEnvironment())
			table := createTable(t, d)
			d.Faults.Latency("GetItem", time.Minute)

			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := d.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("P", "1")})
				done <- err
			}()
			synctest.Wait()
			if got := d.Counter.Snapshot().Requests["GetItem"]; got != 0 {
				t.Fatalf("%d GetItem answered before the latency passed", got)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took != time.Minute {
				t.Fatalf("GetItem answered after %v, want the latency's minute", took)
			}

			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				_, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("P", "1")})
				done <- err
			}()
			synctest.Wait()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled during latency: %v", err)
			}
			d.Faults.Latency("GetItem", 0)
			get(t, d.Client, table, "P", "1")
		})
	})

	t.Run("LoseResponseRetriesAnAppliedRequest", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t, WithoutEnvironment())
		table := createTable(t, d)

		// The writer's PutItem: the retry of an applied put is refused, and
		// the refusal carries the item the first attempt stored.
		item := key("OUTBOX#MESSAGES#0", "0000000000000000001")
		item["MessageId"] = str("33333333-3333-4333-8333-333333333333")
		d.Faults.LoseResponse("PutItem")
		_, err := d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
			TableName:                           aws.String(table),
			Item:                                item,
			ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) || scalarText(ccf.Item["MessageId"]) != "33333333-3333-4333-8333-333333333333" {
			t.Fatalf("retry of an applied put: %v, want a refusal carrying the stored item", err)
		}
		if got := d.Counter.Snapshot(); got.Requests["PutItem"] != 2 || got.Refused != 1 {
			t.Fatalf("counts %+v", got)
		}

		// A transaction's retry carries the same ClientRequestToken and
		// succeeds without running again.
		d.Faults.LoseResponse("TransactWriteItems")
		_, err = d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
			TableName:           aws.String(table),
			Item:                key("OUTBOX#MESSAGES#0", "0000000000000000002"),
			ConditionExpression: aws.String("attribute_not_exists(PK)"),
		}}}})
		if err != nil {
			t.Fatalf("transaction with a lost response: %v", err)
		}
		if got := d.Counter.Snapshot(); got.Requests["TransactWriteItems"] != 2 || got.Refused != 1 {
			t.Fatalf("counts %+v", got)
		}
	})

	t.Run("StaleReadsHideRecentWritesFromEventuallyConsistentReads", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			d := newDynamoDB(t, InMemory(), WithoutEnvironment())
			table := createTable(t, d)
			put(t, d.Client, table, key("M", "1")) // before the fault: never lagging
			d.Faults.StaleReads(time.Second)
			put(t, d.Client, table, key("M", "2"))
			_, err := d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: key("M", "3")}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			read := func(consistent bool) []string {
				t.Helper()
				out, err := query(t.Context(), d.Client, table, "M", consistent)
				if err != nil {
					t.Fatal(err)
				}
				if int(out.Count) != len(out.Items) {
					t.Fatalf("count %d for %d items", out.Count, len(out.Items))
				}
				return sortKeys(out.Items)
			}
			getEventually := func(sk string) bool {
				out, err := d.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("M", sk)})
				if err != nil {
					t.Fatal(err)
				}
				return out.Item != nil
			}
			if got := read(false); !slices.Equal(got, []string{"1"}) || getEventually("2") {
				t.Fatalf("eventually consistent reads right after the writes: %v", got)
			}
			// A projection without the partition key: the query's key condition
			// names the partition.
			projected, err := d.Client.Query(t.Context(), &dynamodb.QueryInput{TableName: aws.String(table),
				KeyConditionExpression: aws.String("(PK = :pk)"), ProjectionExpression: aws.String("SK"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "M"}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := sortKeys(projected.Items); !slices.Equal(got, []string{"1"}) {
				t.Fatalf("eventually consistent projected query: %v", got)
			}
			if got := read(true); !slices.Equal(got, []string{"1", "2", "3"}) || get(t, d.Client, table, "M", "2") == nil {
				t.Fatalf("strongly consistent query: %v, want every item", got)
			}
			time.Sleep(time.Second)
			if got := read(false); !slices.Equal(got, []string{"1", "2", "3"}) || !getEventually("2") {
				t.Fatalf("eventually consistent query a lag later: %v, want every item", got)
			}
			// An update makes the item lag again; turning the fault off ends it.
			if _, err := d.Client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("M", "3"),
				UpdateExpression: aws.String("SET #a = :v"), ExpressionAttributeNames: map[string]string{"#a": "A"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "x"}}}); err != nil {
				t.Fatal(err)
			}
			if got := read(false); !slices.Equal(got, []string{"1", "2"}) {
				t.Fatalf("right after an update: %v", got)
			}
			d.Faults.StaleReads(0)
			if got := read(false); !slices.Equal(got, []string{"1", "2", "3"}) {
				t.Fatalf("with the fault off: %v", got)
			}
		})
	})

	t.Run("LoseResponseInReachesOnlyItsContext", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t, WithoutEnvironment())
		table := createTable(t, d)
		put := func(ctx context.Context, sk string) error {
			_, err := d.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
				TableName:           aws.String(table),
				Item:                key("OUTBOX#PARKED#0", sk),
				ConditionExpression: aws.String("attribute_not_exists(PK)"),
			}}}})
			return err
		}
		lost := d.Faults.LoseResponseIn(t.Context(), "TransactWriteItems", 10)
		// Another caller's transaction meanwhile is not touched.
		if err := put(t.Context(), "0000000000000000001"); err != nil {
			t.Fatalf("transaction outside the fault's context: %v", err)
		}
		// The aimed one is applied, its response lost and every retry
		// throttled: the caller sees a throttle, not a success.
		var pte *types.ProvisionedThroughputExceededException
		if err := put(lost, "0000000000000000002"); !errors.As(err, &pte) {
			t.Fatalf("transaction with a lost response and throttled retries: %v, want a throttle", err)
		}
		get(t, d.Client, table, "OUTBOX#PARKED#0", "0000000000000000002")
		if got := d.Counter.Snapshot(); got.Requests["TransactWriteItems"] < 3 || got.Refused != 0 {
			t.Fatalf("counts %+v: want the applied attempt and its throttled retries, nothing refused", got)
		}
	})
}
