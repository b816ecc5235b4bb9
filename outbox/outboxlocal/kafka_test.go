package outboxlocal

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func producer(t *testing.T, k *Kafka) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(k.ClientOpts(), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestKafka(t *testing.T) {
	t.Parallel()
	t.Run("RoundTripKeepsKeysAndHeaders", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t, "orders")
		topic := k.Topic("orders")
		cl := producer(t, k)
		sent := []*kgo.Record{
			{Topic: topic, Key: nil, Value: []byte("no key")},
			{Topic: topic, Key: []byte{}, Value: []byte("empty key"), Headers: []kgo.RecordHeader{{Key: "x-outbox-message-id", Value: []byte("id-1")}}},
			{Topic: topic, Key: []byte("k"), Value: nil, Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "null", Value: nil}}},
		}
		if err := cl.ProduceSync(t.Context(), sent...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		got := consume(t, k, topic, len(sent))
		byValue := map[string]*kgo.Record{}
		for _, r := range got {
			byValue[string(r.Value)] = r
		}
		if r := byValue["no key"]; r == nil || r.Key != nil {
			t.Fatalf("nil key came back as %#v", r)
		}
		if r := byValue["empty key"]; r == nil || r.Key == nil || len(r.Key) != 0 {
			t.Fatalf("empty key came back as %#v", r)
		} else if len(r.Headers) != 1 || r.Headers[0].Key != "x-outbox-message-id" || string(r.Headers[0].Value) != "id-1" {
			t.Fatalf("headers %v", r.Headers)
		}
		if r := byValue[""]; r == nil || !bytes.Equal(r.Key, []byte("k")) || len(r.Headers) != 2 || r.Headers[1].Value != nil {
			t.Fatalf("keyed record %#v", r)
		}

		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("later")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		all := consumeAll(t, k, topic)
		if len(all) != 4 {
			t.Fatalf("ConsumeAll returned %d records, want 4", len(all))
		}
		var keyed []string
		for _, r := range all {
			if bytes.Equal(r.Key, []byte("k")) {
				keyed = append(keyed, string(r.Value))
			}
		}
		if len(keyed) != 2 || keyed[0] != "" || keyed[1] != "later" {
			t.Fatalf("records of key k in partition order: %q", keyed)
		}
		ends, err := k.endOffsets(t.Context(), topic)
		if err != nil || len(ends) != DefaultPartitions {
			t.Fatalf("topic has %d partitions (%v), want %d", len(ends), err, DefaultPartitions)
		}
	})

	t.Run("ClusterInjectsProduceErrors", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t, "events")
		topic := k.Topic("events")
		cl := producer(t, k)
		var injected atomic.Int32
		k.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
			k.Cluster.KeepControl()
			if injected.Add(1) > 1 {
				return nil, nil, false
			}
			produce := req.(*kmsg.ProduceRequest)
			resp := produce.ResponseKind().(*kmsg.ProduceResponse)
			for _, rt := range produce.Topics {
				st := kmsg.NewProduceResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewProduceResponseTopicPartition()
					sp.Partition = rp.Partition
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce after one retriable error: %v", err)
		}
		if got := injected.Load(); got < 2 {
			t.Fatalf("the produce request was seen %d times: the injected error was not retried", got)
		}
		if got := consumeAll(t, k, topic); len(got) != 1 {
			t.Fatalf("%d records stored, want 1", len(got))
		}
	})

	t.Run("ConsumeStopsAtTheDeadline", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t, "empty")
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		recs, err := k.Consume(ctx, k.Topic("empty"), 1)
		if !errors.Is(err, context.DeadlineExceeded) || len(recs) != 0 {
			t.Fatalf("got %d records and %v, want none and a deadline error", len(recs), err)
		}
		if got := consumeAll(t, k, k.Topic("empty")); len(got) != 0 {
			t.Fatalf("ConsumeAll of an empty topic returned %d records", len(got))
		}
	})
}
