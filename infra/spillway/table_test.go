package spillway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
)

func TestTable(t *testing.T) {
	t.Run("HasOnlyTheKeysBillingAndRecovery", func(t *testing.T) {
		f := synth(t, nil)
		// The whole property map: anything else (TTL, GSI, LSI, stream, SSE
		// changes) would show up as an extra key.
		assertJSON(t, "table properties", f.only("AWS::DynamoDB::Table"), map[string]any{
			"AttributeDefinitions": []any{
				map[string]any{"AttributeName": "PK", "AttributeType": "S"},
				map[string]any{"AttributeName": "SK", "AttributeType": "S"},
			},
			"KeySchema": []any{
				map[string]any{"AttributeName": "PK", "KeyType": "HASH"},
				map[string]any{"AttributeName": "SK", "KeyType": "RANGE"},
			},
			"BillingMode":                      "PAY_PER_REQUEST",
			"DeletionProtectionEnabled":        true,
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
		})
		table := f.res[f.ofType("AWS::DynamoDB::Table")[0]]
		if table["DeletionPolicy"] != "Retain" || table["UpdateReplacePolicy"] != "Retain" {
			t.Errorf("table must be retained, got DeletionPolicy %v UpdateReplacePolicy %v", table["DeletionPolicy"], table["UpdateReplacePolicy"])
		}
	})

	t.Run("CustomNamesAndStreamOnlyWithTheTrigger", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.TableName = "orders-outbox"
			p.PartitionKey, p.SortKey = "pk", "sk"
			p.DeletionProtection = jsii.Bool(false)
			p.StreamsTrigger = true
		})
		assertJSON(t, "table properties", f.only("AWS::DynamoDB::Table"), map[string]any{
			"TableName": "orders-outbox",
			"AttributeDefinitions": []any{
				map[string]any{"AttributeName": "pk", "AttributeType": "S"},
				map[string]any{"AttributeName": "sk", "AttributeType": "S"},
			},
			"KeySchema": []any{
				map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
				map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
			},
			"BillingMode":                      "PAY_PER_REQUEST",
			"DeletionProtectionEnabled":        false,
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"StreamSpecification":              map[string]any{"StreamViewType": "NEW_IMAGE"},
		})
	})

	t.Run("StreamsTriggerIsAFilteredHintThatNeverRetries", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.StreamsTrigger = true
			p.KeyPrefix = "ORDERS"
			p.PartitionKey = "pk"
			p.SortKey = "sk"
		})
		esm := f.only("AWS::Lambda::EventSourceMapping")
		filters := esm["FilterCriteria"].(map[string]any)["Filters"].([]any)
		if len(filters) != 1 {
			t.Fatalf("want one filter, got %v", filters)
		}
		var pattern any
		if err := json.Unmarshal([]byte(filters[0].(map[string]any)["Pattern"].(string)), &pattern); err != nil {
			t.Fatal(err)
		}
		// Only the "dynamodb" key: DynamoDB event source mappings filter on
		// nothing else. REMOVE records have no new image.
		messageKey := map[string]any{"pk": map[string]any{"S": []any{map[string]any{"prefix": "ORDERS#MESSAGES#"}}}}
		assertJSON(t, "filter pattern", pattern, map[string]any{
			"dynamodb": map[string]any{"Keys": messageKey, "NewImage": messageKey},
		})
		delete(esm, "FilterCriteria")
		table := f.ofType("AWS::DynamoDB::Table")[0]
		assertJSON(t, "event source mapping", esm, map[string]any{
			"EventSourceArn":             map[string]any{"Fn::GetAtt": []any{table, "StreamArn"}},
			"FunctionName":               map[string]any{"Ref": f.functionID(f.outbox.relay.fn)},
			"StartingPosition":           "LATEST",
			"BatchSize":                  100,
			"ParallelizationFactor":      1,
			"MaximumRetryAttempts":       0,
			"BisectBatchOnFunctionError": false,
			"MaximumRecordAgeInSeconds":  60,
		})
	})

	t.Run("NoStreamsTriggerByDefault", func(t *testing.T) {
		f := synth(t, nil)
		if ids := f.ofType("AWS::Lambda::EventSourceMapping"); len(ids) != 0 {
			t.Errorf("event source mappings without the trigger: %v", ids)
		}
		if _, ok := f.only("AWS::DynamoDB::Table")["StreamSpecification"]; ok {
			t.Error("table has a stream without the trigger")
		}
		if f.outbox.StreamsTrigger() != nil {
			t.Error("StreamsTrigger() is not nil without the trigger")
		}
	})

	t.Run("ExistingTableIsUsedNotCreated", func(t *testing.T) {
		const arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/shared"
		const stream = arn + "/stream/2026-01-01T00:00:00.000"
		g := synthExisting(t, arn, stream)
		if ids := g.ofType("AWS::DynamoDB::Table"); len(ids) != 0 {
			t.Errorf("created a table although one was given: %v", ids)
		}
		env := g.props(g.functionID(g.outbox.relay.fn))["Environment"].(map[string]any)["Variables"].(map[string]any)
		if env["SPILLWAY_TABLE"] != "shared" {
			t.Errorf("SPILLWAY_TABLE = %v, want shared", env["SPILLWAY_TABLE"])
		}
		if got := g.only("AWS::Lambda::EventSourceMapping")["EventSourceArn"]; got != stream {
			t.Errorf("mapping reads %v, want %s", got, stream)
		}
	})

	t.Run("ExistingTableWithoutStreamCannotTrigger", func(t *testing.T) {
		defer func() {
			r := recover()
			err, ok := r.(error)
			if !ok || !strings.Contains(err.Error(), "stream ARN") {
				t.Fatalf("want a panic naming the missing stream ARN, got %v", r)
			}
		}()
		synthExisting(t, "arn:aws:dynamodb:eu-west-1:123456789012:table/shared", "")
	})
}

func synthExisting(t *testing.T, arn, stream string) *fixture {
	t.Helper()
	return synthWith(t, func(f *fixtureBuilder) {
		attrs := &awsdynamodb.TableAttributes{TableArn: jsii.String(arn)}
		if stream != "" {
			attrs.TableStreamArn = jsii.String(stream)
		}
		f.props.ExistingTable = awsdynamodb.Table_FromTableAttributes(f.stack, jsii.String("Shared"), attrs)
		f.props.StreamsTrigger = true
	})
}
