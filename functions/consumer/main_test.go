package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestApplyOrder(t *testing.T) {
	// The sample event, delivered twice as a Lambda retry would, leaves each
	// order with one application per distinct message.
	t.Run("SampleEventTwice_EachMessageAppliedOnce", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join("..", "..", "events", "consumer.kafka.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ev events.KafkaEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		d := outboxtest.NewDynamoDB(t)
		table := outboxtest.CreateTable(t, d)
		pk, sk := outboxlocal.DefaultPartitionKey, outboxlocal.DefaultSortKey
		in, err := outboxinbox.New(d.Client, outboxinbox.Options{TableName: table, Consumer: "spillway-consumer"})
		if err != nil {
			t.Fatal(err)
		}
		h, err := outboxinbox.NewLambdaHandler(in, applyOrder(table, pk, sk))
		if err != nil {
			t.Fatal(err)
		}
		h.Metrics = nil
		for range 2 {
			if err := h.Handle(t.Context(), ev); err != nil {
				t.Fatal(err)
			}
		}
		for order, want := range map[string]string{"order-7": "2", "order-9": "1"} {
			out, err := d.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{pk: &types.AttributeValueMemberS{Value: "ORDER#" + order}, sk: &types.AttributeValueMemberS{Value: "ORDER"}}})
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := out.Item["Applied"].(*types.AttributeValueMemberN); n == nil || n.Value != want {
				t.Fatalf("%s applied %v times, want %s", order, out.Item["Applied"], want)
			}
		}
	})

	// The undecodable sample (`make invoke EVENT=events/consumer.undecodable.json`)
	// fails the invocation, applies nothing, and its EMF line counts the
	// failure, so the consumer's alarm sees what Lambda will retry.
	t.Run("UndecodableSample_FailsAndIsCounted", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join("..", "..", "events", "consumer.undecodable.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ev events.KafkaEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		d := outboxtest.NewDynamoDB(t)
		table := outboxtest.CreateTable(t, d)
		h, err := newInboxHandler(d.Client, outboxinbox.Options{TableName: table, Consumer: "spillway-consumer"},
			applyOrder(table, outboxlocal.DefaultPartitionKey, outboxlocal.DefaultSortKey))
		if err != nil {
			t.Fatal(err)
		}
		var emf bytes.Buffer
		h.MetricsOutput = &emf
		var be *outboxinbox.BatchError
		if err := h.Handle(t.Context(), ev); !errors.As(err, &be) || len(be.Failures) != 1 {
			t.Fatalf("Handle = %v, want one failed partition", err)
		}
		var line map[string]any
		if err := json.Unmarshal(emf.Bytes(), &line); err != nil || line["ConsumeFailures"] != float64(1) || line["RecordsConsumed"] != float64(0) {
			t.Fatalf("EMF line %q (%v), want 1 consume failure and nothing consumed", emf.String(), err)
		}
	})
}
