package outboxddb

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// coverageQuery is the coordination Query limited to sort keys starting
// with prefix.
func coverageQuery(prefix string) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:                 aws.String("outbox"),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		ExpressionAttributeNames:  map[string]string{"#pk": "PK", "#sk": "SK"},
		ExpressionAttributeValues: item{":pk": S("OUTBOX#COORDINATION"), ":prefix": S(prefix)},
		ConsistentRead:            aws.Bool(true),
	}
}

func TestCoverage(t *testing.T) {
	// RequestShapes_ReadCoverage_ReadsTheHintedLeasesAndTheHeartbeats pins
	// the trust check's read on a large table: one strongly consistent Query
	// per hinted bucket for its lease item, then one for the heartbeats, and a
	// view of exactly those.
	t.Run("RequestShapes_ReadCoverage_ReadsTheHintedLeasesAndTheHeartbeats", func(t *testing.T) {
		s, f, _ := shapeStore(t, 1024)
		f.query = func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			switch prefix := in.ExpressionAttributeValues[":prefix"].(*types.AttributeValueMemberS).Value; prefix {
			case "RELAY#":
				return &dynamodb.QueryOutput{Items: []item{relayItem("relay-a", t0Ticks, false), relayItem("relay-b", t0Ticks, true)}}, nil
			case "LEASE#0000000042":
				return &dynamodb.QueryOutput{Items: []item{{"PK": S("OUTBOX#COORDINATION"), "SK": S("LEASE#0000000042"), "Owner": S("relay-a"), "ExpiresAtUtc": N(t0Plus5s)}}}, nil
			default:
				return &dynamodb.QueryOutput{}, nil // bucket 7 was never claimed
			}
		}
		view, partial, err := s.ReadCoverage(context.Background(), []int{42, 7, 42, 1024})
		if err != nil || !partial {
			t.Fatalf("partial %v, %v", partial, err)
		}
		wantOps(t, f, "Query", "Query", "Query")
		wantShapes(t, f, "Query", coverageQuery("LEASE#0000000042"), coverageQuery("LEASE#0000000007"), coverageQuery("RELAY#"))
		if !view.ReadAt.Equal(t0) || len(view.Leases) != 1 || view.Leases[0].Bucket != 42 || view.Leases[0].Owner != "relay-a" ||
			len(view.Relays) != 2 || view.Relays[0].RelayID != "relay-a" || !view.Relays[1].Stopped {
			t.Fatalf("view %+v", view)
		}
	})

	// ReadCoverage_ReadsTheWholePartition_WhenThatIsNoDearer: a small
	// table, or many buckets at once, is read whole, in one Query.
	t.Run("ReadCoverage_ReadsTheWholePartition_WhenThatIsNoDearer", func(t *testing.T) {
		cases := []struct {
			buckets int
			check   []int
		}{
			{64, []int{3}},               // 64 lease items cost two read units: no cheaper
			{1024, []int{1, 2, 3, 4, 5}}, // more buckets than a wake-up names
		}
		for _, c := range cases {
			s, f, _ := shapeStore(t, c.buckets)
			f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
				return &dynamodb.QueryOutput{Items: []item{leaseItem(3, "relay-a", t0Plus5s), relayItem("relay-a", t0Ticks, false)}}, nil
			}
			view, partial, err := s.ReadCoverage(context.Background(), c.check)
			if err != nil || partial {
				t.Fatalf("%d buckets, checking %v: partial %v, %v", c.buckets, c.check, partial, err)
			}
			wantShapes(t, f, "Query", coordinationQuery())
			if len(view.Leases) != 1 || len(view.Relays) != 1 || !view.ReadAt.Equal(t0) {
				t.Fatalf("view %+v", view)
			}
		}
	})

	// RequestShapes_ReadLeases pins the second look at a bucket a trust
	// check left to a claiming peer: on a large table one strongly consistent
	// Query of the bucket's lease item, on a small one (or for many buckets)
	// one Query of every lease item, and only the asked buckets' leases.
	t.Run("RequestShapes_ReadLeases", func(t *testing.T) {
		for _, c := range []struct {
			buckets int
			check   []int
			queries []any
		}{
			{1024, []int{42, 7}, []any{coverageQuery("LEASE#0000000042"), coverageQuery("LEASE#0000000007")}},
			{8, []int{3}, []any{coverageQuery("LEASE#")}},
			{1024, []int{1, 2, 3, 4, 5}, []any{coverageQuery("LEASE#")}},
		} {
			s, f, _ := shapeStore(t, c.buckets)
			f.query = func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
				switch in.ExpressionAttributeValues[":prefix"].(*types.AttributeValueMemberS).Value {
				case "LEASE#0000000042":
					return &dynamodb.QueryOutput{Items: []item{{"PK": S("OUTBOX#COORDINATION"), "SK": S("LEASE#0000000042"), "Owner": S("relay-a"), "ExpiresAtUtc": N(t0Plus5s)}}}, nil
				case "LEASE#":
					return &dynamodb.QueryOutput{Items: []item{leaseItem(0, "", t0Ticks), leaseItem(3, "relay-a", t0Plus5s)}}, nil
				default:
					return &dynamodb.QueryOutput{}, nil // never claimed
				}
			}
			leases, err := s.ReadLeases(context.Background(), c.check)
			if err != nil {
				t.Fatal(err)
			}
			wantShapes(t, f, "Query", c.queries...)
			if len(leases) != 1 || !slices.Contains(c.check, leases[0].Bucket) || leases[0].Owner != "relay-a" {
				t.Fatalf("%d buckets, checking %v: leases %+v", c.buckets, c.check, leases)
			}
		}
	})
}
