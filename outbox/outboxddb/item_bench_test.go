package outboxddb

import (
	"testing"

	"github.com/spillway-dev/spillway/outbox"
)

// benchMessage is a keyed 1 KB message with two headers, as stored.
func benchMessage(b *testing.B) outbox.Message {
	b.Helper()
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(i * 7)
	}
	m, err := outbox.NewMessage("orders", []byte("customer-000042"), value, outbox.MessageOptions{
		Headers: []outbox.Header{
			{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
			{Key: "type", Value: []byte("order.created")},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	return outbox.Stored(m, 3, 42)
}

// BenchmarkEncodeMessage measures building a message item, done by the
// writer for every message (and again to size it).
func BenchmarkEncodeMessage(b *testing.B) {
	k := newKeys(Options{}.WithDefaults())
	m := benchMessage(b)
	b.ReportAllocs()
	for b.Loop() {
		if item := k.encodeMessage(m, outbox.DefaultBucketCount, reservation{first: 42, count: 1}); len(item) == 0 {
			b.Fatal("empty item")
		}
	}
}

// BenchmarkDecodeMessage measures reading a fetched item back into a
// message, done by the relay for every message it fetches.
func BenchmarkDecodeMessage(b *testing.B) {
	k := newKeys(Options{}.WithDefaults())
	m := benchMessage(b)
	item := k.encodeMessage(m, outbox.DefaultBucketCount, reservation{first: 42, count: 1})
	b.ReportAllocs()
	for b.Loop() {
		got, err := k.decodeMessage(item, m.Bucket())
		if err != nil || got.ID != m.ID {
			b.Fatal(got, err)
		}
	}
}
