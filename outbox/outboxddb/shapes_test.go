package outboxddb

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// The expected requests below are written out literally, not built from the
// package's constants: they pin the table contract (expression strings,
// placeholder names, attribute names, tick values) that writers and relays
// in other languages share.

var t0 = time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)

const (
	t0Ticks    = "639238464000000000" // 2026-09-01T08:00:00Z
	t0PlusL    = "639238464300000000" // + 30 s
	t0Plus5s   = "639238464050000000"
	t0MinusL   = "639238463700000000"
	t0Minus10L = "639238461000000000"
)

var testLease = lease.Request{RelayID: "relay-a", BucketCount: 4, LeaseDuration: 30 * time.Second}

func S(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func N(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func B(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }

type item = map[string]types.AttributeValue

func ticksAt(d time.Duration) string { return strconv.FormatInt(lease.Ticks(t0.Add(d)), 10) }

// shapeStore returns a store on a fake client with one request in flight at
// a time, so the request order is deterministic.
func shapeStore(t *testing.T, bucketCount int) (*Store, *fakeDB, *stepClock) {
	t.Helper()
	f := &fakeDB{}
	clock := newStepClock(t0)
	s, err := NewStore(f, StoreOptions{Options: Options{TableName: "outbox", BucketCount: bucketCount, MaxConcurrency: 1, Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	return s, f, clock
}

func wantShapes(t *testing.T, f *fakeDB, op string, wants ...any) {
	t.Helper()
	got := f.shapes(op)
	if len(got) != len(wants) {
		t.Fatalf("%s: %d requests, want %d:\n%v", op, len(got), len(wants), got)
	}
	for i, w := range wants {
		if got[i] != canon(w) {
			t.Errorf("%s #%d:\n got %s\nwant %s", op, i, got[i], canon(w))
		}
	}
}

func wantOps(t *testing.T, f *fakeDB, want ...string) {
	t.Helper()
	if got := f.ops(); !slices.Equal(got, want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
}

// wantOpsThen checks that f received first, in order, then concurrent in
// any order (requests the round sends side by side).
func wantOpsThen(t *testing.T, f *fakeDB, first []string, concurrent ...string) {
	t.Helper()
	got := f.ops()
	rest := slices.Sorted(slices.Values(concurrent))
	if len(got) != len(first)+len(concurrent) || !slices.Equal(got[:len(first)], first) ||
		!slices.Equal(slices.Sorted(slices.Values(got[len(first):])), rest) {
		t.Fatalf("requests %v, want %v then %v in any order", got, first, concurrent)
	}
}

func coordinationQuery() *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:                 aws.String("outbox"),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": "PK"},
		ExpressionAttributeValues: item{":pk": S("OUTBOX#COORDINATION")},
		ConsistentRead:            aws.Bool(true),
	}
}

func heartbeatPut(relay, at string) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                 aws.String("outbox"),
		Item:                      item{"PK": S("OUTBOX#COORDINATION"), "SK": S("RELAY#" + relay), "LastSeenUtc": N(at)},
		ConditionExpression:       aws.String("attribute_not_exists(#lastSeen) OR #lastSeen <= :now"),
		ExpressionAttributeNames:  map[string]string{"#lastSeen": "LastSeenUtc"},
		ExpressionAttributeValues: item{":now": N(at)},
	}
}

// markedHeartbeatPut is heartbeatPut with the keep-ahead mark, as a relay
// whose rounds leave leases unrenewed sends it.
func markedHeartbeatPut(relay, at string) *dynamodb.PutItemInput {
	in := heartbeatPut(relay, at)
	in.Item["KeepsAhead"] = &types.AttributeValueMemberBOOL{Value: true}
	return in
}

func leaseItem(bucket int, owner, expires string) item {
	it := item{"PK": S("OUTBOX#COORDINATION"), "SK": S(leaseSKLiteral(bucket))}
	if owner != "" {
		it["Owner"] = S(owner)
	}
	if expires != "" {
		it["ExpiresAtUtc"] = N(expires)
	}
	return it
}

func leaseSKLiteral(bucket int) string {
	return map[int]string{0: "LEASE#0000000000", 1: "LEASE#0000000001", 2: "LEASE#0000000002", 3: "LEASE#0000000003"}[bucket]
}

func relayItem(id, lastSeen string, stopped bool) item {
	it := item{"PK": S("OUTBOX#COORDINATION"), "SK": S("RELAY#" + id), "LastSeenUtc": N(lastSeen)}
	if stopped {
		it["StoppedAtUtc"] = N(lastSeen)
	}
	return it
}

func leaseKeyLiteral(bucket int) item {
	return item{"PK": S("OUTBOX#COORDINATION"), "SK": S(leaseSKLiteral(bucket))}
}

// keepShape is the table contract's keep of relay-a's lease on bucket b,
// read with expiry seen, renewed to expiry.
func keepShape(b int, seen, expiry string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String("outbox"),
		Key:                       leaseKeyLiteral(b),
		UpdateExpression:          aws.String("SET #expires = :expiry"),
		ConditionExpression:       aws.String("#owner = :me AND #expires = :seen AND #expires <= :expiry"),
		ExpressionAttributeNames:  map[string]string{"#owner": "Owner", "#expires": "ExpiresAtUtc"},
		ExpressionAttributeValues: item{":me": S("relay-a"), ":seen": N(seen), ":expiry": N(expiry)},
	}
}

func TestRequestShapes(t *testing.T) {
	t.Run("AcquisitionRound_HeartbeatReadKeepReleasePrune", func(t *testing.T) {
		s, f, _ := shapeStore(t, 4)
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			return &dynamodb.QueryOutput{Items: []item{
				leaseItem(0, "relay-a", t0Plus5s),
				leaseItem(1, "relay-a", t0Plus5s),
				leaseItem(2, "relay-a", t0Plus5s),
				leaseItem(3, "", ticksAt(-time.Second)),
				relayItem("relay-a", ticksAt(-10*time.Second), false),
				relayItem("relay-b", ticksAt(-time.Second), false),
				relayItem("relay-gone", ticksAt(-11*30*time.Second), false),
				relayItem("relay-stopped", ticksAt(-2*30*time.Second), true),
			}}, nil
		}
		acq, err := s.acquire(context.Background(), testLease, lease.RoundState{})
		if err != nil {
			t.Fatal(err)
		}
		// Two active relays split 4 buckets 2/2; relay-a ranks first and keeps
		// its range [0,1], handing back 2; bucket 3 is relay-b's to claim.
		if !slices.Equal(acq.Owned, []int{0, 1}) || !slices.Equal(acq.Released, []int{2}) || len(acq.Claimed) != 0 || acq.Refused != 0 {
			t.Fatalf("acquisition %+v", acq)
		}
		// The keeps, the release and the prune's deletes go side by side.
		wantOpsThen(t, f, []string{"PutItem", "Query"}, "UpdateItem", "UpdateItem", "UpdateItem", "DeleteItem", "DeleteItem")
		wantShapes(t, f, "PutItem", heartbeatPut("relay-a", t0Ticks))
		wantShapes(t, f, "Query", coordinationQuery())
		keep := func(b int) *dynamodb.UpdateItemInput { return keepShape(b, t0Plus5s, t0PlusL) }
		release := &dynamodb.UpdateItemInput{
			TableName:                 aws.String("outbox"),
			Key:                       leaseKeyLiteral(2),
			UpdateExpression:          aws.String("SET #expires = :now REMOVE #owner"),
			ConditionExpression:       aws.String("#owner = :me AND #expires = :seen"),
			ExpressionAttributeNames:  map[string]string{"#owner": "Owner", "#expires": "ExpiresAtUtc"},
			ExpressionAttributeValues: item{":me": S("relay-a"), ":seen": N(t0Plus5s), ":now": N(t0Ticks)},
		}
		wantShapes(t, f, "UpdateItem", keep(0), keep(1), release)
		prune := func(id string) *dynamodb.DeleteItemInput {
			return &dynamodb.DeleteItemInput{
				TableName:                aws.String("outbox"),
				Key:                      item{"PK": S("OUTBOX#COORDINATION"), "SK": S("RELAY#" + id)},
				ConditionExpression:      aws.String("attribute_not_exists(#pk) OR #lastSeen < :dead OR (attribute_exists(#stopped) AND #lastSeen < :stopped)"),
				ExpressionAttributeNames: map[string]string{"#pk": "PK", "#lastSeen": "LastSeenUtc", "#stopped": "StoppedAtUtc"},
				ExpressionAttributeValues: item{
					":dead":    N(t0Minus10L),
					":stopped": N(t0MinusL),
				},
			}
		}
		wantShapes(t, f, "DeleteItem", prune("relay-gone"), prune("relay-stopped"))
	})

	t.Run("Claim_AndALeaseWithoutExpiryIsFree", func(t *testing.T) {
		s, f, _ := shapeStore(t, 2)
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			// Bucket 1 names a relay but has no expiry: free, whatever it names.
			return &dynamodb.QueryOutput{Items: []item{leaseItem(1, "relay-x", "")}}, nil
		}
		acq, err := s.acquire(context.Background(), lease.Request{RelayID: "relay-a", BucketCount: 2, LeaseDuration: 30 * time.Second}, lease.RoundState{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(acq.Owned, []int{0, 1}) || !slices.Equal(acq.Claimed, []int{0, 1}) {
			t.Fatalf("acquisition %+v", acq)
		}
		claim := func(b int) *dynamodb.UpdateItemInput {
			return &dynamodb.UpdateItemInput{
				TableName:                 aws.String("outbox"),
				Key:                       leaseKeyLiteral(b),
				UpdateExpression:          aws.String("SET #owner = :me, #expires = :expiry"),
				ConditionExpression:       aws.String("attribute_not_exists(#owner) OR attribute_not_exists(#expires) OR #expires <= :now"),
				ExpressionAttributeNames:  map[string]string{"#owner": "Owner", "#expires": "ExpiresAtUtc"},
				ExpressionAttributeValues: item{":me": S("relay-a"), ":now": N(t0Ticks), ":expiry": N(t0PlusL)},
			}
		}
		wantShapes(t, f, "UpdateItem", claim(0), claim(1))
	})

	t.Run("Renewal", func(t *testing.T) {
		s, f, _ := shapeStore(t, 4)
		ok, err := s.renew(context.Background(), testLease, []int{1, 3})
		if err != nil || !ok {
			t.Fatalf("renew = %v, %v", ok, err)
		}
		renew := func(b int) *dynamodb.UpdateItemInput {
			return &dynamodb.UpdateItemInput{
				TableName:                 aws.String("outbox"),
				Key:                       leaseKeyLiteral(b),
				UpdateExpression:          aws.String("SET #expires = :expiry"),
				ConditionExpression:       aws.String("#owner = :me AND #expires > :now AND #expires <= :expiry"),
				ExpressionAttributeNames:  map[string]string{"#owner": "Owner", "#expires": "ExpiresAtUtc"},
				ExpressionAttributeValues: item{":me": S("relay-a"), ":now": N(t0Ticks), ":expiry": N(t0PlusL)},
			}
		}
		wantOps(t, f, "UpdateItem", "UpdateItem", "PutItem")
		wantShapes(t, f, "UpdateItem", renew(1), renew(3))
		wantShapes(t, f, "PutItem", heartbeatPut("relay-a", t0Ticks))
	})

	t.Run("Release_StampsStoppedThenReadsLeasesByPrefix", func(t *testing.T) {
		s, f, clock := shapeStore(t, 4)
		reads := 0
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			reads++
			if reads > 1 {
				return &dynamodb.QueryOutput{}, nil
			}
			// A lease beyond the bucket count still names the relay: freed too.
			return &dynamodb.QueryOutput{Items: []item{leaseItem(2, "relay-a", t0Plus5s), leaseItem(3, "relay-b", t0Plus5s), {
				"PK": S("OUTBOX#COORDINATION"), "SK": S("LEASE#0000000009"), "Owner": S("relay-a"), "ExpiresAtUtc": N(t0Plus5s),
			}}}, nil
		}
		// The stopped stamp is later than every heartbeat this store sent, even
		// with the clock set back after it.
		if _, err := s.acquire(context.Background(), testLease, lease.RoundState{}); err != nil {
			t.Fatal(err)
		}
		f.reset()
		reads = 0
		clock.Set(t0.Add(-time.Minute))
		rel, err := s.ReleaseLeases(context.Background(), testLease.RelayID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rel.Released, []int{2, 9}) || rel.Unfinished || rel.Refused != 0 {
			t.Fatalf("release %+v", rel)
		}
		wantOps(t, f, "PutItem", "Query", "UpdateItem", "UpdateItem", "Query")
		stamp := "639238464000000001" // heartbeat + 1 tick
		wantShapes(t, f, "PutItem", &dynamodb.PutItemInput{
			TableName: aws.String("outbox"),
			Item:      item{"PK": S("OUTBOX#COORDINATION"), "SK": S("RELAY#relay-a"), "LastSeenUtc": N(stamp), "StoppedAtUtc": N(stamp)},
		})
		leases := &dynamodb.QueryInput{
			TableName:                 aws.String("outbox"),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
			ExpressionAttributeNames:  map[string]string{"#pk": "PK", "#sk": "SK"},
			ExpressionAttributeValues: item{":pk": S("OUTBOX#COORDINATION"), ":prefix": S("LEASE#")},
			ConsistentRead:            aws.Bool(true),
		}
		wantShapes(t, f, "Query", leases, leases)
		release := func(sk string) *dynamodb.UpdateItemInput {
			return &dynamodb.UpdateItemInput{
				TableName:                 aws.String("outbox"),
				Key:                       item{"PK": S("OUTBOX#COORDINATION"), "SK": S(sk)},
				UpdateExpression:          aws.String("SET #expires = :now REMOVE #owner"),
				ConditionExpression:       aws.String("#owner = :me AND #expires = :seen"),
				ExpressionAttributeNames:  map[string]string{"#owner": "Owner", "#expires": "ExpiresAtUtc"},
				ExpressionAttributeValues: item{":me": S("relay-a"), ":seen": N(t0Plus5s), ":now": N(ticksAt(-time.Minute))},
			}
		}
		wantShapes(t, f, "UpdateItem", release("LEASE#0000000002"), release("LEASE#0000000009"))
	})

	t.Run("PendingProbe_IsAnEventuallyConsistentOneKeyRead", func(t *testing.T) {
		s, f, _ := shapeStore(t, 8)
		f.query = func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			if in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS).Value == "OUTBOX#MESSAGES#6" {
				return &dynamodb.QueryOutput{Items: []item{{"SK": S("0000000000000000001")}}, Count: 1}, nil
			}
			return &dynamodb.QueryOutput{}, nil
		}
		got, err := s.PendingBuckets(context.Background(), []int{6, 1})
		if err != nil || !slices.Equal(got, []int{6}) {
			t.Fatalf("pending = %v, %v", got, err)
		}
		probe := func(b string) *dynamodb.QueryInput {
			return &dynamodb.QueryInput{
				TableName:                 aws.String("outbox"),
				KeyConditionExpression:    aws.String("#pk = :pk"),
				ProjectionExpression:      aws.String("#projected"),
				ExpressionAttributeNames:  map[string]string{"#pk": "PK", "#projected": "SK"},
				ExpressionAttributeValues: item{":pk": S("OUTBOX#MESSAGES#" + b)},
				ScanIndexForward:          aws.Bool(true),
				Limit:                     aws.Int32(1),
			}
		}
		wantShapes(t, f, "Query", probe("6"), probe("1"))

		f.reset()
		if got, err := s.PendingBuckets(context.Background(), nil); err != nil || got != nil {
			t.Fatalf("pending of nothing = %v, %v", got, err)
		}
		wantOps(t, f)
	})

	t.Run("FetchPages_ThenProbesTheGap", func(t *testing.T) {
		s, f, _ := shapeStore(t, 8)
		const id = "d9b2d63d-a233-4123-847a-76838bf2413a"
		page := 0
		f.query = func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			if in.Select == types.SelectCount {
				return &dynamodb.QueryOutput{Count: 0}, nil
			}
			page++
			if page == 1 {
				return &dynamodb.QueryOutput{
					Items:            []item{messageItem(3, 1, id), messageItem(3, 3, id)},
					LastEvaluatedKey: item{"PK": S("OUTBOX#MESSAGES#3"), "SK": S("0000000000000000003")},
				}, nil
			}
			return &dynamodb.QueryOutput{Items: []item{messageItem(3, 4, id)}}, nil
		}
		batch, err := s.FetchBatch(context.Background(), 3, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) != 3 || batch[0].Sequence() != 1 || batch[1].Sequence() != 3 || batch[2].Sequence() != 4 {
			t.Fatalf("batch %+v", batch)
		}
		fetch := func(limit int32, start item) *dynamodb.QueryInput {
			return &dynamodb.QueryInput{
				TableName:                 aws.String("outbox"),
				KeyConditionExpression:    aws.String("#pk = :pk"),
				ExpressionAttributeNames:  map[string]string{"#pk": "PK"},
				ExpressionAttributeValues: item{":pk": S("OUTBOX#MESSAGES#3")},
				ConsistentRead:            aws.Bool(true),
				ScanIndexForward:          aws.Bool(true),
				Limit:                     aws.Int32(limit),
				ExclusiveStartKey:         start,
			}
		}
		probe := &dynamodb.QueryInput{
			TableName:                aws.String("outbox"),
			KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :first AND :last"),
			ExpressionAttributeNames: map[string]string{"#pk": "PK", "#sk": "SK"},
			ExpressionAttributeValues: item{
				":pk":    S("OUTBOX#MESSAGES#3"),
				":first": S("0000000000000000002"),
				":last":  S("0000000000000000002"),
			},
			ConsistentRead: aws.Bool(true),
			Select:         types.SelectCount,
			Limit:          aws.Int32(1),
		}
		wantShapes(t, f, "Query",
			fetch(5, nil),
			fetch(3, item{"PK": S("OUTBOX#MESSAGES#3"), "SK": S("0000000000000000003")}),
			probe)
	})

	t.Run("Delete_IsBatchWriteItemOfKeys", func(t *testing.T) {
		s, f, _ := shapeStore(t, 8)
		var msgs []outbox.Message
		for seq := int64(30); seq >= 1; seq-- { // out of order on purpose
			msgs = append(msgs, outbox.Stored(outbox.Message{}, 2, seq))
		}
		if err := s.MarkPublished(context.Background(), 2, msgs); err != nil {
			t.Fatal(err)
		}
		chunk := func(from, to int64) *dynamodb.BatchWriteItemInput {
			var reqs []types.WriteRequest
			for seq := from; seq <= to; seq++ {
				reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
					Key: item{"PK": S("OUTBOX#MESSAGES#2"), "SK": S(sequenceSortKeyOf(seq))},
				}})
			}
			return &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"outbox": reqs}}
		}
		wantShapes(t, f, "BatchWriteItem", chunk(1, 25), chunk(26, 30))

		f.reset()
		if err := s.MarkPublished(context.Background(), 2, nil); err != nil {
			t.Fatal(err)
		}
		wantOps(t, f)
	})

	t.Run("Backlog_HeadThenBoundedCount", func(t *testing.T) {
		s, f, _ := shapeStore(t, 1)
		s.opts.PendingCountLimit = 10
		s.opts.CountParked = true
		counts := 0
		f.query = func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			if in.Select != types.SelectCount {
				return &dynamodb.QueryOutput{Items: []item{{"CreatedAtUtc": N(t0Ticks)}}, Count: 1}, nil
			}
			counts++
			switch counts {
			case 1:
				return &dynamodb.QueryOutput{Count: 4, LastEvaluatedKey: item{"PK": S("OUTBOX#MESSAGES#0"), "SK": S("0000000000000000004")}}, nil
			case 2:
				return &dynamodb.QueryOutput{Count: 6, LastEvaluatedKey: item{"PK": S("OUTBOX#MESSAGES#0"), "SK": S("0000000000000000010")}}, nil
			}
			return &dynamodb.QueryOutput{Count: 2}, nil
		}
		got, err := s.Backlog(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got.Pending != 10 || !got.Oldest.Equal(t0) || got.Parked != 2 {
			t.Fatalf("backlog %+v", got)
		}
		head := &dynamodb.QueryInput{
			TableName:                 aws.String("outbox"),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ProjectionExpression:      aws.String("#projected"),
			ExpressionAttributeNames:  map[string]string{"#pk": "PK", "#projected": "CreatedAtUtc"},
			ExpressionAttributeValues: item{":pk": S("OUTBOX#MESSAGES#0")},
			ScanIndexForward:          aws.Bool(true),
			Limit:                     aws.Int32(1),
		}
		count := func(pk string, limit int32, start item) *dynamodb.QueryInput {
			return &dynamodb.QueryInput{
				TableName:                 aws.String("outbox"),
				KeyConditionExpression:    aws.String("#pk = :pk"),
				ExpressionAttributeNames:  map[string]string{"#pk": "PK"},
				ExpressionAttributeValues: item{":pk": S(pk)},
				Select:                    types.SelectCount,
				Limit:                     aws.Int32(limit),
				ExclusiveStartKey:         start,
			}
		}
		// The limit is reached on the second page: no third request. Then the
		// parked partition is counted the same way.
		wantShapes(t, f, "Query", head, count("OUTBOX#MESSAGES#0", 10, nil),
			count("OUTBOX#MESSAGES#0", 6, item{"PK": S("OUTBOX#MESSAGES#0"), "SK": S("0000000000000000004")}),
			count("OUTBOX#PARKED#0", 10, nil))
	})

	t.Run("Writer_ReserveOncePerBucket_AndNumberInListOrder", func(t *testing.T) {
		f := &fakeDB{update: counterAt(map[string]int64{"OUTBOX#SEQUENCE#5": 10})}
		w := writerOn(t, f, WriterOptions{Options: Options{MaxConcurrency: 1}})
		in := []outbox.Message{testMessage(t, 5, "a"), testMessage(t, 2, "b"), testMessage(t, 5, "c"), testMessage(t, 5, "d"), testMessage(t, 2, "e")}
		items, msgs, err := prepareItems(context.Background(), w, in)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, m := range msgs {
			seqs = append(seqs, m.Sequence())
		}
		if !slices.Equal(seqs, []int64{11, 1, 12, 13, 2}) {
			t.Fatalf("sequences %v, want [11 1 12 13 2]", seqs)
		}
		reserve := func(bucket string, n string) *dynamodb.UpdateItemInput {
			return &dynamodb.UpdateItemInput{
				TableName:                 aws.String("outbox"),
				Key:                       item{"PK": S("OUTBOX#SEQUENCE#" + bucket), "SK": S("SEQUENCE")},
				UpdateExpression:          aws.String("ADD #sequence :count"),
				ExpressionAttributeNames:  map[string]string{"#sequence": "Sequence"},
				ExpressionAttributeValues: item{":count": N(n)},
				ReturnValues:              types.ReturnValueUpdatedNew,
			}
		}
		wantShapes(t, f, "UpdateItem", reserve("5", "3"), reserve("2", "2"))
		if got, want := canon(*items[2].Put), canon(wantMessagePut([]byte("c"), 5, "0000000000000000012", "11", "3")); got != want {
			t.Fatalf("put:\n got %s\nwant %s", got, want)
		}

		f.reset()
		if items, msgs, err := prepareItems(context.Background(), w, nil); err != nil || items != nil || msgs != nil {
			t.Fatalf("empty list = %v %v %v", items, msgs, err)
		}
		wantOps(t, f)
	})

	t.Run("Enqueue_PutItemForOne_TransactionWithAFreshTokenForSeveral", func(t *testing.T) {
		f := &fakeDB{update: counterAt(map[string]int64{})}
		w := writerOn(t, f, WriterOptions{})
		m, err := w.Enqueue(context.Background(), testMessage(t, 1, "k"))
		if err != nil || m.Sequence() != 1 {
			t.Fatalf("enqueue = %+v, %v", m, err)
		}
		put := wantMessagePut([]byte("k"), 1, "0000000000000000001", "1", "1")
		wantShapes(t, f, "PutItem", &dynamodb.PutItemInput{
			TableName:                           put.TableName,
			Item:                                put.Item,
			ConditionExpression:                 put.ConditionExpression,
			ExpressionAttributeNames:            put.ExpressionAttributeNames,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})

		var tokens []string
		f.transact = func(in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
			tokens = append(tokens, aws.ToString(in.ClientRequestToken))
			if len(in.TransactItems) != 2 || canon(*in.TransactItems[1].Put) != canon(wantMessagePut([]byte("k"), 1, "0000000000000000003", "2", "2")) {
				t.Errorf("transaction items %s", canon(in.TransactItems))
			}
			return &dynamodb.TransactWriteItemsOutput{}, nil
		}
		for range 2 {
			if _, err := w.EnqueueBatch(context.Background(), []outbox.Message{testMessage(t, 1, "k"), testMessage(t, 1, "k")}); err != nil {
				t.Fatal(err)
			}
			f.update = counterAt(map[string]int64{"OUTBOX#SEQUENCE#1": 1})
		}
		if len(tokens) != 2 || tokens[0] == tokens[1] || !requestToken.MatchString(tokens[0]) || !requestToken.MatchString(tokens[1]) {
			t.Fatalf("tokens %q: want two different 32-hex-digit tokens", tokens)
		}
	})

	t.Run("CreateTable_IsTwoStringKeysOnDemand", func(t *testing.T) {
		in, err := CreateTableInput(Options{TableName: "orders-outbox", PartitionKey: "pk", SortKey: "sk"})
		if err != nil {
			t.Fatal(err)
		}
		want := &dynamodb.CreateTableInput{
			TableName:   aws.String("orders-outbox"),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
			},
		}
		if canon(in) != canon(want) {
			t.Fatalf("create table:\n got %s\nwant %s", canon(in), canon(want))
		}
	})
}

