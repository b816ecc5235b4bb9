package outbox

import "testing"

// benchHeaders are the headers a traced message typically carries.
var benchHeaders = []Header{
	{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
	{Key: "X-Amzn-Trace-Id", Value: []byte("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")},
	{Key: "type", Value: []byte("order.created")},
	{Key: "tombstone-marker", Value: nil},
}

// BenchmarkEncodeHeaders measures the header codec's encoder, run by the
// writer for every message with headers.
func BenchmarkEncodeHeaders(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if EncodeHeaders(benchHeaders) == nil {
			b.Fatal("no blob")
		}
	}
}

// BenchmarkDecodeHeaders measures the decoder, run by the relay for every
// published message with headers.
func BenchmarkDecodeHeaders(b *testing.B) {
	blob := EncodeHeaders(benchHeaders)
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	for b.Loop() {
		hs, err := DecodeHeaders(blob)
		if err != nil || len(hs) != len(benchHeaders) {
			b.Fatal(hs, err)
		}
	}
}
