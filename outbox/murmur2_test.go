package outbox

import (
	"encoding/hex"
	"testing"

	"github.com/spillway-dev/spillway/outbox/internal/murmur2"
)

// murmur2Reference is a second, deliberately plain transcription of the
// Kafka Java client's murmur2 (bytes assembled by hand, tail by explicit
// cases without fallthrough), so a refactoring of Murmur2 that changes a
// single hash shows up in FuzzMurmur2.
func murmur2Reference(data []byte) uint32 {
	const seed, m = 0x9747b28c, 0x5bd1e995
	length := len(data)
	h := uint32(seed ^ length)
	blocks := length / 4
	for i := range blocks {
		k := uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24
		k *= m
		k ^= k >> 24
		k *= m
		h *= m
		h ^= k
	}
	o := blocks * 4
	switch length % 4 {
	case 3:
		h ^= uint32(data[o+2]) << 16
		h ^= uint32(data[o+1]) << 8
		h ^= uint32(data[o])
		h *= m
	case 2:
		h ^= uint32(data[o+1]) << 8
		h ^= uint32(data[o])
		h *= m
	case 1:
		h ^= uint32(data[o])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

func TestMurmur2(t *testing.T) {
	t.Parallel()
	// Vectors pins the hash itself (facts §2.3 R1-R5, C1-C9). If
	// this test trips, key -> bucket mappings remap for live data: see
	// TestBucket/ComputeBucket_GoldenVectors.
	t.Run("Vectors", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name string
			key  []byte
			want uint32
		}{
			{"R1", []byte("user-123"), 0xa87c3114},
			{"R2", []byte("order-123"), 0xc7f202c1},
			{"R3", []byte("tenant-a"), 0xe20b7283},
			{"R4", []byte("a"), 0xa2d0b27c},
			{"R5", []byte("kafka"), 0xd067cf64},
			{"C1", []byte("stable-key"), 0x647766e9},
			{"C2", []byte("order-12345"), 0x97d969a9},
			{"C3", []byte("order-1"), 0x48d1d1f6},
			{"C4", []byte("some-key"), 0x232c7786},
			{"C5", []byte("user-123"), 0xa87c3114},
			{"C6", []byte("abc"), 0x1c94221b},
			{"C7", []byte("abcdefg"), 0xeb595499},
			{"C8", []byte{1, 2, 3}, 0x7f8379a9},
			{"C9 empty", []byte{}, 0x106e08d9},
			{"C9 nil hashes like empty", nil, 0x106e08d9},
			{"C10 zero guid", make([]byte, 16), 0x94f76688},
			{"C11 guid", mustHex(t, "e004253f894fd3119a0c0305e82c3301"), 0x3327e9dd},
			{"C12 guid", mustHex(t, "3dd6b2d933a22341847a76838bf2413a"), 0xab63fe8c},
			{"C13 guid", mustHex(t, "33221100554477668899aabbccddeeff"), 0x299e0f40},
			{"C11 in RFC order", mustHex(t, "3f2504e04f8911d39a0c0305e82c3301"), 0xb9e2bc48},
		} {
			if got := murmur2.Sum32(c.key); got != c.want {
				t.Errorf("%s: murmur2.Sum32(%q) = %#08x, want %#08x", c.name, c.key, got, c.want)
			}
			if got := murmur2Reference(c.key); got != c.want {
				t.Errorf("%s: reference implementation disagrees with the vector: %#08x", c.name, got)
			}
		}
	})

	t.Run("Partition_ClearsTheSignBitInsteadOfAbs", func(t *testing.T) {
		t.Parallel()
		// 0xa87c3114 has the sign bit set: as int32 it is -1468256492, whose
		// absolute value mod 10 is 2, while the masked value mod 10 is 8 (R1).
		if got := murmur2.Partition([]byte("user-123"), 10); got != 8 {
			t.Fatalf("murmur2.Partition(user-123, 10) = %d, want 8", got)
		}
	})

	t.Run("Partition_PanicsBelowOneSlot", func(t *testing.T) {
		t.Parallel()
		for _, n := range []int{0, -1} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("murmur2.Partition(_, %d) did not panic", n)
					}
				}()
				murmur2.Partition([]byte("k"), n)
			}()
		}
	})
}

func FuzzMurmur2(f *testing.F) {
	for _, s := range []string{"", "a", "ab", "abc", "abcd", "abcdefg", "user-123"} {
		f.Add([]byte(s), 8)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x80}, 1)
	f.Add([]byte("x"), 1<<40)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		h := murmur2.Sum32(data)
		if h != murmur2.Sum32(data) {
			t.Fatal("Murmur2 is not deterministic")
		}
		ref := murmur2Reference(data)
		if h != ref {
			t.Fatalf("murmur2.Sum32(%x) = %#08x, reference %#08x", data, h, ref)
		}
		if n < 1 {
			return
		}
		p := murmur2.Partition(data, n)
		if p < 0 || p >= n {
			t.Fatalf("murmur2.Partition(%x, %d) = %d, out of range", data, n, p)
		}
		if n == 1 && p != 0 {
			t.Fatalf("murmur2.Partition(_, 1) = %d", p)
		}
		if want := int(uint64(ref&0x7fffffff) % uint64(n)); p != want {
			t.Fatalf("murmur2.Partition(%x, %d) = %d, want %d", data, n, p, want)
		}
	})
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
