package outboxddb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// TableNotFoundError reports a request DynamoDB refused with
// ResourceNotFoundException: a table it names does not exist at the
// endpoint the client reached (a typo, another region or account, a table
// not created yet). It wraps the SDK's error.
type TableNotFoundError struct {
	// Tables are the tables the request named, sorted: one, or each table
	// of a transaction (DynamoDB does not say which one is missing).
	Tables []string
	// Endpoint is the endpoint's URL, or "the regional endpoint of
	// <region>".
	Endpoint string
	Err      error
}

// Error implements error.
func (e *TableNotFoundError) Error() string {
	if len(e.Tables) == 1 {
		return fmt.Sprintf("table %s not found at %s: check the table's name and the endpoint, or create it with `spillway create-table --table %s`",
			e.Tables[0], e.Endpoint, e.Tables[0])
	}
	return fmt.Sprintf("table %s not found at %s (DynamoDB does not say which of the transaction's tables): check their names and the endpoint, or create the missing one with `spillway create-table --table NAME`",
		tableList(e.Tables), e.Endpoint)
}

// Unwrap returns the SDK's error.
func (e *TableNotFoundError) Unwrap() error { return e.Err }

// tableList joins table names for a sentence: "a", "a or b", "a, b or c".
func tableList(tables []string) string {
	if len(tables) < 2 {
		return strings.Join(tables, "")
	}
	return strings.Join(tables[:len(tables)-1], ", ") + " or " + tables[len(tables)-1]
}

// CredentialsError reports a request the SDK could not sign because its
// credential chain found no credentials (the chain's last resort, the EC2
// instance role, says "no EC2 IMDS role found"), or found expired ones. It
// wraps the chain's error, which names what it tried.
type CredentialsError struct {
	// Endpoint is the endpoint the request was for, as in
	// TableNotFoundError.
	Endpoint string
	Err      error
}

// Error implements error.
func (e *CredentialsError) Error() string {
	return fmt.Sprintf("no AWS credentials for %s: set AWS_PROFILE (after aws sso login for an SSO profile), "+
		"or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with an IAM role; "+
		"a local endpoint takes any, e.g. AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local (the SDK: %v)", e.Endpoint, e.Err)
}

// Unwrap returns the credential chain's error.
func (e *CredentialsError) Unwrap() error { return e.Err }

// RetryableError tells the SDK's retryer not to ask the chain again: each
// provider already retried what it could (the instance-metadata client
// three times), and a request's retries would only multiply the wait for
// an answer that does not change.
func (e *CredentialsError) RetryableError() bool { return false }

// explainID names the middleware ExplainErrors adds.
const explainID = "spillwayExplainErrors"

// ExplainErrors is a DynamoDB client option that turns two set-up mistakes
// into errors that say what to fix: a request naming a table that does not
// exist returns a *TableNotFoundError, and a request the SDK finds no
// credentials for a *CredentialsError; both wrap the SDK's error, so
// errors.As still finds it. The Store, the Writer and the inbox apply it
// to each of their requests; give it to dynamodb.NewFromConfig for the
// client's other requests. Applying it twice is harmless.
func ExplainErrors(o *dynamodb.Options) {
	// Read when a request fails, so options set after this one count.
	endpoint := func() string { return endpointOf(o) }
	if o.Credentials != nil && !isExplained(o.Credentials) {
		o.Credentials = explainedCredentials{o.Credentials, endpoint}
	}
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		if _, ok := stack.Initialize.Get(explainID); ok {
			return nil
		}
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(explainID,
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if isResourceNotFound(err) && !errors.As(err, new(*TableNotFoundError)) {
					err = &TableNotFoundError{Tables: tablesOf(in.Parameters), Endpoint: endpoint(), Err: err}
				}
				return out, md, err
			}), middleware.After)
	})
}

// endpointOf names the endpoint o reaches.
func endpointOf(o *dynamodb.Options) string {
	switch {
	case o.BaseEndpoint != nil && *o.BaseEndpoint != "":
		return *o.BaseEndpoint
	case o.Region != "":
		return "the regional endpoint of " + o.Region
	}
	return "the regional endpoint (no region set)"
}

