package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// deadLetter produces a record to orders.dlq as a consumer dead-lettering
// orders/0@offset does.
func deadLetter(t *testing.T, k *outboxlocal.Kafka, offset int) {
	t.Helper()
	cl, err := kgo.NewClient(k.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r := &kgo.Record{Topic: "orders.dlq", Key: []byte("order-1"), Value: []byte("paid"), Headers: []kgo.RecordHeader{
		{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(outbox.NewMessageID().String())},
		{Key: outboxinbox.HeaderError, Value: []byte("account closed")},
		{Key: outboxinbox.HeaderSource, Value: []byte("orders/0@" + strconv.Itoa(offset))},
	}}
	if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestInboxRedrive(t *testing.T) {
	// A dry run counts per topic and changes nothing; --yes sends the dead
	// letters back; a second run finds nothing new.
	t.Run("DryRunThenYesThenNothingNew", func(t *testing.T) {
		k := outboxtest.NewKafka(t, "orders", "orders.dlq", "payments.dlq")
		deadLetter(t, k, 0)
		deadLetter(t, k, 1)
		brokers := []string{"inbox", "redrive", "--brokers", strings.Join(k.Brokers, ",")}
		code, out, errs := cli(t, brokers...)
		if code != 0 || !regexp.MustCompile(`orders\.dlq +orders +2 +0\n`).MatchString(out) || !strings.Contains(out, "Dry run") {
			t.Fatalf("dry run: exit %d\n%s%s", code, out, errs)
		}
		if n := len(outboxtest.ConsumeAll(t, k, "orders")); n != 0 {
			t.Fatalf("the dry run produced %d records", n)
		}
		code, out, errs = cli(t, append(brokers, "--yes")...)
		if code != 0 || !strings.Contains(out, "Re-drove 2 of 2") {
			t.Fatalf("--yes: exit %d\n%s%s", code, out, errs)
		}
		back := outboxtest.ConsumeAll(t, k, "orders")
		if len(back) != 2 || string(back[0].Value) != "paid" || back[0].Partition != 0 {
			t.Fatalf("orders holds %d records after the re-drive, want the 2 dead letters on partition 0", len(back))
		}
		code, out, errs = cli(t, append(brokers, "--yes", "--json", "--topic", "orders.dlq")...)
		var got redriveOutput
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Routes) != 1 || got.Routes[0].Records != 0 {
			t.Fatalf("second run: exit %d, %v\n%s%s", code, err, out, errs)
		}
		t.Logf("second run: %s", out)
	})

	// --topic names dead-letter topics, repeated or comma-separated; --to
	// sends the one named topic's records to another topic, a key's into
	// one partition there.
	t.Run("TopicRepeatableAndToAnotherTopic", func(t *testing.T) {
		k := outboxtest.NewKafka(t, "orders", "orders.dlq", "payments.dlq", "orders-v2", "audit.dlq")
		deadLetter(t, k, 0)
		deadLetter(t, k, 1)
		brokers := []string{"inbox", "redrive", "--brokers", strings.Join(k.Brokers, ","), "--json"}
		for _, topics := range [][]string{{"--topic", "orders.dlq", "--topic", "payments.dlq"}, {"--topic", "orders.dlq,payments.dlq"}} {
			code, out, errs := cli(t, append(brokers, topics...)...)
			var got redriveOutput
			if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Routes) != 2 || got.Routes[1].DeadLetterTopic != "payments.dlq" {
				t.Fatalf("%v: exit %d, %v\n%s%s; want the rows of orders.dlq and payments.dlq", topics, code, err, out, errs)
			}
		}
		code, out, errs := cli(t, append(brokers, "--topic", "orders.dlq", "--to", "orders-v2", "--yes")...)
		var got redriveOutput
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Routes) != 1 || got.Routes[0].Topic != "orders-v2" || got.Routes[0].Produced != 2 {
			t.Fatalf("--to orders-v2: exit %d, %v\n%s%s", code, err, out, errs)
		}
		moved := outboxtest.ConsumeAll(t, k, "orders-v2")
		if len(moved) != 2 || moved[0].Partition != moved[1].Partition || string(moved[0].Value) != "paid" {
			t.Fatalf("orders-v2 holds %d records, want the 2 dead letters of order-1 in one partition", len(moved))
		}
		if n := len(outboxtest.ConsumeAll(t, k, "orders")); n != 0 {
			t.Fatalf("--to orders-v2 sent %d records to orders", n)
		}
	})

	// --to needs exactly one --topic, another than itself, and a name
	// Kafka takes: a usage error before any broker is asked.
	t.Run("ToWithoutOneOtherTopic_UsageError", func(t *testing.T) {
		for _, args := range [][]string{
			{"--to", "orders"},
			{"--to", "orders", "--topic", "a.dlq,b.dlq"},
			{"--to", "orders.dlq", "--topic", "orders.dlq"},
			{"--to", "orders v2", "--topic", "orders.dlq"},
		} {
			code, _, errs := cli(t, append([]string{"inbox", "redrive", "--brokers", "127.0.0.1:1"}, args...)...)
			if code != 2 || !strings.Contains(errs, "spillway inbox: --to") {
				t.Errorf("%v: exit %d: %s", args, code, errs)
			}
		}
	})

	// A dead-letter topic that does not exist, and no brokers, are clear
	// errors; a mistyped verb names the right one.
	t.Run("UnknownTopicNoBrokersOrMistypedVerb_ClearErrors", func(t *testing.T) {
		k := outboxtest.NewKafka(t, "orders")
		code, _, errs := cli(t, "inbox", "redrive", "--brokers", strings.Join(k.Brokers, ","), "--topic", "ordres.dlq")
		if code != 1 || !strings.Contains(errs, "ordres.dlq") || !strings.Contains(errs, "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Fatalf("unknown topic: exit %d: %s", code, errs)
		}
		t.Setenv("SPILLWAY_KAFKA_BROKERS", "")
		code, _, errs = cli(t, "inbox", "redrive")
		if code != 2 || !strings.Contains(errs, "--brokers") {
			t.Fatalf("no brokers: exit %d: %s", code, errs)
		}
		code, _, errs = cli(t, "inbox", "redirve")
		if code != 2 || !strings.Contains(errs, "did you mean redrive?") {
			t.Fatalf("inbox redirve: exit %d: %s", code, errs)
		}
	})
}
