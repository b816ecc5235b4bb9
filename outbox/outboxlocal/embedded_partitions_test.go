package outboxlocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

func TestEmbeddedPartitions(t *testing.T) {
	t.Parallel()
	// A Query costs what the server evaluates: the items of the table it is
	// sent to. Partition A holds 10 items, B and C 100 each; the server
	// table the Query of A is routed to holds A's 10, while the user's
	// table reports all 210.
	t.Run("QueryEvaluatesOnlyItsPartition", func(t *testing.T) {
		t.Parallel()
		s, c, table := newPartitionedTable(t)
		fill(t, c, table, map[string]int{"A": 10, "B": 100, "C": 100})
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :after"),
			ExpressionAttributeNames:  map[string]string{"#pk": DefaultPartitionKey, "#sk": DefaultSortKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("A"), ":after": str("003")},
			ConsistentRead:            aws.Bool(true),
		}
		out, err := c.Query(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sortKeys(out.Items), []string{"004", "005", "006", "007", "008", "009"}; !slices.Equal(got, want) {
			t.Fatalf("query: %v, want %v", got, want)
		}
		body := mustJSON(map[string]any{
			"TableName":                 table,
			"KeyConditionExpression":    *in.KeyConditionExpression,
			"ExpressionAttributeNames":  in.ExpressionAttributeNames,
			"ExpressionAttributeValues": map[string]any{":pk": map[string]string{"S": "A"}, ":after": map[string]string{"S": "003"}},
		})
		var routed struct{ TableName string }
		s.mu.RLock()
		err = json.Unmarshal(s.route("Query", body), &routed)
		s.mu.RUnlock()
		if err != nil {
			t.Fatal(err)
		}
		if evaluated := serverItemCount(t, s, routed.TableName); evaluated != 10 {
			t.Fatalf("the query of A is sent to a table of %d items (%s), want A's 10", evaluated, routed.TableName)
		}
		if total := describedItems(t, c, table); total != 210 {
			t.Fatalf("DescribeTable ItemCount %d, want 210", total)
		}
	})

	// A Scan with a small Limit walks every partition, and its pages
	// together return each item exactly once; with a filter, Limit counts
	// the items evaluated, as the server counts them in one table.
	t.Run("ScanPagesReturnEveryItemOnce", func(t *testing.T) {
		t.Parallel()
		_, c, table := newPartitionedTable(t)
		sizes := map[string]int{"A": 4, "B": 1, "C": 7, "D": 3, "E": 5, "F": 2, "G": 6}
		want := fill(t, c, table, sizes)
		for _, filtered := range []bool{false, true} {
			in := &dynamodb.ScanInput{TableName: aws.String(table), Limit: aws.Int32(3), ConsistentRead: aws.Bool(true)}
			if filtered {
				in.FilterExpression = aws.String("#n < :half")
				in.ExpressionAttributeNames = map[string]string{"#n": "N"}
				in.ExpressionAttributeValues = map[string]types.AttributeValue{":half": num(3)}
			}
			var got []string
			pages := 0
			for p := dynamodb.NewScanPaginator(c, in); p.HasMorePages(); pages++ {
				page, err := p.NextPage(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Items) > 3 || int(page.Count) != len(page.Items) {
					t.Fatalf("page of %d items, Count %d, Limit 3", len(page.Items), page.Count)
				}
				for _, item := range page.Items {
					got = append(got, scalarText(item[DefaultPartitionKey])+"/"+scalarText(item[DefaultSortKey]))
				}
			}
			expect := want
			if filtered {
				expect = slices.DeleteFunc(slices.Clone(want), func(id string) bool { return id[strings.Index(id, "/")+3] >= '3' })
			}
			slices.Sort(got)
			if !slices.Equal(got, expect) {
				t.Fatalf("filtered %v: scanned %v, want %v", filtered, got, expect)
			}
			if total := 28; !filtered && pages < total/3 {
				t.Fatalf("%d pages of at most 3 items for %d items", pages, total)
			}
		}
	})

	// Batches and transactions span partitions: a batch is regrouped and
	// answered under the user's table, and a cancelled transaction leaves
	// every partition as it was.
	t.Run("BatchesAndTransactionsSpanPartitions", func(t *testing.T) {
		t.Parallel()
		_, c, table := newPartitionedTable(t)
		fill(t, c, table, map[string]int{"A": 2, "B": 2})
		got, err := c.BatchGetItem(t.Context(), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			table: {Keys: []map[string]types.AttributeValue{key("A", "001"), key("B", "000"), key("Z", "000")}, ConsistentRead: aws.Bool(true)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for name, items := range got.Responses {
			for _, item := range items {
				ids = append(ids, name+":"+scalarText(item[DefaultPartitionKey])+"/"+scalarText(item[DefaultSortKey]))
			}
		}
		slices.Sort(ids)
		if want := []string{table + ":A/001", table + ":B/000"}; !slices.Equal(ids, want) {
			t.Fatalf("BatchGetItem: %v, want %v", ids, want)
		}
		_, err = c.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: key("C", "000")}},
			{Delete: &types.Delete{TableName: aws.String(table), Key: key("A", "000")}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("B", "009"), ConditionExpression: aws.String("attribute_exists(PK)")}},
		}})
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) || len(canceled.CancellationReasons) != 3 || aws.ToString(canceled.CancellationReasons[2].Code) != codeConditionFailed {
			t.Fatalf("transaction with a failing check: %v", err)
		}
		if get(t, c, table, "C", "000") != nil || get(t, c, table, "A", "000") == nil {
			t.Fatal("a cancelled transaction changed a partition")
		}
		got2, err := c.TransactGetItems(t.Context(), &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
			{Get: &types.Get{TableName: aws.String(table), Key: key("B", "001")}},
			{Get: &types.Get{TableName: aws.String(table), Key: key("A", "000")}},
		}})
		if err != nil || len(got2.Responses) != 2 || scalarText(got2.Responses[1].Item[DefaultPartitionKey]) != "A" {
			t.Fatalf("TransactGetItems: %+v, %v", got2, err)
		}
	})

	// DynamoDB requires a Query to name one partition; a condition on the
	// partition key other than equality is refused, not answered across
	// partitions.
	t.Run("QueryWithoutPartitionEqualityIsRefused", func(t *testing.T) {
		t.Parallel()
		_, c, table := newPartitionedTable(t)
		fill(t, c, table, map[string]int{"A": 1, "AB": 1})
		_, err := c.Query(t.Context(), &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			KeyConditionExpression:    aws.String("begins_with(#pk, :p)"),
			ExpressionAttributeNames:  map[string]string{"#pk": DefaultPartitionKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": str("A")},
		})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" || api.ErrorMessage() != "Query key condition not supported" {
			t.Fatalf("begins_with on the partition key: %v", err)
		}
	})

	// A global index query spans partitions, so adding a global index
	// merges the partitions back into one table first; as before, the
	// server indexes the items written after the index exists.
	t.Run("GlobalIndexMergesThePartitions", func(t *testing.T) {
		t.Parallel()
		s, c, table := newPartitionedTable(t)
		fill(t, c, table, map[string]int{"A": 2, "B": 3})
		_, err := c.UpdateTable(t.Context(), &dynamodb.UpdateTableInput{
			TableName:            aws.String(table),
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("N"), AttributeType: types.ScalarAttributeTypeN}},
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName:  aws.String("byN"),
				KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("N"), KeyType: types.KeyTypeHash}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := serverItemCount(t, s, table); n != 5 {
			t.Fatalf("the table holds %d items after the merge, want 5", n)
		}
		item := key("C", "000")
		item["N"] = num(7)
		put(t, c, table, item)
		out, err := c.Query(t.Context(), &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			IndexName:                 aws.String("byN"),
			KeyConditionExpression:    aws.String("N = :n"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(7)},
		})
		if err != nil || len(out.Items) != 1 || scalarText(out.Items[0][DefaultPartitionKey]) != "C" {
			t.Fatalf("index query: %+v, %v", out, err)
		}
		if q, err := query(t.Context(), c, table, "B", true); err != nil || len(q.Items) != 3 {
			t.Fatalf("query of B after the merge: %+v, %v", q, err)
		}
	})
}

