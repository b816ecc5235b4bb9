package outboxlocal

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// leaseItem is a held lease: an owner, an expiry and a nested attribute the
// tests leave alone.
func leaseItem(bucket string) map[string]types.AttributeValue {
	item := key("OUTBOX#COORDINATION", "LEASE#"+bucket)
	item["Owner"] = str("relay-a")
	item["ExpiresAt"] = num(100)
	item["Meta"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": num(1), "b": num(2)}}
	return item
}

// release frees a lease the way a relay does: a conditional update that
// stamps the expiry and removes the owner.
func release(table, bucket string, rv types.ReturnValue) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key("OUTBOX#COORDINATION", "LEASE#"+bucket),
		UpdateExpression:          aws.String("SET #expires = :now REMOVE #owner"),
		ConditionExpression:       aws.String("#owner = :me"),
		ExpressionAttributeNames:  map[string]string{"#owner": "Owner", "#expires": "ExpiresAt"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str("relay-a"), ":now": num(50)},
		ReturnValues:              rv,
	}
}

func attrNames(item map[string]types.AttributeValue) []string {
	return slices.Sorted(maps.Keys(item))
}

func TestEmbeddedRemove(t *testing.T) {
	t.Parallel()
	t.Run("UpdateItemRemove_DeletesTheAttribute_AndAnswersEveryReturnValues", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		for _, c := range []struct {
			rv    types.ReturnValue
			names []string // attributes returned
			owner string   // Owner returned, "" when absent
			exp   string   // ExpiresAt returned
		}{
			{types.ReturnValueNone, nil, "", ""},
			{types.ReturnValueAllNew, []string{"ExpiresAt", "Meta", "PK", "SK"}, "", "50"},
			{types.ReturnValueUpdatedNew, []string{"ExpiresAt"}, "", "50"},
			{types.ReturnValueUpdatedOld, []string{"ExpiresAt", "Owner"}, "relay-a", "100"},
			{types.ReturnValueAllOld, []string{"ExpiresAt", "Meta", "Owner", "PK", "SK"}, "relay-a", "100"},
		} {
			t.Run(string(c.rv), func(t *testing.T) {
				bucket := "rv-" + string(c.rv)
				put(t, d.Client, table, leaseItem(bucket))
				out, err := d.Client.UpdateItem(t.Context(), release(table, bucket, c.rv))
				if err != nil {
					t.Fatal(err)
				}
				if got := attrNames(out.Attributes); !slices.Equal(got, c.names) {
					t.Fatalf("returned attributes %v, want %v", got, c.names)
				}
				if got := scalarText(out.Attributes["Owner"]); got != c.owner {
					t.Fatalf("returned Owner %q, want %q", got, c.owner)
				}
				if got := scalarText(out.Attributes["ExpiresAt"]); got != c.exp {
					t.Fatalf("returned ExpiresAt %q, want %q", got, c.exp)
				}
				stored := get(t, d.Client, table, "OUTBOX#COORDINATION", "LEASE#"+bucket)
				if got := attrNames(stored); !slices.Equal(got, []string{"ExpiresAt", "Meta", "PK", "SK"}) {
					t.Fatalf("stored attributes %v: the owner was not removed", got)
				}
				if got := scalarText(stored["ExpiresAt"]); got != "50" {
					t.Fatalf("stored ExpiresAt %q: the SET of the same update was lost", got)
				}
			})
		}
	})

	t.Run("UpdateItemRemove_RefusedCondition_LeavesTheItemIntact", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		put(t, d.Client, table, leaseItem("1"))
		in := release(table, "1", types.ReturnValueAllNew)
		in.ExpressionAttributeValues[":me"] = str("relay-b")
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		before := d.Counter.Snapshot()
		_, err := d.Client.UpdateItem(t.Context(), in)
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("got %v, want ConditionalCheckFailedException", err)
		}
		if got := scalarText(ccf.Item["Owner"]); got != "relay-a" {
			t.Fatalf("refusal carries Owner %q, want the stored owner", got)
		}
		stored := get(t, d.Client, table, "OUTBOX#COORDINATION", "LEASE#1")
		if scalarText(stored["Owner"]) != "relay-a" || scalarText(stored["ExpiresAt"]) != "100" {
			t.Fatalf("refused update changed the item: %v", stored)
		}
		if got := d.Counter.Snapshot().Since(before); got.Refused != 1 || got.Requests["UpdateItem"] != 1 {
			t.Fatalf("counted %v requests and %d refusals, want one refused UpdateItem", got.Requests, got.Refused)
		}
	})

	t.Run("UpdateItemRemove_PlainNamesNestedPathsAndRemoveOnly", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		item := leaseItem("1")
		item["Extra"] = str("x")
		put(t, d.Client, table, item)
		// Several top-level attributes by name and by placeholder, and a nested
		// path, which the server applies itself.
		if _, err := d.Client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
			TableName:                aws.String(table),
			Key:                      key("OUTBOX#COORDINATION", "LEASE#1"),
			UpdateExpression:         aws.String("remove Extra, #owner, Meta.a"),
			ExpressionAttributeNames: map[string]string{"#owner": "Owner"},
		}); err != nil {
			t.Fatal(err)
		}
		stored := get(t, d.Client, table, "OUTBOX#COORDINATION", "LEASE#1")
		if got := attrNames(stored); !slices.Equal(got, []string{"ExpiresAt", "Meta", "PK", "SK"}) {
			t.Fatalf("stored attributes %v", got)
		}
		if got := attrNames(stored["Meta"].(*types.AttributeValueMemberM).Value); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("Meta holds %v, want only b", got)
		}
		// Removing an attribute the item does not have changes nothing.
		if _, err := d.Client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key("OUTBOX#COORDINATION", "LEASE#1"), UpdateExpression: aws.String("REMOVE Absent"),
		}); err != nil {
			t.Fatal(err)
		}
		if got := attrNames(get(t, d.Client, table, "OUTBOX#COORDINATION", "LEASE#1")); !slices.Equal(got, []string{"ExpiresAt", "Meta", "PK", "SK"}) {
			t.Fatalf("stored attributes %v after removing a missing attribute", got)
		}
	})

	t.Run("UpdateItemRemove_RefusesWhatDynamoDBRefuses", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		put(t, d.Client, table, leaseItem("1"))
		for _, c := range []struct {
			expr  string
			names map[string]string
			want  string
		}{
			{"SET #owner = :v REMOVE #owner", map[string]string{"#owner": "Owner"}, "Two document paths overlap"},
			{"REMOVE Meta, Meta.a", nil, "Two document paths overlap"},
			{"REMOVE #nope", map[string]string{"#owner": "Owner"}, "attribute name: #nope"},
			{"REMOVE ExpiresAt !", nil, "Syntax error"},
		} {
			in := &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: key("OUTBOX#COORDINATION", "LEASE#1"),
				UpdateExpression: aws.String(c.expr), ExpressionAttributeNames: c.names,
			}
			if strings.Contains(c.expr, ":v") {
				in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": str("relay-b")}
			}
			_, err := d.Client.UpdateItem(t.Context(), in)
			var apiErr interface{ ErrorCode() string }
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: got %v, want a ValidationException about %q", c.expr, err, c.want)
			}
		}
		if !maps.EqualFunc(get(t, d.Client, table, "OUTBOX#COORDINATION", "LEASE#1"), leaseItem("1"), sameValue) {
			t.Fatal("a refused update changed the item")
		}
	})

	t.Run("TransactWriteItemsRemove_AppliedOnCommit_NotOnCancellation", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		put(t, d.Client, table, leaseItem("1"))
		put(t, d.Client, table, leaseItem("2"))
		update := func(bucket string) types.TransactWriteItem {
			in := release(table, bucket, types.ReturnValueNone)
			return types.TransactWriteItem{Update: &types.Update{
				TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
				ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames,
				ExpressionAttributeValues: in.ExpressionAttributeValues,
			}}
		}
		refused := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(table), Key: key("OUTBOX#COORDINATION", "LEASE#2"),
			ConditionExpression: aws.String("attribute_not_exists(PK)"),
		}}
		_, err := d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{update("1"), refused}})
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("got %v, want TransactionCanceledException", err)
		}
		if got := scalarText(get(t, d.Client, table, "OUTBOX#COORDINATION", "LEASE#1")["Owner"]); got != "relay-a" {
			t.Fatalf("cancelled transaction removed the owner (Owner %q)", got)
		}
		if _, err := d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{
			TransactItems:      []types.TransactWriteItem{update("1"), update("2")},
			ClientRequestToken: aws.String(strings.TrimPrefix(table, "spillway-test-") + "-release-both"), // tokens are the account's, across tables
		}); err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"1", "2"} {
			stored := get(t, d.Client, table, "OUTBOX#COORDINATION", "LEASE#"+b)
			if got := attrNames(stored); !slices.Equal(got, []string{"ExpiresAt", "Meta", "PK", "SK"}) || scalarText(stored["ExpiresAt"]) != "50" {
				t.Fatalf("lease %s after the transaction: %v", b, stored)
			}
		}
	})

	t.Run("TransactionCancellation_ReportsEveryFailedCondition", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		for _, sk := range []string{"1", "3", "4"} {
			stored := key("OUTBOX#MESSAGES#0", sk)
			stored["MessageId"] = str("stored-" + sk)
			put(t, d.Client, table, stored)
		}
		putNew := func(sk string) types.TransactWriteItem {
			item := key("OUTBOX#MESSAGES#0", sk)
			item["MessageId"] = str("mine-" + sk)
			return types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(table), Item: item,
				ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames:            map[string]string{"#pk": DefaultPartitionKey},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}}
		}
		// The update's names and values include some its condition does not
		// use: the layer's separate check must carry only the condition's.
		bump := types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(table), Key: key("OUTBOX#MESSAGES#0", "4"),
			UpdateExpression:          aws.String("SET #v = :v"),
			ConditionExpression:       aws.String("#id = :id"),
			ExpressionAttributeNames:  map[string]string{"#v": "V", "#id": "MessageId"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(1), ":id": str("someone-else")},
		}}
		before := d.Counter.Snapshot()
		_, err := d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			putNew("1"), putNew("2"), putNew("3"), bump,
		}})
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("got %v, want TransactionCanceledException", err)
		}
		var codes, ids []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
			ids = append(ids, scalarText(r.Item["MessageId"]))
		}
		if want := []string{"ConditionalCheckFailed", "None", "ConditionalCheckFailed", "ConditionalCheckFailed"}; !slices.Equal(codes, want) {
			t.Fatalf("reasons %v, want %v", codes, want)
		}
		if want := []string{"stored-1", "", "stored-3", ""}; !slices.Equal(ids, want) {
			t.Fatalf("reason items %v, want %v (ALL_OLD asked by the puts only)", ids, want)
		}
		if !strings.Contains(aws.ToString(tce.Message), "[ConditionalCheckFailed, None, ConditionalCheckFailed, ConditionalCheckFailed]") {
			t.Fatalf("message %q does not list every reason", aws.ToString(tce.Message))
		}
		if item := get(t, d.Client, table, "OUTBOX#MESSAGES#0", "2"); item != nil {
			t.Fatalf("the cancelled transaction wrote %v", item)
		}
		if got := d.Counter.Snapshot().Since(before); got.Refused != 3 || got.Requests["TransactWriteItems"] != 1 {
			t.Fatalf("counted %v and %d refusals, want one transaction and 3 refusals", got.Requests, got.Refused)
		}
	})
}

// sameValue compares two attribute values of the kinds the tests store.
func sameValue(a, b types.AttributeValue) bool {
	am, aok := a.(*types.AttributeValueMemberM)
	bm, bok := b.(*types.AttributeValueMemberM)
	if aok || bok {
		return aok && bok && maps.EqualFunc(am.Value, bm.Value, sameValue)
	}
	return scalarText(a) == scalarText(b)
}
