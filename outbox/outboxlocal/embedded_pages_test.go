package outboxlocal

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestEmbeddedPages(t *testing.T) {
	t.Parallel()
	// A Query reads at most 1 MB of items per page, ending with the item that
	// reaches it, and Limit cuts a page shorter; the pages together return
	// every item once. The page sizes are DynamoDB Local's, and the test runs
	// against an external endpoint too (SPILLWAY_DYNAMODB_ENDPOINT).
	t.Run("QueryPagesStopAtOneMegabyte", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		for _, c := range []struct {
			size  int
			limit int32
			pages []int
		}{
			{300 << 10, 0, []int{4, 2}},
			{393 << 10, 0, []int{3, 3}},
			{393 << 10, 2, []int{2, 2, 2}},
			{100 << 10, 0, []int{6}},
		} {
			pk := fmt.Sprintf("P-%d-%d", c.size, c.limit)
			for i := range 6 {
				put(t, d.Client, table, itemOfSize(t, pk, fmt.Sprint(i), c.size))
			}
			in := &dynamodb.QueryInput{
				TableName:                 aws.String(table),
				KeyConditionExpression:    aws.String("#pk = :pk"),
				ExpressionAttributeNames:  map[string]string{"#pk": DefaultPartitionKey},
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
				ConsistentRead:            aws.Bool(true),
			}
			if c.limit > 0 {
				in.Limit = aws.Int32(c.limit)
			}
			var pages []int
			var keys []string
			for {
				out, err := d.Client.Query(t.Context(), in)
				if err != nil {
					t.Fatal(err)
				}
				if int(out.Count) != len(out.Items) {
					t.Errorf("%s: count %d for %d items", pk, out.Count, len(out.Items))
				}
				if len(out.Items) > 0 {
					pages = append(pages, len(out.Items))
				}
				keys = append(keys, sortKeys(out.Items)...)
				if out.LastEvaluatedKey == nil {
					break
				}
				in.ExclusiveStartKey = out.LastEvaluatedKey
			}
			if !slices.Equal(pages, c.pages) || !slices.Equal(keys, []string{"0", "1", "2", "3", "4", "5"}) {
				t.Errorf("%d-byte items, limit %d: pages %v with keys %v, want pages %v with every key once", c.size, c.limit, pages, keys, c.pages)
			}
		}
	})
}
