package outbox

import (
	"fmt"
	"testing"

	"github.com/spillway-dev/spillway/outbox/internal/murmur2"
)

// BenchmarkBucket measures ComputeBucket, which every writer runs per
// message: a typical key, a keyless message (the id's .NET bytes are
// hashed) and an explicit partition.
func BenchmarkBucket(b *testing.B) {
	key := []byte("customer-000042")
	id := NewMessageID()
	partition := int32(5)
	for _, c := range []struct {
		name      string
		key       []byte
		partition *int32
	}{{"key", key, nil}, {"keyless", nil, nil}, {"partition", key, &partition}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ComputeBucket(c.key, id, DefaultBucketCount, c.partition); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMurmur2 measures the hash on short keys and on a 1 KB input.
func BenchmarkMurmur2(b *testing.B) {
	for _, n := range []int{16, 64, 1024} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 31)
		}
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				murmur2.Sum32(data)
			}
		})
	}
}
