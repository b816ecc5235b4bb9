package outboxddb

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox/lease"
)

func TestRequestShapesQuiet(t *testing.T) {
	// SettledRound_ReadsHeartbeatsByPrefix_AndKeepsWithTheWrittenExpiry
	// pins a settled relay's round: the contract's heartbeat, the coordination
	// Query limited to RELAY# (the release's read with the other prefix), and
	// the contract's keep, whose version is the expiry the relay wrote in its
	// previous round.
	t.Run("SettledRound_ReadsHeartbeatsByPrefix_AndKeepsWithTheWrittenExpiry", func(t *testing.T) {
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
		var st lease.RoundState
		for round := range 4 {
			at := time.Duration(round) * 10 * time.Second
			clock.Set(t0.Add(at))
			f.reset()
			for _, b := range []int{2, 3} { // relay-b keeps its leases
				expiry[b] = ticksAt(at + 25*time.Second)
			}
			acq, err := s.acquire(context.Background(), testLease, st)
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
			wantShapes(t, f, "UpdateItem", keepShape(0, seen, expiry[0]), keepShape(1, seen, expiry[0]))
			return
		}
		t.Fatal("no quiet round within a lease duration of settling")
	})

	// RoundWithTheRenewInterval_LeavesALeaseThatStillLastsUnrenewed
	// pins the round of a relay that passes its round interval (10 s, with a
	// 30 s lease): the contract's heartbeat with the keep-ahead mark and the
	// contract's read, and the contract's keep only for the lease with less
	// than 15 s left; the lease with 26 s left is owned without a request, so
	// a peer reading the table sees what it saw before: an unexpired lease of
	// a relay with a fresh heartbeat. A peer's heartbeat without the mark (a
	// relay of another language, live or stopped less than a lease ago) makes
	// the round keep both.
	t.Run("RoundWithTheRenewInterval_LeavesALeaseThatStillLastsUnrenewed", func(t *testing.T) {
		mark := func(it item) item {
			it["KeepsAhead"] = &types.AttributeValueMemberBOOL{Value: true}
			return it
		}
		keepBoth := []any{keepShape(0, ticksAt(26*time.Second), t0PlusL), keepShape(1, t0Plus5s, t0PlusL)}
		for _, c := range []struct {
			name      string
			peers     []item // the holder of bucket 2 among them
			unrenewed []int
			keeps     []any
		}{
			{"peer keeps ahead", []item{mark(relayItem("relay-b", ticksAt(-time.Second), false))},
				[]int{0}, []any{keepShape(1, t0Plus5s, t0PlusL)}},
			{"peer of another language", []item{relayItem("relay-b", ticksAt(-time.Second), false)}, nil, keepBoth},
			{"peer of another language stopped less than a lease ago", []item{
				mark(relayItem("relay-b", ticksAt(-time.Second), false)), relayItem("relay-c", ticksAt(-29*time.Second), true),
			}, nil, keepBoth},
		} {
			t.Run(c.name, func(t *testing.T) {
				s, f, _ := shapeStore(t, 3)
				f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
					return &dynamodb.QueryOutput{Items: append([]item{
						leaseItem(0, "relay-a", ticksAt(26*time.Second)),
						leaseItem(1, "relay-a", t0Plus5s),
						leaseItem(2, "relay-b", ticksAt(20*time.Second)),
						relayItem("relay-a", ticksAt(-10*time.Second), false),
					}, c.peers...)}, nil
				}
				req := lease.Request{RelayID: "relay-a", BucketCount: 3, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second}
				acq, err := s.acquire(context.Background(), req, lease.RoundState{Round: 3})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(acq.Owned, []int{0, 1}) || !slices.Equal(acq.Unrenewed, c.unrenewed) || acq.Refused != 0 {
					t.Fatalf("acquisition %+v", acq)
				}
				ops := []string{"PutItem", "Query"}
				for range c.keeps {
					ops = append(ops, "UpdateItem")
				}
				wantOps(t, f, ops...)
				wantShapes(t, f, "PutItem", markedHeartbeatPut("relay-a", t0Ticks))
				wantShapes(t, f, "Query", coordinationQuery())
				wantShapes(t, f, "UpdateItem", c.keeps...)
			})
		}
	})
}
