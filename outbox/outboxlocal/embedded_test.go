package outboxlocal

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox/internal/ddblimits"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

func TestEmbedded(t *testing.T) {
	t.Parallel()
	t.Run("ConditionalWriteRaceHasOneWinner", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		const rounds, racers = 5, 8
		before := d.Counter.Snapshot()
		for round := range rounds {
			var wg sync.WaitGroup
			errs := make([]error, racers)
			for i := range racers {
				wg.Go(func() {
					item := key("LEASES", fmt.Sprintf("LEASE#%d", round))
					item["Owner"] = str(fmt.Sprintf("relay-%d", i))
					_, errs[i] = d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
						TableName:                aws.String(table),
						Item:                     item,
						ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
						ExpressionAttributeNames: map[string]string{"#pk": DefaultPartitionKey},
					})
				})
			}
			wg.Wait()
			winners := 0
			for _, err := range errs {
				var ccf *types.ConditionalCheckFailedException
				switch {
				case err == nil:
					winners++
				case !errors.As(err, &ccf):
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if winners != 1 {
				t.Fatalf("round %d: %d winners, want 1", round, winners)
			}
		}
		got := d.Counter.Snapshot().Since(before)
		if got.Requests["PutItem"] != rounds*racers || got.Refused != rounds*(racers-1) {
			t.Fatalf("counted %d PutItem and %d refusals, want %d and %d", got.Requests["PutItem"], got.Refused, rounds*racers, rounds*(racers-1))
		}
	})

	t.Run("ConcurrentAddHandsOutDistinctNumbers", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		const n = 200
		values := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				out, err := d.Client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
					TableName:                 aws.String(table),
					Key:                       key("OUTBOX#SEQUENCE#0", "SEQUENCE"),
					UpdateExpression:          aws.String("ADD #sequence :count"),
					ExpressionAttributeNames:  map[string]string{"#sequence": "Sequence"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":count": num(1)},
					ReturnValues:              types.ReturnValueUpdatedNew,
				})
				if err != nil {
					t.Error(err)
					return
				}
				values[i], err = strconv.Atoi(out.Attributes["Sequence"].(*types.AttributeValueMemberN).Value)
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		slices.Sort(values)
		for i, v := range values {
			if v != i+1 {
				t.Fatalf("sorted values[%d] = %d: the increments are not 1..%d", i, v, n)
			}
		}
		if got := d.Counter.Snapshot(); got.Requests["UpdateItem"] != n || got.OpWriteUnits["UpdateItem"] != n {
			t.Fatalf("counted %d UpdateItem and %v write units, want %d each", got.Requests["UpdateItem"], got.OpWriteUnits["UpdateItem"], n)
		}
	})

	t.Run("TransactionCancellationCarriesOldItem", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		existing := key("OUTBOX#MESSAGES#1", "0000000000000000001")
		existing["MessageId"] = str("11111111-1111-4111-8111-111111111111")
		put(t, d.Client, table, existing)

		mine := key("OUTBOX#MESSAGES#1", "0000000000000000001")
		mine["MessageId"] = str("22222222-2222-4222-8222-222222222222")
		other := key("OUTBOX#MESSAGES#2", "0000000000000000001")
		_, err := d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName:                           aws.String(table),
				Item:                                mine,
				ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames:            map[string]string{"#pk": DefaultPartitionKey},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			{Put: &types.Put{TableName: aws.String(table), Item: other}},
		}})
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("got %v, want TransactionCanceledException", err)
		}
		var codes []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
		if !slices.Equal(codes, []string{"ConditionalCheckFailed", "None"}) {
			t.Fatalf("reasons %v", codes)
		}
		if got := scalarText(tce.CancellationReasons[0].Item["MessageId"]); got != "11111111-1111-4111-8111-111111111111" {
			t.Fatalf("reason item MessageId %q, want the stored message's", got)
		}
		if !strings.Contains(aws.ToString(tce.Message), "[ConditionalCheckFailed, None]") {
			t.Fatalf("message %q does not list every reason", aws.ToString(tce.Message))
		}
		if item := get(t, d.Client, table, "OUTBOX#MESSAGES#2", "0000000000000000001"); item != nil {
			t.Fatalf("the cancelled transaction wrote %v", item)
		}
		if got := d.Counter.Snapshot().Refused; got != 1 {
			t.Fatalf("refused %d, want 1", got)
		}
	})

	t.Run("PutItemReturnsOnlyTheOldItem", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		first := key("P", "S")
		first["V"] = num(1)
		out, err := d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: first, ReturnValues: types.ReturnValueAllOld})
		if err != nil || len(out.Attributes) != 0 {
			t.Fatalf("first put: attributes %v, error %v; want none", out, err)
		}
		second := key("P", "S")
		second["V"] = num(2)
		out, err = d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: second})
		if err != nil || len(out.Attributes) != 0 {
			t.Fatalf("put without ReturnValues: attributes %v, error %v; want none", out.Attributes, err)
		}
		third := key("P", "S")
		third["V"] = num(3)
		out, err = d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: third, ReturnValues: types.ReturnValueAllOld})
		if err != nil || scalarText(out.Attributes["V"]) != "2" {
			t.Fatalf("put with ALL_OLD: attributes %v, error %v; want V=2", out.Attributes, err)
		}

		refusals := []func() error{
			func() error {
				_, err := d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
					TableName: aws.String(table), Item: key("P", "S"),
					ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
					ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
				})
				return err
			},
			func() error {
				_, err := d.Client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
					TableName: aws.String(table), Key: key("P", "S"),
					ConditionExpression:                 aws.String("V = :v"),
					ExpressionAttributeValues:           map[string]types.AttributeValue{":v": num(9)},
					ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
				})
				return err
			},
			func() error {
				_, err := d.Client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
					TableName: aws.String(table), Key: key("P", "S"),
					UpdateExpression:                    aws.String("SET V = :w"),
					ConditionExpression:                 aws.String("V = :v"),
					ExpressionAttributeValues:           map[string]types.AttributeValue{":v": num(9), ":w": num(10)},
					ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
				})
				return err
			},
		}
		for i, refuse := range refusals {
			var ccf *types.ConditionalCheckFailedException
			if err := refuse(); !errors.As(err, &ccf) || scalarText(ccf.Item["V"]) != "3" {
				t.Fatalf("refusal %d: %v with item %v; want the stored item (V=3)", i, err, ccf)
			}
		}
	})

	t.Run("EmptyValuesRoundTrip", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		item := key("OUTBOX#MESSAGES#0", "0000000000000000001")
		item["Key"] = bin([]byte{})
		item["Value"] = bin([]byte{})
		item["Headers"] = bin([]byte("h"))
		item["List"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
		item["Map"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
		put(t, d.Client, table, item)
		second := key("OUTBOX#MESSAGES#0", "0000000000000000002")
		second["Key"] = bin([]byte("k"))
		put(t, d.Client, table, second)

		got := get(t, d.Client, table, "OUTBOX#MESSAGES#0", "0000000000000000001")
		for _, name := range []string{"Key", "Value"} {
			b, ok := got[name].(*types.AttributeValueMemberB)
			if !ok || len(b.Value) != 0 {
				t.Fatalf("%s came back as %#v, want an empty binary", name, got[name])
			}
		}
		if b, ok := got["Headers"].(*types.AttributeValueMemberB); !ok || !bytes.Equal(b.Value, []byte("h")) {
			t.Fatalf("Headers came back as %#v", got["Headers"])
		}
		if l, ok := got["List"].(*types.AttributeValueMemberL); !ok || len(l.Value) != 0 {
			t.Fatalf("List came back as %#v, want an empty list", got["List"])
		}
		if m, ok := got["Map"].(*types.AttributeValueMemberM); !ok || len(m.Value) != 0 {
			t.Fatalf("Map came back as %#v, want an empty map", got["Map"])
		}

		out, err := query(t.Context(), d.Client, table, "OUTBOX#MESSAGES#0", true)
		if err != nil {
			t.Fatalf("query after storing empty values: %v", err)
		}
		if keys := sortKeys(out.Items); !slices.Equal(keys, []string{"0000000000000000001", "0000000000000000002"}) {
			t.Fatalf("query returned %v", keys)
		}
		// Equality with an empty value still works through the marker.
		_, err = d.Client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
			TableName:                 aws.String(table),
			Key:                       key("OUTBOX#MESSAGES#0", "0000000000000000001"),
			ConditionExpression:       aws.String("#k = :empty"),
			ExpressionAttributeNames:  map[string]string{"#k": "Key"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":empty": bin([]byte{})},
		})
		if err != nil {
			t.Fatalf("delete on an empty-key condition: %v", err)
		}

		// The SDK sends a nil binary as {"B":null}: a value of no type, which
		// is refused rather than stored typeless.
		null := key("OUTBOX#MESSAGES#0", "0000000000000000003")
		null["Key"] = bin(nil)
		_, err = d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: null})
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" {
			t.Fatalf("put with a nil binary: %v, want ValidationException", err)
		}
	})

	t.Run("TableDescriptionIsComplete", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := d.NewTableName()
		if err := d.CreateTable(t.Context(), table); err != nil {
			t.Fatal(err) // the SDK's TableExistsWaiter returned: the table became ACTIVE
		}
		out, err := d.Client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		desc := out.Table
		if desc.TableStatus != types.TableStatusActive {
			t.Fatalf("status %q", desc.TableStatus)
		}
		if desc.BillingModeSummary == nil || desc.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
			t.Fatalf("billing %+v", desc.BillingModeSummary)
		}
		if len(desc.AttributeDefinitions) != 2 || len(desc.KeySchema) != 2 {
			t.Fatalf("definitions %+v, key schema %+v", desc.AttributeDefinitions, desc.KeySchema)
		}
		list, err := d.Client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
		if err != nil || !slices.Contains(list.TableNames, table) {
			t.Fatalf("ListTables: %v, %v", list, err)
		}
		if d.External {
			return // an external endpoint may serve the operation the embedded server lacks
		}
		_, err = d.Client.DescribeContinuousBackups(t.Context(), &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(table)})
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "UnknownOperationException" {
			t.Fatalf("unsupported operation: %v, want a decodable UnknownOperationException", err)
		}
	})

	t.Run("ClientRequestTokenReplay", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			d := newDynamoDB(t, InMemory())
			table := createTable(t, d)
			txn := func(token, sk string) error {
				_, err := d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{
					ClientRequestToken: aws.String(token),
					TransactItems: []types.TransactWriteItem{{Put: &types.Put{
						TableName:           aws.String(table),
						Item:                key("P", sk),
						ConditionExpression: aws.String("attribute_not_exists(PK)"),
					}}},
				})
				return err
			}
			// DynamoDB keeps a token for its account, across tables and runs: a
			// token of the table's own stays this run's on an external endpoint.
			token := strings.TrimPrefix(table, "spillway-test-") + "-replay"
			if err := txn(token, "1"); err != nil {
				t.Fatal(err)
			}
			// Re-running the put would fail its condition: success proves the
			// replay did not execute it again.
			if err := txn(token, "1"); err != nil {
				t.Fatalf("replay with the same token and body: %v", err)
			}
			var mismatch *types.IdempotentParameterMismatchException
			if err := txn(token, "2"); !errors.As(err, &mismatch) {
				t.Fatalf("same token, other body: %v, want IdempotentParameterMismatchException", err)
			}
			if item := get(t, d.Client, table, "P", "2"); item != nil {
				t.Fatal("the mismatched request was applied")
			}
			if d.External {
				return // the bubble's clock is not the endpoint's: its token window does not pass
			}
			time.Sleep(TokenWindow)
			var tce *types.TransactionCanceledException
			if err := txn(token, "1"); !errors.As(err, &tce) {
				t.Fatalf("after the token window: %v, want the transaction to run again and be cancelled", err)
			}
			if got := d.Counter.Snapshot(); got.Requests["TransactWriteItems"] != 4 || got.Refused != 1 {
				t.Fatalf("counted %d transactions and %d refusals, want 4 and 1", got.Requests["TransactWriteItems"], got.Refused)
			}
		})
	})

	t.Run("LimitsAreEnforced", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		validation := func(err error, message string) {
			t.Helper()
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" || !strings.Contains(apiErr.ErrorMessage(), message) {
				t.Fatalf("got %v, want ValidationException %q", err, message)
			}
		}

		put(t, d.Client, table, itemOfSize(t, "P", "max", ddblimits.MaxItemSize))
		_, err := d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: itemOfSize(t, "P", "over", ddblimits.MaxItemSize+1)})
		validation(err, "Item size has exceeded the maximum allowed size")

		actions := make([]types.TransactWriteItem, ddblimits.MaxTransactionItems+1)
		for i := range actions {
			actions[i] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: key("T", strconv.Itoa(i))}}
		}
		_, err = d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		validation(err, "Member must have length less than or equal to 100")
		_, err = d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: actions[:ddblimits.MaxTransactionItems]})
		if err != nil {
			t.Fatalf("100 actions: %v", err)
		}

		var big []types.TransactWriteItem
		for i := 0; i*390*1024 <= ddblimits.MaxTransactionSize; i++ {
			big = append(big, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: itemOfSize(t, "B", strconv.Itoa(i), 390*1024)}})
		}
		_, err = d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: big})
		validation(err, fmt.Sprintf("Transaction payload size cannot exceed 4MB. Payload Size: %d", len(big)*390*1024))

		_, err = d.Client.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: {
			{DeleteRequest: &types.DeleteRequest{Key: key("T", "1")}},
			{PutRequest: &types.PutRequest{Item: key("T", "1")}},
		}}})
		validation(err, "Provided list of item keys contains duplicates")

		_, err = d.Client.Query(t.Context(), &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			KeyConditionExpression:    aws.String("SK = :sk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":sk": str("1")},
		})
		missed := "Query condition missed key schema element: PK"
		if d.External {
			// DynamoDB names the element; DynamoDB Local 1.25.1 leaves it out.
			missed = strings.TrimSuffix(missed, ": PK")
		}
		validation(err, missed)
	})

	t.Run("SelectCountReturnsOnlyCounts", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		for i := range 5 {
			put(t, d.Client, table, key("P", strconv.Itoa(i)))
		}
		count := func(limit int32) *dynamodb.QueryOutput {
			in := &dynamodb.QueryInput{
				TableName:                 aws.String(table),
				KeyConditionExpression:    aws.String("PK = :pk"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str("P")},
				Select:                    types.SelectCount,
				ConsistentRead:            aws.Bool(true),
			}
			if limit > 0 {
				in.Limit = aws.Int32(limit)
			}
			out, err := d.Client.Query(t.Context(), in)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		if out := count(0); out.Count != 5 || out.ScannedCount != 5 || out.Items != nil {
			t.Fatalf("COUNT: count %d, scanned %d, %d items", out.Count, out.ScannedCount, len(out.Items))
		}
		if out := count(1); out.Count != 1 || out.Items != nil || out.LastEvaluatedKey == nil {
			t.Fatalf("COUNT with Limit 1: count %d, %d items, last key %v", out.Count, len(out.Items), out.LastEvaluatedKey)
		}
	})

	// The embedded server sends a correct X-Amz-Crc32 for every response,
	// rewritten or not, so the SDK's checksum validation stays on and silent.
	t.Run("ResponsesCarryValidChecksums", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var logged []string
		logger := logging.LoggerFunc(func(_ logging.Classification, format string, v ...any) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, fmt.Sprintf(format, v...))
		})
		d := newDynamoDB(t, WithClientOptions(func(o *dynamodb.Options) { o.Logger = logger }))
		table := createTable(t, d)
		item := key("P", "S")
		item["Empty"] = bin([]byte{})
		put(t, d.Client, table, item)
		get(t, d.Client, table, "P", "S")
		d.Faults.ThrottleNext("GetItem", 1)
		get(t, d.Client, table, "P", "S")
		if _, err := query(t.Context(), d.Client, table, "P", false); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(logged) > 0 {
			t.Fatalf("the SDK logged %q", logged)
		}
	})
}
