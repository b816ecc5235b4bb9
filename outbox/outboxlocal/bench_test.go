package outboxlocal

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// BenchmarkEmbeddedPutItem measures message-sized puts through the SDK,
// the Counter and the compensating layer.
func BenchmarkEmbeddedPutItem(b *testing.B) {
	d := newDynamoDB(b, WithoutEnvironment())
	table := createTable(b, d)
	var seq atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			item := itemOfSize(b, "OUTBOX#MESSAGES#"+strconv.Itoa(int(seq.Load()%8)), strconv.FormatInt(seq.Add(1), 10), 512)
			item["Key"] = bin([]byte{})
			if _, err := d.Client.PutItem(b.Context(), &dynamodb.PutItemInput{
				TableName:                           aws.String(table),
				Item:                                item,
				ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
}

// BenchmarkEmbeddedQuery measures 100-item consistent queries of one
// partition, alone in its table and beside 1,000 items of 10 other
// partitions: the layer routes a query to its partition's server table,
// so the two rates should match.
func BenchmarkEmbeddedQuery(b *testing.B) {
	for _, others := range []int{0, 10} {
		b.Run("OtherPartitions="+strconv.Itoa(others), func(b *testing.B) {
			d := newDynamoDB(b, WithoutEnvironment())
			table := createTable(b, d)
			for p := range others + 1 {
				pk := "Q"
				if p > 0 {
					pk = "other-" + strconv.Itoa(p)
				}
				for i := range 100 {
					put(b, d.Client, table, itemOfSize(b, pk, strconv.Itoa(i), 512))
				}
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					out, err := query(b.Context(), d.Client, table, "Q", true)
					if err != nil || out.Count != 100 {
						b.Fatal(out, err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
		})
	}
}
