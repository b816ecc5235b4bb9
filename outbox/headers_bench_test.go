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

// BenchmarkBatchHeaderReads measures what the relay's readers of a batch of
// 500 traced messages cost in header decoding: the publish span's origins
// and links (two traces, two spans), then the publisher's record per message. "fetched" decodes
// each blob once after the fetch, as the relay does; "undecoded" is the
// same readers on messages that were not, each decoding on its own.
func BenchmarkBatchHeaderReads(b *testing.B) {
	blob := EncodeHeaders(benchHeaders)
	for _, bc := range []struct {
		name  string
		fetch bool
	}{{"fetched", true}, {"undecoded", false}} {
		b.Run(bc.name, func(b *testing.B) {
			msgs := make([]Message, 500)
			b.ReportAllocs()
			for b.Loop() {
				for i := range msgs {
					msgs[i] = Message{Headers: blob}
				}
				if bc.fetch {
					decodeFetched(msgs)
				}
				if len(originTraces(msgs)) != 2 || len(originLinks(msgs)) != 2 {
					b.Fatal("origins not found")
				}
				for i := range msgs {
					if hs, err := msgs[i].DecodedHeaders(); err != nil || len(hs) != len(benchHeaders) {
						b.Fatal(hs, err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
		})
	}
}
