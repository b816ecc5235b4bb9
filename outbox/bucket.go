package outbox

import (
	"fmt"

	"github.com/spillway-dev/spillway/outbox/internal/murmur2"
)

// ComputeBucket returns the ordering bucket of a message, in [0, bucketCount).
// Every writer of a table must compute it identically, so the rules follow
// the .NET outbox exactly, in this order:
//
//  1. An explicit partition wins: partition mod bucketCount. Key and id are
//     ignored. A negative partition is an error.
//  2. A non-nil key, including an empty one, hashes the key with
//     Kafka's murmur2 partitioner. All messages of one key share a bucket, which is what
//     keeps them in order.
//  3. A nil key (keyless message) hashes id.GUIDBytes(), the id in .NET's
//     byte order, so keyless messages spread over the buckets.
//
// bucketCount must be at least 1. Errors wrap ErrInvalidMessage.
func ComputeBucket(key []byte, id MessageID, bucketCount int, partition *int32) (int, error) {
	if bucketCount < 1 {
		return 0, fmt.Errorf("%w: compute bucket: bucket count %d, want >= 1", ErrInvalidMessage, bucketCount)
	}
	if partition != nil {
		p := *partition
		if p < 0 {
			return 0, fmt.Errorf("%w: compute bucket: partition %d is negative", ErrInvalidMessage, p)
		}
		return int(p) % bucketCount, nil
	}
	if key != nil {
		return murmur2.Partition(key, bucketCount), nil
	}
	g := id.GUIDBytes()
	return murmur2.Partition(g[:], bucketCount), nil
}
