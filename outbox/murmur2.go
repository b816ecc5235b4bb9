package outbox

import "encoding/binary"

// The constants of Kafka's murmur2 variant. Every writer of a table must use
// exactly these, or the messages of one key land in different buckets.
const (
	murmur2Seed = 0x9747b28c
	murmur2M    = 0x5bd1e995
	murmur2R    = 24
)

// Murmur2 returns the 32-bit MurmurHash2 of data as the Kafka Java client
// computes it (seed 0x9747b28c, blocks read little-endian). For a non-empty
// key it is the hash Kafka's default partitioner uses.
func Murmur2(data []byte) uint32 {
	h := uint32(murmur2Seed) ^ uint32(len(data))
	n := len(data) &^ 3
	for i := 0; i < n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= murmur2M
		k ^= k >> murmur2R
		k *= murmur2M
		h *= murmur2M
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
		h *= murmur2M
	}
	h ^= h >> 13
	h *= murmur2M
	h ^= h >> 15
	return h
}

// Murmur2Partition maps data to one of n slots the way Kafka's partitioner
// does: (Murmur2(data) & 0x7fffffff) mod n. Clearing the sign bit (Kafka's
// toPositive) rather than taking an absolute value is what keeps the result
// equal to Java's. n == 1 returns 0 without hashing. n must be at least 1; a
// smaller n is a caller bug and panics like a division by zero.
func Murmur2Partition(data []byte, n int) int {
	if n == 1 {
		return 0
	}
	if n < 1 {
		panic("outbox: Murmur2Partition: n must be >= 1")
	}
	return int(uint64(Murmur2(data)&0x7fffffff) % uint64(n))
}
