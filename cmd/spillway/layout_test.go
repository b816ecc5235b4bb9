package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Items written as a writer or relay of another language (or an older
// Spillway) leaves them, straight through the client.

func putItem(t *testing.T, ddb *outboxlocal.DynamoDB, table string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := ddb.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// putStamped writes message 1 of bucket with key, stamped with count.
func putStamped(t *testing.T, ddb *outboxlocal.DynamoDB, table string, bucket int, key []byte, count int) {
	t.Helper()
	putItem(t, ddb, table, map[string]types.AttributeValue{
		"PK":           &types.AttributeValueMemberS{Value: "OUTBOX#MESSAGES#" + strconv.Itoa(bucket)},
		"SK":           &types.AttributeValueMemberS{Value: fmt.Sprintf("%019d", 1)},
		"MessageId":    &types.AttributeValueMemberS{Value: outbox.NewMessageID().String()},
		"Topic":        &types.AttributeValueMemberS{Value: "orders"},
		"Key":          &types.AttributeValueMemberB{Value: key},
		"CreatedAtUtc": &types.AttributeValueMemberN{Value: strconv.FormatInt(lease.Ticks(time.Now()), 10)},
		"BucketCount":  &types.AttributeValueMemberN{Value: strconv.Itoa(count)},
	})
}

// putLease writes the lease item of bucket, held by owner until expires
// (free when owner is empty).
func putLease(t *testing.T, ddb *outboxlocal.DynamoDB, table string, bucket int, owner string, expires time.Time) {
	t.Helper()
	item := map[string]types.AttributeValue{
		"PK":           &types.AttributeValueMemberS{Value: "OUTBOX#COORDINATION"},
		"SK":           &types.AttributeValueMemberS{Value: fmt.Sprintf("LEASE#%010d", bucket)},
		"ExpiresAtUtc": &types.AttributeValueMemberN{Value: strconv.FormatInt(lease.Ticks(expires), 10)},
	}
	if owner != "" {
		item["Owner"] = &types.AttributeValueMemberS{Value: owner}
	}
	putItem(t, ddb, table, item)
}

// leaseBuckets lists the buckets with a lease item, whatever the count.
func leaseBuckets(t *testing.T, ddb *outboxlocal.DynamoDB, table string) []int {
	t.Helper()
	out, err := ddb.Client.Query(t.Context(), &dynamodb.QueryInput{
		TableName:              aws.String(table),
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :lease)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "OUTBOX#COORDINATION"}, ":lease": &types.AttributeValueMemberS{Value: "LEASE#"},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	var bs []int
	for _, it := range out.Items {
		b, _ := strconv.Atoi(strings.TrimPrefix(it["SK"].(*types.AttributeValueMemberS).Value, "LEASE#"))
		bs = append(bs, b)
	}
	return bs
}

// deleteLayout deletes the layout record: the table as created before it
// existed.
func deleteLayout(t *testing.T, ddb *outboxlocal.DynamoDB, table string) {
	t.Helper()
	if _, err := ddb.Client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "OUTBOX#COORDINATION"}, "SK": &types.AttributeValueMemberS{Value: "LAYOUT"},
	}}); err != nil {
		t.Fatal(err)
	}
}

func statusOf(t *testing.T, flags []string, extra ...string) statusView {
	t.Helper()
	var st statusView
	code, out, errs := cli(t, append(append([]string{"status", "--json"}, flags...), extra...)...)
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status: exit %d: %s %s", code, out, errs)
	}
	return st
}

