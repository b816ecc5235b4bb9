package outbox

import (
	"errors"
	"testing"
	"time"
)

func TestMessage(t *testing.T) {
	t.Parallel()
	t.Run("NewMessage_RequiresATopic", func(t *testing.T) {
		t.Parallel()
		if _, err := NewMessage("", []byte("k"), []byte("v"), MessageOptions{}); !errors.Is(err, ErrInvalidMessage) {
			t.Fatalf("empty topic: err = %v, want ErrInvalidMessage", err)
		}
	})

	t.Run("NewMessage_KeepsNilAndEmptyApart", func(t *testing.T) {
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
	})

	t.Run("NewMessage_AliasesKeyAndValue", func(t *testing.T) {
		t.Parallel()
		key, value := []byte("key"), []byte("value")
		m, err := NewMessage("orders", key, value, MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if &m.Key[0] != &key[0] || &m.Value[0] != &value[0] {
			t.Fatal("NewMessage copied key or value; the documented contract is aliasing")
		}
	})

	t.Run("NewMessage_Defaults", func(t *testing.T) {
		t.Parallel()
		m, err := NewMessage("orders", nil, []byte("v"), MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.ID.IsZero() || m.ID[6]>>4 != 4 {
			t.Errorf("default id %s is not a random v4 id", m.ID)
		}
		// The writer places the message and stamps the time it enqueues it.
		if !m.CreatedAt.IsZero() || m.Bucket() != 0 || m.Sequence() != 0 {
			t.Errorf("CreatedAt %v, bucket %d, sequence %d before any writer; want all zero", m.CreatedAt, m.Bucket(), m.Sequence())
		}
		if m.Headers != nil || m.Partition != nil {
			t.Errorf("unexpected headers %x, partition %v", m.Headers, m.Partition)
		}
		if m.Topic != "orders" {
			t.Errorf("topic %q", m.Topic)
		}
		// Two defaults never share an id.
		m2, _ := NewMessage("orders", nil, nil, MessageOptions{})
		if m2.ID == m.ID {
			t.Error("two messages got the same random id")
		}
	})

	t.Run("NewMessage_UsesGivenIDAndTime", func(t *testing.T) {
		t.Parallel()
		id := mustParseID(t, "3f2504e0-4f89-11d3-9a0c-0305e82c3301")
		at := time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)
		m, err := NewMessage("orders", nil, nil, MessageOptions{ID: id, CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != id || !m.CreatedAt.Equal(at) {
			t.Fatalf("id %s at %v, want %s at %v", m.ID, m.CreatedAt, id, at)
		}
	})

	t.Run("Stored_PlacesACopy", func(t *testing.T) {
		t.Parallel()
		m, err := NewMessage("orders", []byte("k"), []byte("v"), MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := Stored(m, 5, 42)
		if s.Bucket() != 5 || s.Sequence() != 42 || s.ID != m.ID || string(s.Key) != "k" {
			t.Fatalf("stored %+v, want message %s at bucket 5, sequence 42", s, m.ID)
		}
		if m.Bucket() != 0 || m.Sequence() != 0 {
			t.Fatalf("the original moved to bucket %d, sequence %d", m.Bucket(), m.Sequence())
		}
	})

	t.Run("NewMessage_CopiesThePartition", func(t *testing.T) {
		t.Parallel()
		p := int32(5)
		m, err := NewMessage("orders", []byte("k"), nil, MessageOptions{Partition: &p})
		if err != nil {
			t.Fatal(err)
		}
		p = 6
		if m.Partition == nil || *m.Partition != 5 {
			t.Fatalf("partition %v after the caller changed its variable", m.Partition)
		}
	})

	t.Run("NewMessage_EncodesHeaders", func(t *testing.T) {
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
	})

	t.Run("NewMessage_Errors", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name string
			opts MessageOptions
		}{
			{"negative partition", MessageOptions{Partition: ptr32(-1)}},
		} {
			m, err := NewMessage("orders", []byte("k"), nil, c.opts)
			if !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("%s: NewMessage = %+v, %v; want ErrInvalidMessage", c.name, m, err)
			}
		}
	})
}
