package outboxlocal

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestReadCommitted(t *testing.T) {
	t.Parallel()
	// Two new items: the second becomes visible 10 ms into the commit, the
	// first at 20 ms, and the transaction is answered then.
	secondFirst := ReadCommitted{Schedule: func(n int) []time.Duration {
		return []time.Duration{20 * time.Millisecond, 10 * time.Millisecond}[:n]
	}}
	commit := func(t *testing.T, d *DynamoDB, table string, done chan<- error) {
		_, err := d.Client.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: key("B", "1")}},
			{Put: &types.Put{TableName: aws.String(table), Item: key("B", "2")}},
		}})
		done <- err
	}

	t.Run("AQueryDuringACommit_SeesASubset_AndACountCountsTheSame", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			d := newDynamoDB(t, WithoutEnvironment(), InMemory(), WithReadCommitted(secondFirst))
			table := createTable(t, d)
			start := time.Now()
			done := make(chan error, 1)
			go commit(t, d, table, done)
			time.Sleep(15 * time.Millisecond)
			out, err := query(t.Context(), d.Client, table, "B", true)
			if err != nil {
				t.Fatal(err)
			}
			if got := sortKeys(out.Items); !slices.Equal(got, []string{"2"}) || out.Count != 1 {
				t.Fatalf("query 15 ms into the commit: %v (count %d), want [2]", got, out.Count)
			}
			// A count of both numbers, and a one-item page, read the same
			// subset: the hidden item is not there to be counted or to end
			// the page.
			counted, err := d.Client.Query(t.Context(), &dynamodb.QueryInput{
				TableName:                 aws.String(table),
				KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :a AND :b"),
				ExpressionAttributeNames:  map[string]string{"#pk": DefaultPartitionKey, "#sk": DefaultSortKey},
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("B"), ":a": str("1"), ":b": str("1")},
				ConsistentRead:            aws.Bool(true), Select: types.SelectCount, Limit: aws.Int32(1),
			})
			if err != nil || counted.Count != 0 {
				t.Fatalf("count of [1, 1] during the commit: %v, %v; want 0", counted, err)
			}
			if get(t, d.Client, table, "B", "1") != nil {
				t.Fatal("GetItem read the item not yet visible")
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took != 20*time.Millisecond {
				t.Fatalf("the transaction was answered after %v, want 20ms: when its last item became visible", took)
			}
			out, err = query(t.Context(), d.Client, table, "B", true)
			if err != nil || !slices.Equal(sortKeys(out.Items), []string{"1", "2"}) {
				t.Fatalf("after the answer: %v, %v", out, err)
			}
			if got := d.ReadCommittedCounts(); got != (ReadCommittedCounts{Commits: 1, PartialReads: 2, PartialCounts: 1}) {
				t.Fatalf("counts %+v", got)
			}
		})
	})

	t.Run("RequestsNamingAnItemOfACommitInProgress_AreRefusedAsConflicts", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			d := newDynamoDB(t, WithoutEnvironment(), InMemory(), WithReadCommitted(secondFirst))
			table := createTable(t, d)
			done := make(chan error, 1)
			go commit(t, d, table, done)
			time.Sleep(15 * time.Millisecond)

			_, err := d.Client.TransactGetItems(t.Context(), &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: aws.String(table), Key: key("A", "0")}},
				{Get: &types.Get{TableName: aws.String(table), Key: key("B", "2")}},
			}})
			var canceled *types.TransactionCanceledException
			if !errors.As(err, &canceled) || len(canceled.CancellationReasons) != 2 ||
				aws.ToString(canceled.CancellationReasons[0].Code) != "None" || aws.ToString(canceled.CancellationReasons[1].Code) != "TransactionConflict" {
				t.Fatalf("TransactGetItems of a visible item of the commit: %v, want a TransactionConflict for it", err)
			}
			_, err = d.Client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("B", "2")})
			var conflict *types.TransactionConflictException
			if !errors.As(err, &conflict) {
				t.Fatalf("DeleteItem during the commit: %v, want TransactionConflictException", err)
			}
			out, err := d.Client.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
				table: {{DeleteRequest: &types.DeleteRequest{Key: key("B", "1")}}, {PutRequest: &types.PutRequest{Item: key("C", "1")}}},
			}})
			if err != nil || len(out.UnprocessedItems[table]) != 2 || get(t, d.Client, table, "C", "1") != nil {
				t.Fatalf("BatchWriteItem during the commit: %v, %v; want every request unprocessed", out, err)
			}
			if got := d.ReadCommittedCounts().Conflicts; got != 3 {
				t.Fatalf("conflicts %d, want 3", got)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, err := d.Client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("B", "2")}); err != nil {
				t.Fatalf("DeleteItem after the commit: %v", err)
			}
		})
	})

	t.Run("ItemsThatExisted_AndTransactionsWithoutNewItems_ChangeAtOnce", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			d := newDynamoDB(t, WithoutEnvironment(), InMemory(), WithReadCommitted(ReadCommitted{Seed: 1, MaxCommit: time.Second}))
			table := createTable(t, d)
			put(t, d.Client, table, key("B", "1"))
			start := time.Now()
			replaced := key("B", "1")
			replaced["V"] = str("new")
			if _, err := d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: replaced}},
			}}); err != nil {
				t.Fatal(err)
			}
			if time.Since(start) != 0 || scalarText(get(t, d.Client, table, "B", "1")["V"]) != "new" {
				t.Fatalf("a replacement took %v to commit", time.Since(start))
			}
			if got := d.ReadCommittedCounts(); got.Commits != 0 {
				t.Fatalf("counts %+v", got)
			}
		})
	})

	t.Run("DrawnCommits_LastUpToTheMaximum_AndReplayForASeed", func(t *testing.T) {
		t.Parallel()
		run := func() []time.Duration {
			var took []time.Duration
			synctest.Test(t, func(t *testing.T) {
				d := newDynamoDB(t, WithoutEnvironment(), InMemory(), WithReadCommitted(ReadCommitted{Seed: 7, MaxCommit: 100 * time.Millisecond}))
				table := createTable(t, d)
				for i := range 5 {
					start := time.Now()
					if _, err := d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
						{Put: &types.Put{TableName: aws.String(table), Item: key("P", string(rune('a'+i)))}},
					}}); err != nil {
						t.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
			})
			return took
		}
		first := run()
		if !slices.Equal(first, run()) || slices.Max(first) >= 100*time.Millisecond || slices.Max(first) == 0 {
			t.Fatalf("commit times %v: want draws below 100ms, the same for one seed", first)
		}
	})

	t.Run("IsRefusedWithAnExternalEndpoint", func(t *testing.T) {
		t.Parallel()
		_, err := StartDynamoDB(t.Context(), WithEndpoint("http://127.0.0.1:1"), WithReadCommitted(ReadCommitted{MaxCommit: time.Second}))
		if err == nil {
			t.Fatal("StartDynamoDB accepted read-committed commits for an external endpoint")
		}
	})
}