func TestLayout(t *testing.T) {
	// The second reproduction: a drain given another bucket count
	// (as a stamped message's error used to advise) claimed lease items for
	// buckets 8-15 of an 8-bucket table, after which enqueue at the right
	// count was refused. Now the drain is refused before it writes.
	t.Run("DrainWithAnotherCount_WritesNothing_AndTheRightCountStillWorks", func(t *testing.T) {
		e := newDrainEnv(t)
		e.enqueue(t)
		code, _, errs := cli(t, append([]string{"drain", "--brokers", e.brokers, "--bucket-count", "16", "--timeout", "20s"}, e.flags...)...)
		if code != 1 || !strings.Contains(errs, "refused, nothing was written: table "+e.table+" records bucket count 8 for key prefix OUTBOX but --bucket-count is 16") {
			t.Fatalf("drain with 16 buckets: exit %d, stderr %q; want 1 and the refusal", code, errs)
		}
		if bs := leaseBuckets(t, e.ddb, e.table); len(bs) != 0 {
			t.Fatalf("lease items %v after the refused drain; want none", bs)
		}
		if code, out, errs := cli(t, append([]string{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.batch.json"), "--bucket-count", "8"}, e.flags...)...); code != 0 {
			t.Fatalf("enqueue with the table's count after it: exit %d: %s %s", code, out, errs)
		}
		if code, out, errs := cli(t, append([]string{"drain", "--brokers", e.brokers, "--timeout", "20s"}, e.flags...)...); code != 0 {
			t.Fatalf("drain with the recorded count: exit %d: %s %s", code, out, errs)
		}
		if bs := leaseBuckets(t, e.ddb, e.table); slices.Max(bs) != 7 {
			t.Fatalf("lease items %v; want buckets 0-7 only", bs)
		}
	})

	// Lease items beyond the count (left by a drain or relay with a larger
	// count) are ignored by every check and removed once nobody holds them.
	t.Run("Prune_RemovesStaleLeaseItems_OnceFree", func(t *testing.T) {
		ddb, table, flags := cliTable(t)
		now := time.Now()
		putLease(t, ddb, table, 8, "", now)
		putLease(t, ddb, table, 9, "drain-16", now.Add(-time.Minute))
		putLease(t, ddb, table, 10, "relay-16", now.Add(time.Hour))
		if code, out, errs := cli(t, append([]string{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.single.json")}, flags...)...); code != 0 || errs != "" {
			t.Fatalf("enqueue beside stale lease items: exit %d: %s %s", code, out, errs)
		}
		st := statusOf(t, flags)
		if !slices.Equal(st.StaleLeases, []int{8, 9, 10}) || !slices.Equal(st.StaleHeld, []int{10}) || !strings.Contains(strings.Join(st.Warnings, " "), "`spillway layout prune --yes` removes them") {
			t.Fatalf("status: stale %v, held %v, warnings %q", st.StaleLeases, st.StaleHeld, st.Warnings)
		}
		code, out, _ := cli(t, append([]string{"layout", "prune"}, flags...)...)
		if code != 0 || !strings.Contains(out, "dry run: nothing was removed") || !strings.Contains(out, "[8 9 10]") || len(leaseBuckets(t, ddb, table)) != 3 {
			t.Fatalf("dry run: exit %d, %q", code, out)
		}
		code, out, errs := cli(t, append([]string{"layout", "prune", "--yes"}, flags...)...)
		if code != 1 || !strings.Contains(out, "removed the lease items of buckets [8 9]") || !strings.Contains(errs, "holds the lease items of buckets [10]: stop it") {
			t.Fatalf("prune: exit %d, %q %q; want 8 and 9 removed and 10 named held", code, out, errs)
		}
		if bs := leaseBuckets(t, ddb, table); !slices.Equal(bs, []int{10}) {
			t.Fatalf("lease items left %v, want [10]", bs)
		}
	})

	// A table created before the record: commands warn, the operator
	// states the count once, checked against the running relays.
	t.Run("Record_OnATableCreatedBeforeIt", func(t *testing.T) {
		ddb, table, flags := cliTable(t)
		deleteLayout(t, ddb, table)
		code, _, errs := cli(t, append([]string{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.single.json")}, flags...)...)
		if code != 0 || !strings.Contains(errs, "warning: table "+table+" has no layout record for key prefix OUTBOX") {
			t.Fatalf("enqueue: exit %d, stderr %q; want the warning", code, errs)
		}
		if code, _, errs := cli(t, append([]string{"layout", "record"}, flags...)...); code != 2 || !strings.Contains(errs, "state the count") {
			t.Fatalf("record without a count: exit %d, %q", code, errs)
		}
		s, err := outboxddb.NewStore(ddb.Client, outboxddb.StoreOptions{Options: outboxddb.Options{TableName: table}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lease.AcquireRound(t.Context(), s, nil, time.Now(), lease.Request{RelayID: "relay-8", BucketCount: 8, LeaseDuration: time.Minute}, lease.RoundState{}); err != nil {
			t.Fatal(err)
		}
		code, _, errs = cli(t, append([]string{"layout", "record", "--bucket-count", "16", "--yes"}, flags...)...)
		if code != 1 || !strings.Contains(errs, "hold leases of buckets 0-7 and no relay ever claimed bucket 8, so they use 8 buckets, not 16") {
			t.Fatalf("record 16 under a live fleet of 8: exit %d, %q", code, errs)
		}
		code, out, _ := cli(t, append([]string{"layout", "record", "--bucket-count", "8"}, flags...)...)
		if code != 0 || !strings.Contains(out, "dry run: nothing was recorded") {
			t.Fatalf("dry run: exit %d, %q", code, out)
		}
		if code, out, errs := cli(t, append([]string{"layout", "record", "--bucket-count", "8", "--yes"}, flags...)...); code != 0 || !strings.Contains(out, "recorded 8 buckets") {
			t.Fatalf("record: exit %d, %q %q", code, out, errs)
		}
		if st := statusOf(t, flags); st.Layout == nil || st.Layout.BucketCount != 8 || st.Layout.RecordedBy != RecordedByCLI || len(st.Warnings) != 0 {
			t.Fatalf("status after recording: layout %+v, warnings %q", st.Layout, st.Warnings)
		}
		code, _, errs = cli(t, append([]string{"layout", "record", "--bucket-count", "4", "--yes"}, flags...)...)
		if code != 1 || !strings.Contains(errs, "records bucket count 8") {
			t.Fatalf("a second record: exit %d, %q; want the refusal", code, errs)
		}
	})

	// Messages a writer of 16 buckets left beyond an 8-bucket table's count
	// show in status, and rehome moves them where 8 buckets put them.
	t.Run("Rehome_MovesStrandedMessages_StatusShowsThem", func(t *testing.T) {
		e := newDrainEnv(t)
		deleteLayout(t, e.ddb, e.table)
		w, err := outboxddb.NewWriter(e.ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: e.table, BucketCount: 16}})
		if err != nil {
			t.Fatal(err)
		}
		// Three keys 16 buckets put in bucket 12 (and 8 in bucket 4).
		var keys [][]byte
		for i := 0; len(keys) < 3; i++ {
			k := []byte("k" + strconv.Itoa(i))
			if b, _ := outbox.ComputeBucket(k, outbox.MessageID{}, 16, nil); b == 12 {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			m, err := outbox.NewMessage(e.kafka.Topic("orders"), k, []byte("v"), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Enqueue(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		if code, out, errs := cli(t, append([]string{"layout", "record", "--bucket-count", "8", "--yes"}, e.flags...)...); code != 0 || !strings.Contains(out, "3 message(s) wait in buckets [12]") {
			t.Fatalf("record: exit %d, %q %q; want the stranded messages noted", code, out, errs)
		}
		st := statusOf(t, e.flags)
		if st.Stranded != 3 || !slices.Equal(st.StrandedBuckets, []int{12}) || !strings.Contains(strings.Join(st.Warnings, " "), "spillway layout rehome --yes") {
			t.Fatalf("status: stranded %d in %v, warnings %q", st.Stranded, st.StrandedBuckets, st.Warnings)
		}
		code, out, _ := cli(t, append([]string{"layout", "rehome"}, e.flags...)...)
		if code != 0 || !strings.Contains(out, "dry run: nothing was moved; add --yes to move 3 message(s) from buckets [12]") {
			t.Fatalf("dry run: exit %d, %q", code, out)
		}
		if code, out, errs := cli(t, append([]string{"layout", "rehome", "--yes"}, e.flags...)...); code != 0 || !strings.Contains(out, "bucket 12: moved 3 message(s)") {
			t.Fatalf("rehome: exit %d, %q %q", code, out, errs)
		}
		if st := statusOf(t, e.flags); st.Stranded != 0 || st.Pending != 3 || st.Buckets[4].Pending != 3 {
			t.Fatalf("status after the move: stranded %d, pending %d", st.Stranded, st.Pending)
		}
		if code, out, errs := cli(t, append([]string{"drain", "--brokers", e.brokers, "--timeout", "20s"}, e.flags...)...); code != 0 {
			t.Fatalf("drain: exit %d: %s %s", code, out, errs)
		}
	})

	// create-table states the layout of a new table and checks an existing
	// one; status takes the recorded count unless given another.
	t.Run("CreateTableAndStatus_CheckTheRecord", func(t *testing.T) {
		_, table, flags := cliTable(t, "--bucket-count", "12")
		code, out, errs := cli(t, append([]string{"create-table", "--bucket-count", "16"}, flags...)...)
		if code != 1 || !strings.Contains(errs, "records bucket count 12 for key prefix OUTBOX but --bucket-count is 16") {
			t.Fatalf("create-table with another count: exit %d, %q %q", code, out, errs)
		}
		if code, out, _ := cli(t, append([]string{"create-table"}, flags...)...); code != 0 || out != "table "+table+" is active; its layout record gives key prefix OUTBOX 12 buckets (recorded by outboxddb.CreateIfNotExists)\n" {
			t.Fatalf("create-table again: exit %d, %q", code, out)
		}
		if st := statusOf(t, flags); st.BucketCount != 12 || len(st.Buckets) != 12 {
			t.Fatalf("status: %d buckets; want the recorded 12", len(st.Buckets))
		}
		if code, _, errs := cli(t, append([]string{"status", "--bucket-count", "8"}, flags...)...); code != 1 || !strings.Contains(errs, "but --bucket-count is 8; pass --bucket-count 12 or leave it out") {
			t.Fatalf("status with 8: exit %d, %q", code, errs)
		}
	})
}
