package outbox

import (
	"slices"
	"testing"
	"time"
)

func seqs(ms []Message) []int64 {
	out := make([]int64, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Sequence())
	}
	return out
}

func TestParkedBook(t *testing.T) {
	// A key's marked messages replay only as a prefix of its parked ones;
	// keyless ones always; a published replay leaves its key's sequences.
	t.Run("ReplayableIsEachKeysMarkedPrefix", func(t *testing.T) {
		b := newParkedBook()
		msg := func(seq int64, key string) Message {
			m := Stored(Message{}, 0, seq)
			if key != "" {
				m.Key = []byte(key)
			}
			return m
		}
		pb := b.install(3, ParkedSet{
			Keys:    map[string][]int64{"a": {1, 4, 6}, "b": {2, 5}},
			Replays: []Message{msg(1, "a"), msg(2, "b"), msg(3, ""), msg(6, "a")},
		}, 7)
		if got := seqs(b.replayable(pb)); !slices.Equal(got, []int64{1, 2, 3}) {
			t.Fatalf("replayable %v, want [1 2 3]: a's 6 waits behind its unmarked 4", got)
		}
		if got := b.behind(3, []byte("a")); got != 6 {
			t.Fatalf("a parks behind %d, want 6", got)
		}
		b.dropReplays(pb, []Message{msg(1, "a"), msg(2, "b")}, true)
		if got := seqs(b.marked(pb)); !slices.Equal(got, []int64{3, 6}) {
			t.Fatalf("marked after the replay %v, want [3 6]", got)
		}
		if got := b.behind(3, []byte("b")); got != 5 {
			t.Fatalf("b parks behind %d, want 5 (its 2 was replayed)", got)
		}
		if later := seqs(b.withLaterOfKey(pb, msg(4, "a"))); !slices.Equal(later, []int64{4, 6}) {
			t.Fatalf("a refused replay of 4 takes %v along, want [4 6]", later)
		}
		if b.behind(3, nil) != 0 || b.behind(9, []byte("a")) != 0 {
			t.Fatal("a keyless message or an unread bucket parks behind something")
		}
	})

	// The book forgets what it cannot vouch for: buckets not kept or newly
	// claimed, and buckets read under another replay request.
	t.Run("ForgetsWhatMayHaveChanged", func(t *testing.T) {
		t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		b := newParkedBook()
		for bucket := range 4 {
			b.install(bucket, ParkedSet{}, 0)
		}
		b.retain([]int{0, 1, 2}, []int{2})
		for bucket, want := range []bool{true, true, false, false} {
			if _, _, ok := b.lookup(bucket); ok != want {
				t.Errorf("bucket %d known %v after retain, want %v", bucket, ok, want)
			}
		}
		if !b.requestsDue(t0, 10*time.Second, false) {
			t.Fatal("never read, yet not due")
		}
		b.setRequests(map[int]int64{1: 5}, t0)
		if _, req, ok := b.lookup(1); ok || req != 5 {
			t.Fatalf("bucket 1 read under no request: known %v, request %d; want forgotten, request 5", ok, req)
		}
		if _, _, ok := b.lookup(0); !ok {
			t.Fatal("bucket 0 has no new request, yet was forgotten")
		}
		if b.requestsDue(t0.Add(9*time.Second), 10*time.Second, false) || !b.requestsDue(t0.Add(10*time.Second), 10*time.Second, false) ||
			!b.requestsDue(t0, 10*time.Second, true) {
			t.Fatal("requests due at the wrong times")
		}
		if got := b.requested([]int{0, 1, 2}); !slices.Equal(got, []int{1}) {
			t.Fatalf("requested %v, want [1]", got)
		}
		pb := b.install(1, ParkedSet{}, 5)
		b.requestDone(1, pb, 5)
		if b.request(pb) != 0 || len(b.requested([]int{1})) != 0 {
			t.Fatal("a withdrawn request is still seen")
		}
	})
}
