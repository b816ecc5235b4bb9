package outbox

import "github.com/spillway-dev/spillway/outbox/internal/murmur2"

// Murmur2 returns the 32-bit MurmurHash2 of data as the Kafka Java client
// computes it (seed 0x9747b28c, blocks read little-endian). For a non-empty
// key it is the hash Kafka's default partitioner uses.
func Murmur2(data []byte) uint32 { return murmur2.Sum32(data) }

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
