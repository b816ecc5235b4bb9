package outboxkafka

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

func TestFlusherHandOver(t *testing.T) {
	// A refusal that comes back while a hand-over is still producing its
	// records fails the key's later records of that hand-over too, so none
	// is appended ahead of the refused record's retry. The client sends
	// outside the publisher's Flush in two ways (see flusher): its sink's
	// drain makes one more pass after a Flush returns, and a topic's first
	// records are partitioned one at a time as its metadata arrives; either
	// can send a key's first record of a hand-over alone and have it
	// refused before its later ones are in. A Flush called from the
	// client's buffered hook makes that happen on cue: it sends what is
	// handed over so far and returns once the refusal is in.
	for _, tc := range []struct {
		name string
		// sendsAt is the index of the record whose hand-over sends the
		// records before it; the key's records are the first and the last.
		sendsAt int
		values  []string
		parts   []int32
	}{
		// The refusal comes back inside the later record's own Produce.
		{"RefusalDuringTheKeysNextRecord", 1, []string{"first", "second"}, []int32{0, 0}},
		// The refusal is in before the key's next record is produced.
		{"RefusalBeforeTheKeysNextRecord", 1, []string{"first", "other", "second"}, []int32{0, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, kfake.SeedTopics(2, "orders"))
			hook := &sendMidHandOver{at: tc.values[tc.sendsAt]}
			p := newPublisher(t, c, func(cfg *Config) { cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.WithHooks(hook)) })
			hook.cl.Store(p.cl)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Both partitions' metadata is loaded, so the records go
			// straight to their partitions.
			warm := []outbox.Message{
				message(t, 1, "orders", []byte("w"), []byte("warm"), nil, ptr(int32(0))),
				message(t, 2, "orders", []byte("w"), []byte("warm"), nil, ptr(int32(1))),
			}
			if res := p.PublishDetailed(ctx, warm); res.Err != nil {
				t.Fatalf("warm-up: %v", res.Err)
			}
			fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "orders", Partitions: []int32{0}, Err: kerr.InvalidRecord})
			var msgs []outbox.Message
			for i, v := range tc.values {
				msgs = append(msgs, message(t, int64(i+3), "orders", []byte("k"+string(rune('0'+tc.parts[i]))), []byte(v), nil, ptr(tc.parts[i])))
			}
			hook.armed.Store(true)
			res := p.PublishDetailed(ctx, msgs)
			if !hook.sent.Load() {
				t.Fatal("the hook sent nothing during the hand-over")
			}
			if res.Acked != 0 || !errors.Is(res.Err, kerr.InvalidRecord) {
				t.Fatalf("acked %d, error %v; want 0 and %v", res.Acked, res.Err, kerr.InvalidRecord)
			}
			if h := fault.Hits(); h != 1 {
				t.Fatalf("the fault answered %d requests, want 1", h)
			}
			if got := endOffsets(t, c.ListenAddrs(), "orders", 2); got[0] != 1 {
				t.Fatalf("partition 0 holds %d records after the refused publish, want only the warm-up: the key's later record overtook the refused one", got[0])
			}
			if res := p.PublishDetailed(ctx, msgs); res.Acked != len(msgs) || res.Err != nil {
				t.Fatalf("retry: acked %d, error %v; want %d, nil", res.Acked, res.Err, len(msgs))
			}
			var got []string
			for _, r := range consume(t, c.ListenAddrs(), "orders", len(warm)+len(msgs)) {
				if r.Partition == 0 && string(r.Value) != "warm" {
					got = append(got, string(r.Value))
				}
			}
			if want := "first,second"; strings.Join(got, ",") != want {
				t.Fatalf("partition 0 holds %v, want %s", got, want)
			}
		})
	}
}

// sendMidHandOver flushes the client once, from the buffered hook of the
// record whose value is at, while the publisher is still handing over: the
// records before it go out alone.
type sendMidHandOver struct {
	at    string
	cl    atomic.Pointer[kgo.Client]
	armed atomic.Bool
	sent  atomic.Bool
}

func (h *sendMidHandOver) OnProduceRecordBuffered(r *kgo.Record) {
	if string(r.Value) != h.at || !h.armed.CompareAndSwap(true, false) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.cl.Load().Flush(ctx); err == nil {
		h.sent.Store(true)
	}
}
