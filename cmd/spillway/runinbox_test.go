package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestInboxDemo(t *testing.T) {
	t.Run("AppliesEachMessageOnce_SkipsTheInjectedCopies_DeadLettersTheRefused", func(t *testing.T) {
		d := outboxtest.NewDynamoDB(t)
		table := outboxtest.CreateTable(t, d)
		k := outboxtest.NewKafka(t, append(slices.Clip(demoTopics), inboxDemoDeadLetters)...)
		const messages = 40
		producer, err := kgo.NewClient(k.ClientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		for i := range messages {
			r := &kgo.Record{Topic: demoTopics[i%2], Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte("v"),
				Headers: []kgo.RecordHeader{{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(outbox.NewMessageID().String())}}}
			if err := producer.ProduceSync(t.Context(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		demo, err := newInboxDemo(d.Client, table, k.Brokers, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- demo.run(ctx) }()
		deadline := time.Now().Add(30 * time.Second)
		for !demo.done(messages) || demo.injected.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("timed out")
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		total := 0
		for i := range 10 {
			out, err := d.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: fmt.Sprintf("ORDER#%s#k%d", demoTopics[i%2], i%5)}, "SK": &types.AttributeValueMemberS{Value: "ORDER"}}})
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := out.Item["Applied"].(*types.AttributeValueMemberN); ok {
				v, _ := strconv.Atoi(n.Value)
				total += v
			}
		}
		if total != messages-1 {
			t.Fatalf("orders count %d applications, want %d (all but the refused one)", total, messages-1)
		}
		var buf bytes.Buffer
		f := demo.figures()
		f.print(&buf)
		t.Log(strings.TrimSpace(buf.String()))
		if why := f.failed(messages); why != "" || f.Duplicates != f.Injected || f.Duplicates == 0 {
			t.Fatalf("figures %+v: %s; want every copy skipped", f, why)
		}
		dl := outboxtest.Consume(t, k, inboxDemoDeadLetters, 1)[0]
		if id := *demo.refused.Load(); header(fromHeaders(dl.Headers), outbox.DefaultMessageIDHeaderName) != id || !strings.Contains(header(fromHeaders(dl.Headers), outboxinbox.HeaderError), "account closed") {
			t.Fatalf("dead-lettered record %v, want message %s with the refusal", dl.Headers, id)
		}
	})
}

func fromHeaders(hs []kgo.RecordHeader) outboxinbox.Record {
	var rec outboxinbox.Record
	for _, h := range hs {
		rec.Headers = append(rec.Headers, outbox.Header{Key: h.Key, Value: h.Value})
	}
	return rec
}
