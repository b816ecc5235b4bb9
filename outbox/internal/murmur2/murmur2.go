// Package murmur2 is the hash Kafka's default partitioner uses, shared by
// the bucket hash (outbox.ComputeBucket), the lease rounds' stagger and
// outboxkafka's partitioner.
package murmur2

import "encoding/binary"

// The constants of Kafka's murmur2 variant. Every writer of a table must use
// exactly these, or the messages of one key land in different buckets.
const (
	seed  = 0x9747b28c
	mix   = 0x5bd1e995
	shift = 24
)

// Sum32 returns the 32-bit MurmurHash2 of data as the Kafka Java client
// computes it (seed 0x9747b28c, blocks read little-endian). For a non-empty
// key it is the hash Kafka's default partitioner uses.
func Sum32(data []byte) uint32 {
	h := uint32(seed) ^ uint32(len(data))
	n := len(data) &^ 3
	for i := 0; i < n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= mix
		k ^= k >> shift
		k *= mix
		h *= mix
		h ^= k
	}
	// The tail falls through like the C switch it comes from: three
	// remaining bytes mix all three, and the multiply happens once.
	switch tail := data[n:]; len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= mix
	}
	h ^= h >> 13
	h *= mix
	h ^= h >> 15
	return h
}

// Partition maps data to one of n slots the way Kafka's partitioner does:
// (Sum32(data) & 0x7fffffff) mod n. Clearing the sign bit (Kafka's
// toPositive) rather than taking an absolute value is what keeps the result
// equal to Java's. n == 1 returns 0 without hashing. n must be at least 1; a
// smaller n is a caller bug and panics like a division by zero.
func Partition(data []byte, n int) int {
	if n == 1 {
		return 0
	}
	if n < 1 {
		panic("murmur2: Partition: n must be >= 1")
	}
	return int(uint64(Sum32(data)&0x7fffffff) % uint64(n))
}