// explainedCredentials returns a *CredentialsError for the provider's
// failures.
type explainedCredentials struct {
	aws.CredentialsProvider
	endpoint func() string
}

// Retrieve implements aws.CredentialsProvider.
func (c explainedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	creds, err := c.CredentialsProvider.Retrieve(ctx)
	if err != nil && !errors.As(err, new(*CredentialsError)) {
		err = &CredentialsError{Endpoint: c.endpoint(), Err: err}
	}
	return creds, err
}

// IsCredentialsProvider answers for the wrapped provider, so the SDK still
// sees a cache or anonymous credentials for what they are.
func (c explainedCredentials) IsCredentialsProvider(target aws.CredentialsProvider) bool {
	return aws.IsCredentialsProvider(c.CredentialsProvider, target)
}

func isExplained(p aws.CredentialsProvider) bool {
	_, ok := p.(explainedCredentials)
	return ok
}

// tablesOf returns the tables a request names, sorted.
func tablesOf(params any) []string {
	var tables []string
	add := func(t *string) {
		if t != nil && !slices.Contains(tables, *t) {
			tables = append(tables, *t)
		}
	}
	switch in := params.(type) {
	case *dynamodb.QueryInput:
		add(in.TableName)
	case *dynamodb.GetItemInput:
		add(in.TableName)
	case *dynamodb.PutItemInput:
		add(in.TableName)
	case *dynamodb.UpdateItemInput:
		add(in.TableName)
	case *dynamodb.DeleteItemInput:
		add(in.TableName)
	case *dynamodb.ScanInput:
		add(in.TableName)
	case *dynamodb.DescribeTableInput:
		add(in.TableName)
	case *dynamodb.DescribeTimeToLiveInput:
		add(in.TableName)
	case *dynamodb.UpdateTimeToLiveInput:
		add(in.TableName)
	case *dynamodb.BatchWriteItemInput:
		for t := range in.RequestItems {
			add(aws.String(t))
		}
	case *dynamodb.TransactGetItemsInput:
		for _, it := range in.TransactItems {
			if it.Get != nil {
				add(it.Get.TableName)
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				add(it.Put.TableName)
			case it.Update != nil:
				add(it.Update.TableName)
			case it.Delete != nil:
				add(it.Delete.TableName)
			case it.ConditionCheck != nil:
				add(it.ConditionCheck.TableName)
			}
		}
	}
	slices.Sort(tables)
	if len(tables) == 0 {
		return []string{"(unnamed)"}
	}
	return tables
}

// explaining applies ExplainErrors to every request of the store's and the
// writer's client.
type explaining struct{ Client }

// explain wraps c, once.
func explain(c Client) Client {
	if _, ok := c.(explaining); ok {
		return c
	}
	return explaining{c}
}

// with returns optFns and ExplainErrors last, in a slice of its own.
func with(optFns []func(*dynamodb.Options)) []func(*dynamodb.Options) {
	return append(slices.Clip(optFns), ExplainErrors)
}

func (c explaining) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return c.Client.Query(ctx, in, with(optFns)...)
}

func (c explaining) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return c.Client.PutItem(ctx, in, with(optFns)...)
}

func (c explaining) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return c.Client.UpdateItem(ctx, in, with(optFns)...)
}

func (c explaining) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return c.Client.DeleteItem(ctx, in, with(optFns)...)
}

func (c explaining) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return c.Client.BatchWriteItem(ctx, in, with(optFns)...)
}

func (c explaining) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return c.Client.TransactWriteItems(ctx, in, with(optFns)...)
}

func (c explaining) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return c.Client.TransactGetItems(ctx, in, with(optFns)...)
}

func (c explaining) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return c.Client.CreateTable(ctx, in, with(optFns)...)
}

func (c explaining) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return c.Client.DescribeTable(ctx, in, with(optFns)...)
}
