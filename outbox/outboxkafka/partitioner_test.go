package outboxkafka

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

type bucketVector struct {
	KeyHex      *string `json:"keyHex"`
	BucketCount int     `json:"bucketCount"`
	Bucket      int     `json:"bucket"`
}

// keyedVectors loads the keyed rows of the repository's bucket golden
// vectors: for a key, the bucket over n buckets equals the Kafka partition
// over n partitions, because both are murmur2 positive-mod.
func keyedVectors(t *testing.T) []bucketVector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "bucket-vectors.json"))
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var all []bucketVector
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatalf("parse vectors: %v", err)
	}
	var keyed []bucketVector
	for _, v := range all {
		if v.KeyHex != nil {
			keyed = append(keyed, v)
		}
	}
	if len(keyed) < 100 {
		t.Fatalf("only %d keyed vectors; the file changed shape", len(keyed))
	}
	return keyed
}

func TestPartitioner(t *testing.T) {
	t.Parallel()
	t.Run("KeyedMatchesGoldenVectors", func(t *testing.T) {
		t.Parallel()
		// franz-go's StickyKeyPartitioner(nil) is documented to place keys
		// exactly as Kafka's Java client does; it is the independent check for
		// non-empty keys.
		java := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		ours := newPartitioner().ForTopic("t")
		var empty int
		for _, v := range keyedVectors(t) {
			key, err := hex.DecodeString(*v.KeyHex)
			if err != nil {
				t.Fatalf("key %q: %v", *v.KeyHex, err)
			}
			if len(key) == 0 {
				key = []byte{} // an empty keyHex is an empty, non-nil key
				empty++
			}
			r := &kgo.Record{Key: key}
			if !ours.RequiresConsistency(r) {
				t.Errorf("key %q: keyed record does not require consistency", *v.KeyHex)
			}
			if got := ours.Partition(r, v.BucketCount); got != v.Bucket {
				t.Errorf("key %q over %d partitions: got %d, want %d", *v.KeyHex, v.BucketCount, got, v.Bucket)
			}
			if want := java.Partition(r, v.BucketCount); ours.Partition(r, v.BucketCount) != want {
				t.Errorf("key %q over %d partitions: differs from the Java-compatible placement %d", *v.KeyHex, v.BucketCount, want)
			}
		}
		if empty == 0 {
			t.Fatal("the vectors hold no empty key")
		}
	})

	t.Run("FactsVectors", func(t *testing.T) {
		t.Parallel()
		// Facts §2.3 R1–R5 (Java compatibility) and C9 (the empty key).
		cases := []struct {
			key  []byte
			n    int
			want int
		}{
			{[]byte("user-123"), 10, 8},
			{[]byte("order-123"), 12, 1},
			{[]byte("tenant-a"), 50, 29},
			{[]byte("a"), 6, 4},
			{[]byte("kafka"), 100, 80},
			{[]byte{}, 3, 0},
			{[]byte{}, 4, 1},
			{[]byte{}, 16, 9},
			{[]byte{}, 32, 25},
			{[]byte("anything"), 1, 0},
		}
		tp := newPartitioner().ForTopic("t")
		for _, c := range cases {
			if got := tp.Partition(&kgo.Record{Key: c.key}, c.n); got != c.want {
				t.Errorf("key %q over %d partitions: got %d, want %d", c.key, c.n, got, c.want)
			}
		}
	})

	t.Run("ExplicitPartitionWins", func(t *testing.T) {
		t.Parallel()
		tp := newPartitioner().ForTopic("t")
		// user-123 hashes to 8 of 10; the explicit partition must win over it,
		// and over the sticky choice for a nil key.
		for _, key := range [][]byte{[]byte("user-123"), {}, nil} {
			r := &kgo.Record{Key: key, Context: withExplicitPartition(context.Background(), 3)}
			if !tp.RequiresConsistency(r) {
				t.Errorf("key %q: explicit partition does not require consistency", key)
			}
			if got := tp.Partition(r, 10); got != 3 {
				t.Errorf("key %q: got partition %d, want the explicit 3", key, got)
			}
		}
		// A context without the value is not explicit.
		r := &kgo.Record{Key: []byte("user-123"), Context: context.Background()}
		if got := tp.Partition(r, 10); got != 8 {
			t.Errorf("plain context: got %d, want the hashed 8", got)
		}
	})

	t.Run("NilKeyIsStickyAndMovesOnNewBatch", func(t *testing.T) {
		t.Parallel()
		tp := newPartitioner().ForTopic("t")
		r := &kgo.Record{}
		if tp.RequiresConsistency(r) {
			t.Fatal("a nil key must not pin a partition: it may go to any available one")
		}
		nb, ok := tp.(kgo.TopicPartitionerOnNewBatch)
		if !ok {
			t.Fatal("the topic partitioner does not implement OnNewBatch; keyless records would never move")
		}
		const n = 8
		seen := map[int]bool{}
		prev := -1
		for range 50 {
			first := tp.Partition(r, n)
			if again := tp.Partition(r, n); again != first {
				t.Fatalf("within one batch the partition moved from %d to %d", first, again)
			}
			if first < 0 || first >= n {
				t.Fatalf("partition %d out of [0,%d)", first, n)
			}
			if first == prev {
				t.Fatalf("a new batch stayed on partition %d", first)
			}
			seen[first] = true
			prev = first
			nb.OnNewBatch()
		}
		if len(seen) < 3 {
			t.Fatalf("50 batches used only partitions %v", seen)
		}
	})
}
