package outboxddb

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox"
)

// TestRequestShapes_SettledRound_ReadsHeartbeatsByPrefix_AndKeepsWithTheWrittenExpiry
// pins a settled relay's round: the contract's heartbeat, the coordination
// Query limited to RELAY# (the release's read with the other prefix), and
// the contract's keep, whose version is the expiry the relay wrote in its
// previous round.
func TestRequestShapes_SettledRound_ReadsHeartbeatsByPrefix_AndKeepsWithTheWrittenExpiry(t *testing.T) {
	s, f, clock := shapeStore(t, 4)
	expiry := map[int]string{0: t0Plus5s, 1: t0Plus5s, 2: t0Plus5s, 3: t0Plus5s}
	f.query = func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
		now := ticksAt(clock.Now().Sub(t0))
		relays := []item{relayItem("relay-a", now, false), relayItem("relay-b", now, false)}
		if in.ExpressionAttributeValues[":prefix"] != nil {
			return &dynamodb.QueryOutput{Items: relays}, nil
		}
		return &dynamodb.QueryOutput{Items: append([]item{
			leaseItem(0, "relay-a", expiry[0]), leaseItem(1, "relay-a", expiry[1]),
			leaseItem(2, "relay-b", expiry[2]), leaseItem(3, "relay-b", expiry[3]),
		}, relays...)}, nil
	}
	var st outbox.RoundState
	for round := range 4 {
		at := time.Duration(round) * 10 * time.Second
		clock.Set(t0.Add(at))
		f.reset()
		for _, b := range []int{2, 3} { // relay-b keeps its leases
			expiry[b] = ticksAt(at + 25*time.Second)
		}
		acq, err := s.AcquireLeases(context.Background(), testLease, st)
		if err != nil || acq.Refused != 0 || len(acq.Owned) != 2 {
			t.Fatalf("round %d: %+v, %v", round, acq, err)
		}
		st.Round++
		st.Standby, st.Settled = acq.Standby, acq.Settled
		if !acq.Settled.IsSettled() {
			t.Fatalf("round %d did not leave the fleet settled", round)
		}
		seen := expiry[0]
		for _, b := range []int{0, 1} {
			expiry[b] = ticksAt(at + 30*time.Second)
		}
		if !acq.Quiet {
			continue
		}
		wantOps(t, f, "PutItem", "Query", "UpdateItem", "UpdateItem")
		wantShapes(t, f, "PutItem", heartbeatPut("relay-a", ticksAt(at)))
		wantShapes(t, f, "Query", &dynamodb.QueryInput{
			TableName:                 aws.String("outbox"),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
			ExpressionAttributeNames:  map[string]string{"#pk": "PK", "#sk": "SK"},
			ExpressionAttributeValues: item{":pk": S("OUTBOX#COORDINATION"), ":prefix": S("RELAY#")},
			ConsistentRead:            aws.Bool(true),
		})
		keep := func(b int) *dynamodb.UpdateItemInput {
			return &dynamodb.UpdateItemInput{
				TableName:                 aws.String("outbox"),
				Key:                       leaseKeyLiteral(b),
				UpdateExpression:          aws.String("SET #expires = :expiry"),
				ConditionExpression:       aws.String("#owner = :me AND #expires = :seen AND #expires <= :expiry"),
				ExpressionAttributeNames:  map[string]string{"#owner": "Owner", "#expires": "ExpiresAtUtc"},
				ExpressionAttributeValues: item{":me": S("relay-a"), ":seen": N(seen), ":expiry": N(expiry[0])},
			}
		}
		wantShapes(t, f, "UpdateItem", keep(0), keep(1))
		return
	}
	t.Fatal("no quiet round within a lease duration of settling")
}