// newPartitionedTable serves a fresh embedded server in memory and creates
// a table with the default key schema on it.
func newPartitionedTable(t *testing.T) (*embeddedServer, *dynamodb.Client, string) {
	t.Helper()
	s := newEmbeddedServer(nil)
	c := dynamodb.New(dynamodb.Options{
		Region:       DefaultRegion,
		Credentials:  credentials.NewStaticCredentialsProvider("spillway", "spillway", ""),
		BaseEndpoint: aws.String(inMemoryEndpoint),
		HTTPClient:   &http.Client{Transport: inMemoryTransport{handler: s}},
	})
	const table = "partitioned"
	if err := (&DynamoDB{Client: c}).CreateTable(t.Context(), table); err != nil {
		t.Fatal(err)
	}
	return s, c, table
}

// fill writes sizes[pk] items to each partition pk, with sort keys "000",
// "001", … and N their index, and returns their "pk/sk" ids in order.
func fill(t *testing.T, c *dynamodb.Client, table string, sizes map[string]int) []string {
	t.Helper()
	var ids []string
	var writes []types.WriteRequest
	flush := func() {
		if len(writes) == 0 {
			return
		}
		out, err := c.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: writes}})
		if err != nil || len(out.UnprocessedItems) > 0 {
			t.Fatalf("BatchWriteItem: %v, %d tables unprocessed", err, len(out.UnprocessedItems))
		}
		writes = nil
	}
	for _, pk := range sortedKeys(sizes) {
		for i := range sizes[pk] {
			sk := fmt.Sprintf("%03d", i)
			item := key(pk, sk)
			item["N"] = num(i)
			writes = append(writes, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
			ids = append(ids, pk+"/"+sk)
			if len(writes) == 25 {
				flush()
			}
		}
	}
	flush()
	slices.Sort(ids)
	return ids
}

// serverItemCount is the number of items of a table inside the server.
func serverItemCount(t *testing.T, s *embeddedServer, name string) int {
	t.Helper()
	resp := s.send(t.Context(), "DescribeTable", mustJSON(map[string]string{"TableName": name}))
	var out struct{ Table struct{ ItemCount int } }
	if resp.status != http.StatusOK || json.Unmarshal(resp.body, &out) != nil {
		t.Fatalf("describe %s: %d %s", name, resp.status, resp.body)
	}
	return out.Table.ItemCount
}

func describedItems(t *testing.T, c *dynamodb.Client, table string) int64 {
	t.Helper()
	out, err := c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToInt64(out.Table.ItemCount)
}
