package outboxlocal

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

func TestEmbeddedTTL(t *testing.T) {
	t.Parallel()
	// TimeToLive is kept with the table and refused as DynamoDB Local refuses
	// it: a change to the state already set, another attribute while one is
	// enabled, a table that does not exist. An item past its TTL stays
	// readable (DynamoDB deletes such items within days). On the embedded
	// server and on SPILLWAY_DYNAMODB_ENDPOINT alike.
	t.Run("TimeToLiveIsKeptWithTheTable", func(t *testing.T) {
		t.Parallel()
		d := newDynamoDB(t)
		table := createTable(t, d)
		describe := func(wantStatus types.TimeToLiveStatus, wantName string) {
			t.Helper()
			out, err := d.Client.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
			if err != nil || out.TimeToLiveDescription.TimeToLiveStatus != wantStatus || aws.ToString(out.TimeToLiveDescription.AttributeName) != wantName {
				t.Fatalf("DescribeTimeToLive: %+v, %v; want %s %q", out, err, wantStatus, wantName)
			}
		}
		update := func(table, name string, enabled bool) error {
			out, err := d.Client.UpdateTimeToLive(t.Context(), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(name), Enabled: aws.Bool(enabled)}})
			if err == nil && (aws.ToString(out.TimeToLiveSpecification.AttributeName) != name || aws.ToBool(out.TimeToLiveSpecification.Enabled) != enabled) {
				t.Fatalf("UpdateTimeToLive %s %v answered %+v", name, enabled, out.TimeToLiveSpecification)
			}
			return err
		}
		refused := func(what, code, message string, err error) {
			t.Helper()
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != code || !strings.Contains(apiErr.ErrorMessage(), message) {
				t.Fatalf("%s: %v; want %s %q", what, err, code, message)
			}
		}
		describe(types.TimeToLiveStatusDisabled, "")
		refused("disable a disabled TTL", "ValidationException", "already disabled", update(table, "Ttl", false))
		if err := update(table, "Ttl", true); err != nil {
			t.Fatal(err)
		}
		describe(types.TimeToLiveStatusEnabled, "Ttl")
		refused("enable it again", "ValidationException", "already enabled", update(table, "Ttl", true))
		refused("enable another attribute", "ValidationException", "different AttributeName", update(table, "Other", true))
		item := key("P", "S")
		item["Ttl"] = num(1)
		put(t, d.Client, table, item)
		if get(t, d.Client, table, "P", "S") == nil {
			t.Fatal("an item past its TTL was gone at once")
		}
		if err := update(table, "Ttl", false); err != nil {
			t.Fatal(err)
		}
		describe(types.TimeToLiveStatusDisabled, "")
		refused("a table that does not exist", "ResourceNotFoundException", "non-existent table", update(d.NewTableName(), "Ttl", true))
	})
}
