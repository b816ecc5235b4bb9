package outboxlocal

import (
	"maps"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestCounter(t *testing.T) {
	t.Parallel()
	t.Run("CountsSince", func(t *testing.T) {
		t.Parallel()
		prev := Counts{Requests: map[string]int{"PutItem": 2}, Refused: 1, WriteUnits: 3, OpWriteUnits: map[string]float64{"PutItem": 3}}
		now := Counts{Requests: map[string]int{"PutItem": 5, "Query": 1}, Refused: 4, Throttles: 1, ReadUnits: 0.5, WriteUnits: 9,
			OpReadUnits: map[string]float64{"Query": 0.5}, OpWriteUnits: map[string]float64{"PutItem": 9}}
		got := now.Since(prev)
		if !maps.Equal(got.Requests, map[string]int{"PutItem": 3, "Query": 1}) || got.Refused != 3 || got.Throttles != 1 ||
			got.ReadUnits != 0.5 || got.WriteUnits != 6 || got.OpWriteUnits["PutItem"] != 6 || got.TotalRequests() != 4 {
			t.Fatalf("since: %+v", got)
		}
		if now.Requests["PutItem"] != 5 {
			t.Fatal("Since modified its receiver")
		}
	})

	t.Run("CapacityUnitsForKnownItemSizes", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t, WithoutEnvironment())
		table := createTable(t, d)
		c := d.Client
		ctx := t.Context()
		step := func(name string, wantRead, wantWrite float64, do func()) {
			t.Helper()
			before := d.Counter.Snapshot()
			do()
			got := d.Counter.Snapshot().Since(before)
			if got.ReadUnits != wantRead || got.WriteUnits != wantWrite {
				t.Errorf("%s: %v read and %v write units, want %v and %v", name, got.ReadUnits, got.WriteUnits, wantRead, wantWrite)
			}
		}
		const kb = 1024

		step("1.5 KB put", 0, 2, func() { put(t, c, table, itemOfSize(t, "P", "a", 1536)) })
		step("1.5 KB put in a transaction", 0, 4, func() {
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: itemOfSize(t, "P", "b", 1536)}},
			}})
			if err != nil {
				t.Fatal(err)
			}
		})
		step("5 KB put", 0, 5, func() { put(t, c, table, itemOfSize(t, "P", "c", 5*kb)) })
		getItem := func(sk string, consistent bool) func() {
			return func() {
				_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("P", sk), ConsistentRead: aws.Bool(consistent)})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		step("5 KB strongly consistent get", 2, 0, getItem("c", true))
		step("5 KB eventually consistent get", 1, 0, getItem("c", false))
		step("missing item, eventually consistent", 0.5, 0, getItem("none", false))

		for i := range 3 {
			put(t, c, table, itemOfSize(t, "Q", strconv.Itoa(i), 1536))
		}
		queryQ := func(consistent bool) func() {
			return func() {
				out, err := query(ctx, c, table, "Q", consistent)
				if err != nil || out.Count != 3 {
					t.Fatalf("query: %v items, %v", out, err)
				}
			}
		}
		// 3 × 1.5 KB = 4.5 KB, summed before rounding: 2 units, not 3.
		step("4.5 KB strongly consistent query", 2, 0, queryQ(true))
		step("4.5 KB eventually consistent query", 1, 0, queryQ(false))

		step("refused put on a 1.5 KB item", 0, 2, func() {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(table), Item: key("P", "a"),
				ConditionExpression: aws.String("attribute_not_exists(PK)"),
			})
			if err == nil {
				t.Fatal("the conditional put was applied")
			}
		})
		// The updated item is 5 KB + 5 bytes: charged for the larger, new one.
		step("small update of a 5 KB item", 0, 6, func() {
			_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: key("P", "c"),
				UpdateExpression:          aws.String("SET Flag = :t"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}},
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		step("delete of a 1.5 KB item", 0, 2, func() {
			if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("P", "a")}); err != nil {
				t.Fatal(err)
			}
		})
		step("batch delete of three 1.5 KB items", 0, 6, func() {
			var writes []types.WriteRequest
			for i := range 3 {
				writes = append(writes, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key("Q", strconv.Itoa(i))}})
			}
			out, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: writes}})
			if err != nil || len(out.UnprocessedItems) > 0 {
				t.Fatalf("batch: %v, %v", out, err)
			}
		})

		got := d.Counter.Snapshot()
		if got.Refused != 1 || got.Throttles != 0 || got.OpWriteUnits["TransactWriteItems"] != 4 || got.OpReadUnits["Query"] != 3 {
			t.Fatalf("totals %+v", got)
		}
		d.Counter.Reset()
		if got := d.Counter.Snapshot(); got.TotalRequests() != 0 || got.WriteUnits != 0 {
			t.Fatalf("after Reset: %+v", got)
		}
	})

	// An attempt the endpoint refuses without doing anything counts as a
	// request and as failed, and is not charged; a refused conditional write
	// is charged and is not failed.
	t.Run("CountsFailedAttempts", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t, WithoutEnvironment())
		table := createTable(t, d)
		before := d.Counter.Snapshot()
		if _, err := query(t.Context(), d.Client, table+"-missing", "P", true); err == nil {
			t.Fatal("a query of a missing table succeeded")
		}
		put(t, d.Client, table, key("P", "a"))
		if _, err := d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("P", "a"),
			ConditionExpression: aws.String("attribute_not_exists(PK)")}); err == nil {
			t.Fatal("the conditional put was applied")
		}
		got := d.Counter.Snapshot().Since(before)
		if got.Requests["Query"] != 1 || got.Failed["Query"] != 1 || got.ReadUnits != 0 {
			t.Errorf("missing table: %d queries, %d failed, %v read units; want 1, 1 and 0", got.Requests["Query"], got.Failed["Query"], got.ReadUnits)
		}
		if got.Requests["PutItem"] != 2 || got.Failed["PutItem"] != 0 || got.Refused != 1 {
			t.Errorf("puts: %d sent, %d failed, %d refused; want 2, 0 and 1", got.Requests["PutItem"], got.Failed["PutItem"], got.Refused)
		}
	})
}
