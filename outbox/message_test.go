package outbox

import (
	"errors"
	"testing"
	"time"
)

func TestNewMessage_RequiresATopic(t *testing.T) {
	t.Parallel()
	if _, err := NewMessage("", []byte("k"), []byte("v"), MessageOptions{}); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("empty topic: err = %v, want ErrInvalidMessage", err)
	}
}

func TestNewMessage_KeepsNilAndEmptyApart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		key, value []byte
	}{
		{"keyless tombstone", nil, nil},
		{"empty key, empty value", []byte{}, []byte{}},
		{"keyless, empty value", nil, []byte{}},
		{"empty key tombstone", []byte{}, nil},
		{"key and value", []byte("k"), []byte("v")},
	} {
		m, err := NewMessage("orders", c.key, c.value, MessageOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (m.Key == nil) != (c.key == nil) || string(m.Key) != string(c.key) {
			t.Errorf("%s: key %#v, want %#v", c.name, m.Key, c.key)
		}
		if (m.Value == nil) != (c.value == nil) || string(m.Value) != string(c.value) {
			t.Errorf("%s: value %#v, want %#v", c.name, m.Value, c.value)
		}
	}
}

func TestNewMessage_AliasesKeyAndValue(t *testing.T) {
	t.Parallel()
	key, value := []byte("key"), []byte("value")
	m, err := NewMessage("orders", key, value, MessageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if &m.Key[0] != &key[0] || &m.Value[0] != &value[0] {
		t.Fatal("NewMessage copied key or value; the documented contract is aliasing")
	}
}

func TestNewMessage_Defaults(t *testing.T) {
	t.Parallel()
	before := time.Now().UTC()
	m, err := NewMessage("orders", nil, []byte("v"), MessageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UTC()
	if m.ID.IsZero() || m.ID[6]>>4 != 4 {
		t.Errorf("default id %s is not a random v4 id", m.ID)
	}
	if m.CreatedAt.Before(before) || m.CreatedAt.After(after) || m.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt %v not the UTC now between %v and %v", m.CreatedAt, before, after)
	}
	if m.Bucket < 0 || m.Bucket >= DefaultBucketCount {
		t.Errorf("bucket %d outside the default %d buckets", m.Bucket, DefaultBucketCount)
	}
	g := m.ID.GUIDBytes()
	if want := Murmur2Partition(g[:], DefaultBucketCount); m.Bucket != want {
		t.Errorf("keyless bucket %d, want %d (hash of the id over 8 buckets)", m.Bucket, want)
	}
	if m.Headers != nil || m.Partition != nil || m.Sequence != 0 {
		t.Errorf("unexpected headers %x, partition %v, sequence %d", m.Headers, m.Partition, m.Sequence)
	}
	if m.Topic != "orders" {
		t.Errorf("topic %q", m.Topic)
	}
	// Two defaults never share an id.
	m2, _ := NewMessage("orders", nil, nil, MessageOptions{})
	if m2.ID == m.ID {
		t.Error("two messages got the same random id")
	}
}

func TestNewMessage_UsesGivenIDAndTime(t *testing.T) {
	t.Parallel()
	id := mustParseID(t, "3f2504e0-4f89-11d3-9a0c-0305e82c3301")
	at := time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)
	m, err := NewMessage("orders", nil, nil, MessageOptions{ID: id, CreatedAt: at, BucketCount: 16})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != id || !m.CreatedAt.Equal(at) {
		t.Fatalf("id %s at %v, want %s at %v", m.ID, m.CreatedAt, id, at)
	}
	if m.Bucket != 13 { // facts §2.3 C11, n=16
		t.Fatalf("bucket %d, want 13", m.Bucket)
	}
}

func TestNewMessage_ComputesTheBucketWithBucketCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		key       []byte
		n         int
		partition *int32
		want      int
	}{
		{"R1 key, 10 buckets", []byte("user-123"), 10, nil, 8},
		{"C5 key, default 8 buckets", []byte("user-123"), 0, nil, 4},
		{"C9 empty key, 16 buckets", []byte{}, 16, nil, 9},
		{"R8 partition 2, keyless, 4 buckets", nil, 4, ptr32(2), 2},
		{"R7 partition 13, default 8 buckets", nil, 0, ptr32(13), 5},
		{"one bucket", []byte("user-123"), 1, nil, 0},
	} {
		m, err := NewMessage("orders", c.key, []byte("v"), MessageOptions{BucketCount: c.n, Partition: c.partition})
		if err != nil || m.Bucket != c.want {
			t.Errorf("%s: bucket %d, %v; want %d", c.name, m.Bucket, err, c.want)
		}
	}
}

func TestNewMessage_CopiesThePartition(t *testing.T) {
	t.Parallel()
	p := int32(5)
	m, err := NewMessage("orders", []byte("k"), nil, MessageOptions{Partition: &p})
	if err != nil {
		t.Fatal(err)
	}
	p = 6
	if m.Partition == nil || *m.Partition != 5 || m.Bucket != 5 {
		t.Fatalf("partition %v bucket %d after the caller changed its variable", m.Partition, m.Bucket)
	}
}

func TestNewMessage_EncodesHeaders(t *testing.T) {
	t.Parallel()
	hs := []Header{{"trace", []byte("abc")}}
	m, err := NewMessage("orders", nil, nil, MessageOptions{Headers: hs})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(m.Headers), string(mustHex(t, "010100000005000000747261636503000000616263")); got != want {
		t.Fatalf("headers blob %x, want %x", got, want)
	}
	m, err = NewMessage("orders", nil, nil, MessageOptions{Headers: []Header{}})
	if err != nil || m.Headers != nil {
		t.Fatalf("empty header list gave blob %x, %v; want none", m.Headers, err)
	}
}

func TestNewMessage_Errors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts MessageOptions
	}{
		{"negative partition", MessageOptions{Partition: ptr32(-1)}},
		{"negative bucket count", MessageOptions{BucketCount: -1}},
	} {
		m, err := NewMessage("orders", []byte("k"), nil, c.opts)
		if !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: NewMessage = %+v, %v; want ErrInvalidMessage", c.name, m, err)
		}
	}
}