func messageItem(bucket int, seq int64, id string) item {
	return item{
		"PK":           S("OUTBOX#MESSAGES#" + strconv.Itoa(bucket)),
		"SK":           S(sequenceSortKeyOf(seq)),
		"MessageId":    S(id),
		"Topic":        S("orders"),
		"CreatedAtUtc": N(t0Ticks),
		"BucketCount":  N("8"),
	}
}

func writerOn(t *testing.T, f *fakeDB, opts WriterOptions) *Writer {
	t.Helper()
	opts.TableName = "outbox"
	if opts.Clock == nil {
		opts.Clock = newStepClock(t0)
	}
	w, err := NewWriter(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func testMessage(t *testing.T, bucket int, key string) outbox.Message {
	t.Helper()
	id, err := outbox.ParseMessageID("d9b2d63d-a233-4123-847a-76838bf2413a")
	if err != nil {
		t.Fatal(err)
	}
	p := int32(bucket) // a writer of 8 buckets stores it in bucket
	return outbox.Message{
		ID: id, Topic: "orders", Key: []byte(key), Value: []byte{}, Headers: []byte{1, 0, 0, 0, 0},
		Partition: &p, CreatedAt: t0,
	}
}

// counterAt answers reservations as a counter that stood at start.
func counterAt(start map[string]int64) func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		pk := in.Key["PK"].(*types.AttributeValueMemberS).Value
		n, _ := strconv.ParseInt(in.ExpressionAttributeValues[":count"].(*types.AttributeValueMemberN).Value, 10, 64)
		start[pk] += n
		return &dynamodb.UpdateItemOutput{Attributes: item{"Sequence": N(strconv.FormatInt(start[pk], 10))}}, nil
	}
}

func wantMessagePut(key []byte, bucket int, seq, txFirst, txCount string) types.Put {
	return types.Put{
		TableName: aws.String("outbox"),
		Item: item{
			"PK":           S("OUTBOX#MESSAGES#" + strconv.Itoa(bucket)),
			"SK":           S(seq),
			"MessageId":    S("d9b2d63d-a233-4123-847a-76838bf2413a"),
			"Topic":        S("orders"),
			"Key":          B(key),
			"Value":        B([]byte{}),
			"Headers":      B([]byte{1, 0, 0, 0, 0}),
			"Partition":    N(strconv.Itoa(bucket)),
			"CreatedAtUtc": N(t0Ticks),
			"BucketCount":  N("8"),
			"TxFirst":      N(txFirst),
			"TxCount":      N(txCount),
		},
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": "PK"},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

var requestToken = regexp.MustCompile(`^[0-9a-f]{32}$`)
