// Command consumer is a sample Lambda function for an Amazon MSK or
// self-managed Apache Kafka event source mapping on Spillway's topics
// (provided.al2023, binary bootstrap, built with -tags lambda.norpc): it
// applies each order message to the orders table exactly once through the
// inbox (outbox/outboxinbox). Markers and orders share SPILLWAY_TABLE; the
// consumer name is SPILLWAY_INBOX_CONSUMER, by default the function's name.
// Replace applyOrder with your own handler.
package main

import (
	"cmp"
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
)

func main() {
	log := outboxlambda.NewLogger(os.Stdout, os.Getenv)
	handle, err := newHandler(context.Background(), log)
	if err != nil {
		log.Error("consumer function cannot start", "error", err)
		os.Exit(1)
	}
	lambda.Start(handle)
}

// newHandler builds the invocation handler once per execution environment:
// the configuration, the DynamoDB client, the tracer and the inbox. The
// handler decodes each payload itself (a payload that is not a Kafka batch
// fails the invocation) and returns the inbox's verdict: a failed batch
// fails the invocation, so Lambda retries it and commits no offset.
func newHandler(ctx context.Context, log *slog.Logger) (outboxlambda.KafkaHandler, error) {
	setup, err := outboxlambda.NewInit(ctx, os.Getenv, log)
	if err != nil {
		return outboxlambda.KafkaHandler{}, err
	}
	cfg := setup.Config
	h, err := newInboxHandler(setup.DynamoDB(), outboxinbox.Options{
		TableName:    cfg.Table,
		Consumer:     cmp.Or(os.Getenv(outboxconf.EnvInboxConsumer), os.Getenv(outboxlambda.EnvFunctionName)),
		PartitionKey: cfg.PartitionKey,
		SortKey:      cfg.SortKey,
		Tracer:       setup.Tracing.Tracer(),
		Logger:       log,
	}, applyOrder(cfg.Table, cfg.PartitionKey, cfg.SortKey))
	if err != nil {
		return outboxlambda.KafkaHandler{}, err
	}
	return outboxlambda.KafkaHandler{Handle: h.Handle, Tracing: setup.Tracing, Name: "consumer", Logger: log}, nil
}

// newInboxHandler builds the inbox and its Lambda handler, with the EMF
// recorder as the inbox's hook, flushed to stdout after each invocation.
func newInboxHandler(client outboxinbox.Client, opts outboxinbox.Options, apply outboxinbox.Handler) (*outboxinbox.LambdaHandler, error) {
	metrics := &emf.InboxRecorder{}
	opts.Hooks = append(opts.Hooks, metrics)
	in, err := outboxinbox.New(client, opts)
	if err != nil {
		return nil, err
	}
	h, err := outboxinbox.NewLambdaHandler(in, apply)
	if err != nil {
		return nil, err
	}
	h.Metrics = metrics
	return h, nil
}

// applyOrder records each message on its order's item: the last value and
// the number of messages applied, which a duplicate never raises.
func applyOrder(table, pk, sk string) outboxinbox.Handler {
	return func(_ context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
		tx.Add(types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(table),
			Key: map[string]types.AttributeValue{
				pk: &types.AttributeValueMemberS{Value: "ORDER#" + string(rec.Key)},
				sk: &types.AttributeValueMemberS{Value: "ORDER"},
			},
			UpdateExpression:         aws.String("SET #last = :v ADD #applied :one"),
			ExpressionAttributeNames: map[string]string{"#last": "LastValue", "#applied": "Applied"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":v":   &types.AttributeValueMemberS{Value: string(rec.Value)},
				":one": &types.AttributeValueMemberN{Value: "1"},
			},
		}})
		return nil
	}
}
