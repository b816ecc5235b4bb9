package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spillway-dev/spillway/outbox/internal/murmur2"
)

func ptr32(p int32) *int32 { return &p }

func TestBucket(t *testing.T) {
	t.Parallel()
	// ComputeBucket_GoldenVectors pins bucket placement: every vector of
	// facts §2.3 and every row of testdata/bucket-vectors.json.
	//
	// DO NOT "fix" these numbers to match a changed implementation. Writers in
	// every language place a message by this function, and the bucket decides
	// which relay publishes it and in what order. If this test trips, the
	// messages of a key change bucket for existing deployments: messages already
	// stored under the old bucket and new ones under the new bucket drain
	// independently, and the key loses its order.
	t.Run("ComputeBucket_GoldenVectors", func(t *testing.T) {
		t.Parallel()
		var anyID = mustParseID(t, "d9b2d63d-a233-4123-847a-76838bf2413a")
		type vector struct {
			name      string
			key       []byte
			id        MessageID
			n         int
			partition *int32
			want      int
		}
		vectors := []vector{
			{"R1", []byte("user-123"), anyID, 10, nil, 8},
			{"R2", []byte("order-123"), anyID, 12, nil, 1},
			{"R3", []byte("tenant-a"), anyID, 50, nil, 29},
			{"R4", []byte("a"), anyID, 6, nil, 4},
			{"R5", []byte("kafka"), anyID, 100, nil, 80},
			{"R6 partition 5 with a key", []byte("user-123"), anyID, 8, ptr32(5), 5},
			{"R6 partition 5 keyless", nil, anyID, 8, ptr32(5), 5},
			{"R7 partition 13 keyless", nil, anyID, 8, ptr32(13), 5},
			{"R8 partition 2 keyless", nil, anyID, 4, ptr32(2), 2},
			{"C1", []byte("stable-key"), anyID, 8, nil, 1},
			{"C2", []byte("order-12345"), anyID, 8, nil, 1},
			{"C3 n=4", []byte("order-1"), anyID, 4, nil, 2},
			{"C3 n=8", []byte("order-1"), anyID, 8, nil, 6},
			{"C4", []byte("some-key"), anyID, 8, nil, 6},
			{"C5", []byte("user-123"), anyID, 8, nil, 4},
			{"C6", []byte("abc"), anyID, 8, nil, 3},
			{"C7", []byte("abcdefg"), anyID, 16, nil, 9},
			{"C8", []byte{1, 2, 3}, anyID, 8, nil, 1},
			{"C14 key, n=1", []byte("user-123"), anyID, 1, nil, 0},
			{"C14 keyless, n=1", nil, anyID, 1, nil, 0},
			{"C14 partition, n=1", nil, anyID, 1, ptr32(7), 0},
			{"C15 partition 7, n=3", []byte("k"), anyID, 3, ptr32(7), 1},
		}
		for n, want := range map[int]int{1: 0, 4: 1, 8: 1, 16: 9, 32: 25} {
			vectors = append(vectors, vector{fmt.Sprintf("C9 empty key n=%d", n), []byte{}, anyID, n, nil, want})
		}
		keyless := []struct {
			name  string
			id    string
			wants map[int]int
		}{
			{"C10", "00000000-0000-0000-0000-000000000000", map[int]int{4: 0, 8: 0, 16: 8}},
			{"C11", "3f2504e0-4f89-11d3-9a0c-0305e82c3301", map[int]int{4: 1, 8: 5, 16: 13}},
			{"C12", "d9b2d63d-a233-4123-847a-76838bf2413a", map[int]int{8: 4, 16: 12}},
			{"C13", "00112233-4455-6677-8899-aabbccddeeff", map[int]int{4: 0, 8: 0, 16: 0}},
		}
		for _, k := range keyless {
			for n, want := range k.wants {
				vectors = append(vectors, vector{fmt.Sprintf("%s keyless n=%d", k.name, n), nil, mustParseID(t, k.id), n, nil, want})
			}
		}
		for _, v := range vectors {
			got, err := ComputeBucket(v.key, v.id, v.n, v.partition)
			if err != nil || got != v.want {
				t.Errorf("%s: ComputeBucket = %d, %v; want %d", v.name, got, err, v.want)
			}
		}

		for _, row := range loadBucketVectors(t) {
			var (
				key       []byte
				id        MessageID
				partition *int32
				name      string
			)
			switch {
			case row.KeyHex != nil:
				key = mustHex(t, *row.KeyHex) // "" decodes to an empty, non-nil key
				name = fmt.Sprintf("key %s n=%d", *row.KeyHex, row.BucketCount)
				if got := murmur2.Sum32(key); got != *row.Murmur2 {
					t.Errorf("%s: Murmur2 = %d, want %d", name, got, *row.Murmur2)
				}
			case row.MessageID != nil:
				id = mustParseID(t, *row.MessageID)
				name = fmt.Sprintf("keyless %s n=%d", *row.MessageID, row.BucketCount)
				if g := id.GUIDBytes(); fmt.Sprintf("%x", g) != *row.HashedBytesHex {
					t.Errorf("%s: GUIDBytes = %x, want %s", name, g, *row.HashedBytesHex)
				}
			case row.Partition != nil:
				partition = row.Partition
				name = fmt.Sprintf("partition %d n=%d", *row.Partition, row.BucketCount)
			default:
				t.Fatalf("bucket vector row with neither key, message id nor partition: %+v", row)
			}
			got, err := ComputeBucket(key, id, row.BucketCount, partition)
			if err != nil || got != row.Bucket {
				t.Errorf("%s: ComputeBucket = %d, %v; want %d", name, got, err, row.Bucket)
			}
		}
	})

	// ComputeBucket_RFCByteOrderGivesTheWrongBucket shows the pitfall the
	// GUID byte order guards against (facts §2.3 negative vectors): hashing the
	// id's RFC bytes instead of its .NET bytes lands keyless messages in other
	// buckets than .NET writers use.
	t.Run("ComputeBucket_RFCByteOrderGivesTheWrongBucket", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			id           string
			rfcBucket    int
			dotnetBucket int
		}{
			{"3f2504e0-4f89-11d3-9a0c-0305e82c3301", 0, 5},
			{"d9b2d63d-a233-4123-847a-76838bf2413a", 1, 4},
		} {
			id := mustParseID(t, c.id)
			if got := murmur2.Partition(id[:], 8); got != c.rfcBucket {
				t.Errorf("%s: RFC-order bucket = %d, want the (wrong) %d", c.id, got, c.rfcBucket)
			}
			got, err := ComputeBucket(nil, id, 8, nil)
			if err != nil || got != c.dotnetBucket {
				t.Errorf("%s: ComputeBucket = %d, %v; want %d", c.id, got, err, c.dotnetBucket)
			}
			if got == c.rfcBucket {
				t.Errorf("%s: ComputeBucket hashed the RFC byte order", c.id)
			}
		}
		if got := murmur2.Sum32(mustHex(t, "3f2504e04f8911d39a0c0305e82c3301")); got != 0xb9e2bc48 {
			t.Errorf("Murmur2 of C11 in RFC order = %#08x, want 0xb9e2bc48", got)
		}
	})

	t.Run("ComputeBucket_SameKeyIgnoresMessageID", func(t *testing.T) {
		t.Parallel()
		for _, key := range [][]byte{[]byte("order-1"), {}} {
			first, err := ComputeBucket(key, NewMessageID(), 16, nil)
			if err != nil {
				t.Fatal(err)
			}
			for range 50 {
				b, err := ComputeBucket(key, NewMessageID(), 16, nil)
				if err != nil || b != first {
					t.Fatalf("key %q: bucket %d, %v with another id, first %d", key, b, err, first)
				}
			}
		}
	})

	t.Run("ComputeBucket_KeylessSpreadsByMessageID", func(t *testing.T) {
		t.Parallel()
		seen := make(map[int]int)
		for range 400 {
			id := NewMessageID()
			b, err := ComputeBucket(nil, id, 8, nil)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := ComputeBucket(nil, id, 8, nil)
			if again != b {
				t.Fatalf("keyless bucket of %s is not deterministic: %d then %d", id, b, again)
			}
			seen[b]++
		}
		// 400 random ids over 8 buckets: every bucket is hit (a miss has
		// probability below 8 * (7/8)^400, about 1e-22).
		if len(seen) != 8 {
			t.Fatalf("keyless messages reached only buckets %v", seen)
		}
	})

	t.Run("ComputeBucket_AllResultsWithinRange", func(t *testing.T) {
		t.Parallel()
		for i := range 1000 {
			key := []byte(fmt.Sprintf("key-%d", i))
			b, err := ComputeBucket(key, MessageID{}, 7, nil)
			if err != nil || b < 0 || b > 6 {
				t.Fatalf("ComputeBucket(%q, n=7) = %d, %v", key, b, err)
			}
		}
	})

	t.Run("ComputeBucket_Errors", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name      string
			n         int
			partition *int32
		}{
			{"zero buckets", 0, nil},
			{"negative buckets", -3, nil},
			{"zero buckets with partition", 0, ptr32(1)},
			{"negative partition", 8, ptr32(-1)},
			{"min partition", 8, ptr32(-1 << 31)},
		} {
			b, err := ComputeBucket([]byte("k"), MessageID{}, c.n, c.partition)
			if !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("%s: ComputeBucket = %d, %v; want ErrInvalidMessage", c.name, b, err)
			}
		}
	})
}

