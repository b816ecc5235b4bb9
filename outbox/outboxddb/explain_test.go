package outboxddb

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestExplain(t *testing.T) {
	msg, err := outbox.NewMessage("orders", []byte("order-1"), []byte("v"), outbox.MessageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// missingTable checks that err is a *TableNotFoundError over the SDK's
	// ResourceNotFoundException, with the text want.
	missingTable := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil || err.Error() != want {
			t.Errorf("error %v,\nwant %s", err, want)
		}
		if !errors.As(err, new(*TableNotFoundError)) || !errors.As(err, new(*types.ResourceNotFoundException)) {
			t.Errorf("%v is not a *TableNotFoundError over a ResourceNotFoundException", err)
		}
	}

	// The writer and the store name the table they missed, where they
	// looked, and the command that creates it; the operation and the
	// bucket or item stay in front. A writer's first request reads the
	// table's layout record.
	t.Run("AMissingTableIsNamedWithItsEndpointAndTheFix", func(t *testing.T) {
		db := outboxtest.NewDynamoDB(t)
		missing := db.NewTableName()
		fix := "table " + missing + " not found at " + db.Endpoint + ": check the table's name and the endpoint, or create it with `spillway create-table --table " + missing + "`"
		w, err := NewWriter(db.Client, WriterOptions{Options: Options{TableName: missing}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.Commit(t.Context(), func(ctx context.Context, tx *Tx) error { return tx.Enqueue(msg) })
		missingTable(t, err, `outboxddb: read LAYOUT of "OUTBOX#COORDINATION": operation error DynamoDB: Query, `+fix)
		s, err := NewStore(db.Client, StoreOptions{Options: Options{TableName: missing, BucketCount: 1}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Backlog(t.Context())
		missingTable(t, err, "outboxddb: read the head of bucket 0: operation error DynamoDB: Query, "+fix)
	})

	// A transaction names several tables and DynamoDB does not say which
	// one is missing: the error lists them all.
	t.Run("ATransactionNamesEachOfItsTables", func(t *testing.T) {
		db := outboxtest.NewDynamoDB(t)
		table, missing := outboxtest.CreateTable(t, db), db.NewTableName()
		w, err := NewWriter(db.Client, WriterOptions{Options: Options{TableName: table}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.Commit(t.Context(), func(ctx context.Context, tx *Tx) error {
			tx.Put(types.Put{TableName: aws.String(missing), Item: map[string]types.AttributeValue{
				"PK": &types.AttributeValueMemberS{Value: "ORDER#1"}, "SK": &types.AttributeValueMemberS{Value: "ORDER"}}})
			return tx.Enqueue(msg)
		})
		first, second := min(table, missing), max(table, missing)
		missingTable(t, err, "outboxddb: commit 1 business items and 1 messages: operation error DynamoDB: TransactWriteItems, table "+first+" or "+second+
			" not found at "+db.Endpoint+" (DynamoDB does not say which of the transaction's tables): check their names and the endpoint, or create the missing one with `spillway create-table --table NAME`")
	})

	// A client built with ExplainErrors and handed to the store explains
	// once, not twice.
	t.Run("ExplainingTwiceSaysItOnce", func(t *testing.T) {
		db := outboxtest.NewDynamoDB(t)
		client := dynamodb.New(db.Client.Options(), ExplainErrors)
		s, err := NewStore(client, StoreOptions{Options: Options{TableName: db.NewTableName(), BucketCount: 1}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Backlog(t.Context())
		if err == nil || strings.Count(err.Error(), "not found at") != 1 {
			t.Errorf("explained twice: %v", err)
		}
	})

	// Without credentials (here the SDK's last resort, an EC2 instance
	// role, behind a refused connection) the error says what to set and
	// keeps the chain's reason, and is not retried: no request is sent.
	t.Run("MissingCredentialsSayWhatToSet", func(t *testing.T) {
		db := outboxtest.NewDynamoDB(t)
		creds := aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) {
			o.Client = imds.New(imds.Options{Endpoint: "http://127.0.0.1:1", Retryer: aws.NopRetryer{}})
		}))
		attempts := 0
		client := dynamodb.New(dynamodb.Options{Region: "eu-west-1", Credentials: aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
			attempts++
			return creds.Retrieve(ctx)
		})})
		s, err := NewStore(client, StoreOptions{Options: Options{TableName: outboxtest.CreateTable(t, db), BucketCount: 1}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Backlog(t.Context())
		want := "outboxddb: read the head of bucket 0: operation error DynamoDB: Query, get identity: get credentials: no AWS credentials for the regional endpoint of eu-west-1: " +
			"set AWS_PROFILE (after aws sso login for an SSO profile), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with an IAM role; " +
			"a local endpoint takes any, e.g. AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local (the SDK: failed to refresh cached credentials, no EC2 IMDS role found, "
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %v,\nwant %s…", err, want)
		}
		if !errors.As(err, new(*CredentialsError)) || attempts != 1 {
			t.Errorf("%T after %d attempts; want a *CredentialsError after 1", err, attempts)
		}
	})
}