func FuzzBucket(f *testing.F) {
	f.Add([]byte("user-123"), false, []byte("0123456789abcdef"), 8, false, int32(0))
	f.Add([]byte{}, false, []byte{}, 1, false, int32(0))
	f.Add([]byte(nil), true, []byte("0123456789abcdef"), 16, false, int32(0))
	f.Add([]byte(nil), true, []byte{}, 8, true, int32(13))
	f.Add([]byte("k"), false, []byte{}, 3, true, int32(-1))
	f.Fuzz(func(t *testing.T, key []byte, keyless bool, idBytes []byte, n int, hasPartition bool, p int32) {
		if keyless {
			key = nil
		} else if key == nil {
			key = []byte{}
		}
		var id MessageID
		copy(id[:], idBytes)
		var partition *int32
		if hasPartition {
			partition = &p
		}
		got, err := ComputeBucket(key, id, n, partition)
		wantErr := n < 1 || (hasPartition && p < 0)
		if wantErr {
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("ComputeBucket(n=%d, partition=%v) = %d, %v; want ErrInvalidMessage", n, partition, got, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("ComputeBucket: %v", err)
		}
		if got < 0 || got >= n {
			t.Fatalf("bucket %d outside [0, %d)", got, n)
		}
		if n == 1 && got != 0 {
			t.Fatalf("n=1 gave bucket %d", got)
		}
		if again, _ := ComputeBucket(key, id, n, partition); again != got {
			t.Fatalf("not deterministic: %d then %d", got, again)
		}
		switch {
		case hasPartition:
			if want := int(p) % n; got != want {
				t.Fatalf("partition %d, n=%d: bucket %d, want %d", p, n, got, want)
			}
		case !keyless:
			// A key decides alone: another id must not move it.
			other := id
			other[0] ^= 0xff
			if b, _ := ComputeBucket(key, other, n, nil); b != got {
				t.Fatalf("keyed bucket moved with the message id: %d then %d", got, b)
			}
		default:
			g := id.GUIDBytes()
			if want := murmur2.Partition(g[:], n); got != want {
				t.Fatalf("keyless bucket %d, want the hash of the GUID bytes %d", got, want)
			}
		}
	})
}

type bucketVector struct {
	KeyHex         *string `json:"keyHex"`
	Murmur2        *uint32 `json:"murmur2"`
	MessageID      *string `json:"messageId"`
	HashedBytesHex *string `json:"hashedBytesHex"`
	Partition      *int32  `json:"partition"`
	BucketCount    int     `json:"bucketCount"`
	Bucket         int     `json:"bucket"`
}

func loadBucketVectors(t testing.TB) []bucketVector {
	t.Helper()
	var rows []bucketVector
	loadJSON(t, "bucket-vectors.json", &rows)
	if len(rows) != 330 {
		t.Fatalf("bucket-vectors.json has %d rows, want 330", len(rows))
	}
	return rows
}

// loadJSON reads a golden file from the repository's testdata directory.
func loadJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
