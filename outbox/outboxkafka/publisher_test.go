package outboxkafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

const idHeader = outbox.DefaultMessageIDHeaderName

func TestPublisher(t *testing.T) {
	t.Parallel()
	t.Run("PublishDeliversEveryRowAsStored", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(3, "orders"))
		ackedAt := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		p := newPublisher(t, c, func(cfg *Config) { cfg.Clock = fixedClock{ackedAt} })

		stale := outbox.NewMessageID().String()
		rows := []struct {
			key, value []byte
			headers    []outbox.Header
		}{
			{[]byte("k1"), []byte("v1"), []outbox.Header{{Key: "trace", Value: []byte("abc")}}},
			{nil, nil, nil}, // keyless tombstone, no headers
			{[]byte{}, []byte{}, []outbox.Header{ // empty key and value are real values
				{Key: "dup", Value: []byte("one")},
				{Key: idHeader, Value: []byte(stale)},
				{Key: "null", Value: nil},
				{Key: "empty", Value: []byte{}},
				{Key: idHeader, Value: []byte("also-replaced")},
				{Key: "dup", Value: []byte("two")},
			}},
			{[]byte("k4"), []byte{}, []outbox.Header{{Key: strings.ToUpper(idHeader), Value: []byte("kept: case differs")}}},
			{nil, []byte("v5"), []outbox.Header{{Key: idHeader, Value: []byte(stale)}}},
		}
		// Enqueued long ago: the record timestamp must still be the publish time.
		created := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		var msgs []outbox.Message
		for i, r := range rows {
			m := message(t, int64(i+1), "orders", r.key, r.value, r.headers, nil)
			m.CreatedAt = created
			msgs = append(msgs, m)
		}

		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res := p.PublishDetailed(ctx, msgs)
		if res.Err != nil || res.Acked != len(msgs) {
			t.Fatalf("PublishDetailed = %d, %v; want %d, nil", res.Acked, res.Err, len(msgs))
		}
		if len(res.AckedAt) != len(msgs) {
			t.Fatalf("AckedAt has %d entries", len(res.AckedAt))
		}
		for i, at := range res.AckedAt {
			if !at.Equal(ackedAt) {
				t.Errorf("AckedAt[%d] = %v, want the configured clock's %v", i, at, ackedAt)
			}
		}

		got := byID(t, consume(t, c.ListenAddrs(), "orders", len(msgs)), idHeader)
		for i, m := range msgs {
			r, ok := got[m.ID.String()]
			if !ok {
				t.Fatalf("row %d (%s) not consumed under its id", i, m.ID)
			}
			if (r.Key == nil) != (m.Key == nil) || !bytes.Equal(r.Key, m.Key) {
				t.Errorf("row %d: key %q (nil %v), want %q (nil %v)", i, r.Key, r.Key == nil, m.Key, m.Key == nil)
			}
			if (r.Value == nil) != (m.Value == nil) || !bytes.Equal(r.Value, m.Value) {
				t.Errorf("row %d: value %q (nil %v), want %q (nil %v)", i, r.Value, r.Value == nil, m.Value, m.Value == nil)
			}
			if r.Timestamp.Before(start.Add(-time.Second)) {
				t.Errorf("row %d: timestamp %v is not the publish time", i, r.Timestamp)
			}
			var want []kgo.RecordHeader
			for _, h := range rows[i].headers {
				if h.Key != idHeader {
					want = append(want, kgo.RecordHeader{Key: h.Key, Value: h.Value})
				}
			}
			want = append(want, kgo.RecordHeader{Key: idHeader, Value: []byte(m.ID.String())})
			if !equalHeaders(r.Headers, want) {
				t.Errorf("row %d: headers\n got %s\nwant %s", i, fmtHeaders(r.Headers), fmtHeaders(want))
			}
		}
	})

	t.Run("PublishCustomHeaderName", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		p := newPublisher(t, c, func(cfg *Config) { cfg.MessageIDHeaderName = "dedup-id" })
		m := message(t, 1, "orders", []byte("k"), []byte("v"), []outbox.Header{
			{Key: idHeader, Value: []byte("the writer's own, not ours")},
			{Key: "dedup-id", Value: []byte("stale")},
		}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if n, err := p.Publish(ctx, []outbox.Message{m}); n != 1 || err != nil {
			t.Fatalf("Publish = %d, %v", n, err)
		}
		r := consume(t, c.ListenAddrs(), "orders", 1)[0]
		want := []kgo.RecordHeader{
			{Key: idHeader, Value: []byte("the writer's own, not ours")},
			{Key: "dedup-id", Value: []byte(m.ID.String())},
		}
		if !equalHeaders(r.Headers, want) {
			t.Errorf("headers %s, want %s", fmtHeaders(r.Headers), fmtHeaders(want))
		}
	})

	t.Run("PublishEmptyBatchProducesNothing", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		produces := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Observe: true, Count: -1})
		p := newPublisher(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, batch := range [][]outbox.Message{nil, {}} {
			if n, err := p.Publish(ctx, batch); n != 0 || err != nil {
				t.Fatalf("Publish(%v) = %d, %v", batch, n, err)
			}
		}
		if h := produces.Hits(); h != 0 {
			t.Fatalf("empty batches sent %d produce requests", h)
		}
		// Positive control: the observer does count a real publish.
		if n, err := p.Publish(ctx, []outbox.Message{message(t, 1, "orders", nil, []byte("v"), nil, nil)}); n != 1 || err != nil {
			t.Fatalf("Publish = %d, %v", n, err)
		}
		if h := produces.Hits(); h != 1 {
			t.Fatalf("one publish of one record sent %d produce requests", h)
		}
	})

	t.Run("PublishPlacement", func(t *testing.T) {
		t.Parallel()
		// 10 partitions: user-123 → 8 (facts R1). 4 partitions: the empty key →
		// 1 (facts C9), where a spread or a hash of nothing would rarely agree
		// on every record.
		c := newCluster(t, kfake.SeedTopics(10, "ten"), kfake.SeedTopics(4, "four"))
		p := newPublisher(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		var msgs []outbox.Message
		for i := range 4 {
			msgs = append(msgs,
				message(t, int64(4*i+1), "ten", []byte("user-123"), []byte("v"), nil, nil),
				message(t, int64(4*i+2), "four", []byte{}, []byte("v"), nil, nil),
				message(t, int64(4*i+3), "ten", []byte("user-123"), []byte("v"), nil, ptr(int32(2))),
				message(t, int64(4*i+4), "four", nil, []byte("v"), nil, ptr(int32(3))),
			)
		}
		if n, err := p.Publish(ctx, msgs); n != len(msgs) || err != nil {
			t.Fatalf("Publish = %d, %v", n, err)
		}
		want := map[string]int32{}
		for i, m := range msgs {
			want[m.ID.String()] = []int32{8, 1, 2, 3}[i%4]
		}
		recs := consume(t, c.ListenAddrs(), "ten", 8)
		recs = append(recs, consume(t, c.ListenAddrs(), "four", 8)...)
		for id, r := range byID(t, recs, idHeader) {
			if r.Partition != want[id] {
				t.Errorf("%s/%s key %q: partition %d, want %d", r.Topic, id, r.Key, r.Partition, want[id])
			}
		}
	})

	t.Run("PublishKeylessRecordsSpreadAcrossBatches", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(4, "events"))
		p := newPublisher(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		const batches, per = 6, 3
		for b := range batches {
			var msgs []outbox.Message
			for i := range per {
				msgs = append(msgs, message(t, int64(b*per+i), "events", nil, []byte("v"), nil, nil))
			}
			if n, err := p.Publish(ctx, msgs); n != per || err != nil {
				t.Fatalf("batch %d: Publish = %d, %v", b, n, err)
			}
		}
		parts := map[int32]int{}
		for _, r := range consume(t, c.ListenAddrs(), "events", batches*per) {
			parts[r.Partition]++
		}
		// Sticky placement changes partition with every new batch, so six
		// sequential batches cannot all share one partition.
		if len(parts) < 2 {
			t.Fatalf("keyless records of %d batches all went to %v", batches, parts)
		}
	})

	t.Run("PublishExplicitPartitionOutOfRangeStopsPrefix", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(2, "orders"))
		p := newPublisher(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msgs := []outbox.Message{
			message(t, 1, "orders", []byte("a"), []byte("v"), nil, ptr(int32(0))),
			message(t, 2, "orders", []byte("b"), []byte("v"), nil, ptr(int32(5))),
			message(t, 3, "orders", []byte("c"), []byte("v"), nil, ptr(int32(1))),
		}
		n, err := p.Publish(ctx, msgs)
		if n != 1 || err == nil {
			t.Fatalf("Publish = %d, %v; want 1 and an error", n, err)
		}
		if !strings.Contains(err.Error(), msgs[1].ID.String()) {
			t.Errorf("error does not name the failing message: %v", err)
		}
		if isStop(ctx, err) || errors.Is(err, context.Canceled) {
			t.Errorf("a refused record reads as a stop: %v", err)
		}
	})

	t.Run("PublishRetriesRetriableErrors", func(t *testing.T) {
		t.Parallel()
		for _, code := range []*kerr.Error{kerr.NotLeaderForPartition, kerr.NotEnoughReplicas} {
			t.Run(code.Message, func(t *testing.T) {
				t.Parallel()
				c := newCluster(t, kfake.SeedTopics(1, "orders"))
				fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "orders", Err: code})
				p := newPublisher(t, c)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var msgs []outbox.Message
				for i := range 5 {
					msgs = append(msgs, message(t, int64(i+1), "orders", []byte("k"), []byte("v"), nil, nil))
				}
				if n, err := p.Publish(ctx, msgs); n != 5 || err != nil {
					t.Fatalf("Publish = %d, %v; want 5, nil", n, err)
				}
				if h := fault.Hits(); h != 1 {
					t.Fatalf("the fault answered %d requests, want 1", h)
				}
				byID(t, consume(t, c.ListenAddrs(), "orders", 5), idHeader) // fails on a duplicate
				if got := endOffsets(t, c.ListenAddrs(), "orders", 1); got[0] != 5 {
					t.Fatalf("the partition holds %d records, want exactly 5", got[0])
				}
			})
		}
	})

	t.Run("PublishNonRetriableErrorFreezesPrefix", func(t *testing.T) {
		t.Parallel()
		for _, code := range []*kerr.Error{kerr.InvalidRecord, kerr.MessageTooLarge} {
			t.Run(code.Message, func(t *testing.T) {
				t.Parallel()
				c := newCluster(t, kfake.SeedTopics(3, "orders"))
				fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "orders", Partitions: []int32{1}, Err: code})
				p := newPublisher(t, c)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				// Rows 0–1 on partition 0, row 2 on the faulted partition 1,
				// rows 3–4 on partition 2: the later rows succeed but must
				// not count.
				msgs := []outbox.Message{
					message(t, 1, "orders", []byte("a"), []byte("v"), nil, ptr(int32(0))),
					message(t, 2, "orders", []byte("b"), []byte("v"), nil, ptr(int32(0))),
					message(t, 3, "orders", []byte("c"), []byte("v"), nil, ptr(int32(1))),
					message(t, 4, "orders", []byte("d"), []byte("v"), nil, ptr(int32(2))),
					message(t, 5, "orders", []byte("e"), []byte("v"), nil, ptr(int32(2))),
				}
				res := p.PublishDetailed(ctx, msgs)
				if res.Acked != 2 || len(res.AckedAt) != 2 {
					t.Fatalf("acked %d (%d times), want 2", res.Acked, len(res.AckedAt))
				}
				if !errors.Is(res.Err, code) {
					t.Fatalf("error %v, want %v", res.Err, code)
				}
				if !strings.Contains(res.Err.Error(), msgs[2].ID.String()) || !strings.Contains(res.Err.Error(), "sequence 3") {
					t.Errorf("error does not name the failing row: %v", res.Err)
				}
				if h := fault.Hits(); h != 1 {
					t.Fatalf("the fault answered %d requests, want 1", h)
				}
				if got := endOffsets(t, c.ListenAddrs(), "orders", 3); got[0] != 2 || got[1] != 0 || got[2] != 2 {
					t.Fatalf("partitions hold %v records, want [2 0 2]", got)
				}
			})
		}
	})

	// PublishRefusedRecordIsNeverOvertaken: a batch the client cannot hold
	// at once (a one-record buffer) is sent in parts, and a refusal of the
	// first part stops the batch, so no later record of the key is appended
	// ahead of the refused one and the retry delivers the key in order. Before
	// records were held until a whole batch was handed over, the client sent
	// the first record alone, the second was handed over after the refusal and
	// appended, and the retry put the first after it.
	t.Run("PublishRefusedRecordIsNeverOvertaken", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(3, "orders"))
		fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord})
		p := newPublisher(t, c, func(cfg *Config) { cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.MaxBufferedRecords(1)) })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msgs := []outbox.Message{
			message(t, 1, "orders", []byte("k"), []byte("first"), nil, ptr(int32(1))),
			message(t, 2, "orders", []byte("k"), []byte("second"), nil, ptr(int32(1))),
		}
		res := p.PublishDetailed(ctx, msgs)
		if res.Acked != 0 || !errors.Is(res.Err, kerr.InvalidRecord) {
			t.Fatalf("first publish: acked %d, error %v; want 0 and %v", res.Acked, res.Err, kerr.InvalidRecord)
		}
		if h := fault.Hits(); h != 1 {
			t.Fatalf("the fault answered %d requests, want 1", h)
		}
		if got := endOffsets(t, c.ListenAddrs(), "orders", 3); got[1] != 0 {
			t.Fatalf("partition 1 holds %d records after the refused publish, want 0: the second record overtook the first", got[1])
		}
		if res := p.PublishDetailed(ctx, msgs); res.Acked != 2 || res.Err != nil {
			t.Fatalf("retry: acked %d, error %v; want 2, nil", res.Acked, res.Err)
		}
		var got []string
		for _, r := range consume(t, c.ListenAddrs(), "orders", 2) {
			got = append(got, string(r.Value))
		}
		if want := []string{"first", "second"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("partition 1 holds %v, want %v", got, want)
		}
	})

	// PublishFullClientBufferIsNotAFailure: records the client has no room
	// for (kgo.ErrMaxBuffered under manual flushing) are not sent yet, not
	// refused: they follow once the records before them are acknowledged, in
	// order, and the batch succeeds. The buffer holds two of the records, by
	// count or by bytes (kgo's option or Config.MaxBufferedBytes), so no
	// produce request carries more than two. How many requests a Flush
	// takes is the client's: the sink sends what it holds when it wakes, so
	// a Flush's two records may go one by one (the topic's first Flush
	// partitions them one at a time as its metadata arrives; the sink's
	// drain makes one more pass after a Flush returns, which can take the
	// first record of the next hand-over alone).
	t.Run("PublishFullClientBufferIsNotAFailure", func(t *testing.T) {
		t.Parallel()
		var msgs []outbox.Message
		for i := range 5 {
			msgs = append(msgs, message(t, int64(i+1), "orders", []byte("k"), []byte(strconv.Itoa(i)), nil, nil))
		}
		r, err := newRecord(context.Background(), &msgs[0], idHeader)
		if err != nil {
			t.Fatal(err)
		}
		twoAndAHalf := 2*userSize(r) + userSize(r)/2
		for name, limit := range map[string]func(*Config){
			"records": func(cfg *Config) { cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.MaxBufferedRecords(2)) },
			"bytes":   func(cfg *Config) { cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.MaxBufferedBytes(int(twoAndAHalf))) },
			// Config.MaxBufferedBytes, as outboxlambda sets it from the
			// relay's memory, wins over a larger ExtraOpts bound.
			"config bytes": func(cfg *Config) {
				cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.MaxBufferedBytes(1<<20))
				cfg.MaxBufferedBytes = twoAndAHalf
			},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c := newCluster(t, kfake.SeedTopics(1, "orders"))
				produced := countProduced(c)
				p := newPublisher(t, c, limit)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				res := p.PublishDetailed(ctx, msgs)
				if res.Acked != 5 || res.Err != nil || len(res.AckedAt) != 5 {
					t.Fatalf("acked %d (%d times), error %v; want 5, nil", res.Acked, len(res.AckedAt), res.Err)
				}
				carried := produced.take()
				sent, most := 0, 0
				for _, n := range carried {
					sent, most = sent+n, max(most, n)
				}
				if sent != 5 || most > 2 {
					t.Fatalf("produce requests carried %v records; want the 5 records, at most two a request", carried)
				}
				var got []string
				for _, r := range consume(t, c.ListenAddrs(), "orders", 5) {
					got = append(got, string(r.Value))
				}
				if want := "0,1,2,3,4"; strings.Join(got, ",") != want {
					t.Fatalf("the partition holds %v, want %s", got, want)
				}
			})
		}
	})

	// PublishWaitingForARunningFlushIsBoundedByCtx: a publish that waits to
	// hand its batch over while another publish's Flush runs is stopped by its
	// ctx, not refused, and sends nothing.
	t.Run("PublishWaitingForARunningFlushIsBoundedByCtx", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		// The broker holds the first produce request until release is closed,
		// so the first publish's Flush keeps running.
		release, received := make(chan struct{}), make(chan struct{})
		var once sync.Once
		c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			once.Do(func() { close(received) })
			c.SleepControl(func() { <-release })
			return nil, nil, false
		})
		p := newPublisher(t, c)
		first := make(chan Result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			first <- p.PublishDetailed(ctx, []outbox.Message{message(t, 1, "orders", []byte("a"), []byte("v"), nil, nil)})
		}()
		<-received
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		second := make(chan Result, 1)
		go func() {
			second <- p.PublishDetailed(ctx, []outbox.Message{message(t, 2, "orders", []byte("b"), []byte("v"), nil, nil)})
		}()
		var res Result
		select {
		case res = <-second:
		case <-time.After(10 * time.Second):
			// Its record went out behind the held request and is awaited.
			close(release)
			t.Fatal("the waiting publish did not return when its ctx ended")
		}
		if res.Acked != 0 || !errors.Is(res.Err, context.DeadlineExceeded) || !strings.Contains(res.Err.Error(), "stopped") {
			t.Fatalf("waiting publish: acked %d, error %v; want 0 and a stop by the deadline", res.Acked, res.Err)
		}
		close(release)
		if r := <-first; r.Acked != 1 || r.Err != nil {
			t.Fatalf("first publish: acked %d, error %v", r.Acked, r.Err)
		}
		if got := endOffsets(t, c.ListenAddrs(), "orders", 1); got[0] != 1 {
			t.Fatalf("the partition holds %d records, want only the first publish's", got[0])
		}
	})

	t.Run("PublishCorruptHeadersStopsTheBatch", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		produces := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Observe: true, Count: -1})
		p := newPublisher(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var msgs []outbox.Message
		for i := range 5 {
			msgs = append(msgs, message(t, int64(i+1), "orders", []byte("k"), []byte("v"), []outbox.Header{{Key: "h", Value: []byte("x")}}, nil))
		}
		msgs[2].Headers = []byte{0x01, 0xff, 0xff, 0xff, 0x7f} // count int32.MaxValue (facts §3)
		res := p.PublishDetailed(ctx, msgs)
		if res.Acked != 2 {
			t.Fatalf("acked %d, want 2", res.Acked)
		}
		if !errors.Is(res.Err, outbox.ErrHeaderFormat) {
			t.Fatalf("error %v, want ErrHeaderFormat", res.Err)
		}
		var hfe *outbox.HeaderFormatError
		if !errors.As(res.Err, &hfe) {
			t.Errorf("error %v is not a *HeaderFormatError", res.Err)
		}
		for _, want := range []string{"header", msgs[2].ID.String(), "bucket", "sequence 3"} {
			if !strings.Contains(res.Err.Error(), want) {
				t.Errorf("error %q does not mention %q", res.Err, want)
			}
		}
		if got := endOffsets(t, c.ListenAddrs(), "orders", 1); got[0] != 2 {
			t.Fatalf("the partition holds %d records; rows after the corrupt one must not be produced", got[0])
		}
		if produces.Hits() == 0 {
			t.Fatal("the rows before the corrupt one were not produced")
		}
	})

	t.Run("PublishStoppedByCallerIsNotAFailure", func(t *testing.T) {
		t.Parallel()
		// Rows 0–1 go to an existing topic; rows 2–3 to a topic that does not
		// exist yet, so they wait for metadata (indefinitely: unknown-topic
		// retries are off). The produce request carrying rows 0–1 cancels ctx
		// as the broker receives it: those rows are in flight and land, the
		// waiting rows are stopped. A warm-up publish loads the topic's
		// metadata, so rows 0–1, handed over together before the flush, go out
		// as one batch in one request.
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var armed atomic.Bool
		c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "orders", Observe: true, Count: -1, When: func(kmsg.Request) bool {
			if armed.Load() {
				cancel()
			}
			return true
		}})
		p := newPublisher(t, c, func(cfg *Config) {
			cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.UnknownTopicRetries(-1))
		})
		if n, err := p.Publish(ctx, []outbox.Message{message(t, 1, "orders", nil, []byte("warm-up"), nil, nil)}); n != 1 || err != nil {
			t.Fatalf("warm-up Publish = %d, %v", n, err)
		}
		armed.Store(true)
		// The publisher's own topic check gets no verdict (a leader election),
		// so rows 2–3 reach the client, which waits for the topic.
		c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "later", Err: kerr.LeaderNotAvailable})
		msgs := []outbox.Message{
			message(t, 1, "orders", []byte("a"), []byte("v"), nil, nil),
			message(t, 2, "orders", []byte("b"), []byte("v"), nil, nil),
			message(t, 3, "later", []byte("c"), []byte("v"), nil, nil),
			message(t, 4, "later", []byte("d"), []byte("v"), nil, nil),
		}
		res := p.PublishDetailed(ctx, msgs)
		if res.Acked != 2 {
			t.Fatalf("acked %d, want the 2 rows sent before the stop (err %v)", res.Acked, res.Err)
		}
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("error %v, want one matching context.Canceled", res.Err)
		}
		if !strings.Contains(res.Err.Error(), "stopped") {
			t.Errorf("error %q does not say the batch was stopped", res.Err)
		}
		if got := endOffsets(t, c.ListenAddrs(), "orders", 1); got[0] != 3 {
			t.Fatalf("orders holds %d records, want the warm-up and 2", got[0])
		}

		// A batch started after the caller stopped produces nothing.
		n, err := p.Publish(ctx, msgs[:1])
		if n != 0 || !errors.Is(err, context.Canceled) {
			t.Fatalf("Publish with a cancelled ctx = %d, %v", n, err)
		}
		if got := endOffsets(t, c.ListenAddrs(), "orders", 1); got[0] != 3 {
			t.Fatalf("orders holds %d records after a cancelled publish, want 3", got[0])
		}
	})

	t.Run("PublishReusesConnections", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		conns := &connectCounter{}
		p := newPublisher(t, c, func(cfg *Config) {
			cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.WithHooks(conns))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Init(ctx); err != nil {
			t.Fatalf("Init: %v", err)
		}
		publish := func() {
			t.Helper()
			if n, err := p.Publish(ctx, []outbox.Message{message(t, 1, "orders", []byte("k"), []byte("v"), nil, nil)}); n != 1 || err != nil {
				t.Fatalf("Publish = %d, %v", n, err)
			}
		}
		publish()
		after := conns.n.Load()
		if after == 0 {
			t.Fatal("the hook saw no connection; it cannot prove reuse")
		}
		for range 5 {
			publish()
		}
		if got := conns.n.Load(); got != after {
			t.Fatalf("five more publishes opened %d more connections", got-after)
		}
	})

	t.Run("InitReachesTheCluster", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t)
		p := newPublisher(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Init(ctx); err != nil {
			t.Fatalf("Init: %v", err)
		}
		if err := p.Init(ctx); err != nil {
			t.Fatalf("second Init: %v", err)
		}
	})

	t.Run("InitFailsOnAClosedPort", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens here any more: connections are refused
		p, err := New(Config{Brokers: []string{addr}})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = p.Init(ctx)
		if err == nil {
			t.Fatal("Init succeeded against a closed port")
		}
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("error does not name the brokers: %v", err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a refused connection should fail at once, not wait out ctx: %v", err)
		}
	})

	t.Run("InitIsBoundedByCtx", func(t *testing.T) {
		t.Parallel()
		// A listener that accepts and never answers: only ctx ends the wait.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
			}
		}()
		p, err := New(Config{Brokers: []string{ln.Addr().String()}})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := p.Init(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Init = %v, want the ctx deadline", err)
		}
	})

	// PublishConcurrentBatchesKeepEveryKeysOrderThroughRefusals publishes
	// each key's messages from one of several concurrent relays-to-be (one
	// Publisher, as buckets share it) while the broker refuses some partition
	// batches, and retries like the relay: the acknowledged prefix is done, the
	// rest is published again. A slow hand-over (a hook that sleeps while each
	// record is handed to the client, as a descheduled hand-over on a busy host
	// does) used to let another batch's Flush send a partial batch, whose
	// refusal the rest of the batch then overtook. Duplicates are allowed; the
	// first delivery of each message must come in the key's order.
	t.Run("PublishConcurrentBatchesKeepEveryKeysOrderThroughRefusals", func(t *testing.T) {
		t.Parallel()
		const (
			publishers = 4
			keysEach   = 3
			perKey     = 8
			batch      = 6
		)
		c := newCluster(t, kfake.SeedTopics(4, "orders"))
		var requests atomic.Int64
		refusals := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "orders", Partitions: []int32{0, 1, 2, 3},
			Err: kerr.InvalidRecord, Count: -1, When: func(kmsg.Request) bool { return requests.Add(1)%3 == 0 }})
		p := newPublisher(t, c, func(cfg *Config) {
			cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.WithHooks(slowHandOver(2*time.Millisecond)))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()

		var wg sync.WaitGroup
		errs := make(chan error, publishers)
		for w := range publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Messages interleave the publisher's keys in commit order.
				var queue []outbox.Message
				for i := range perKey {
					for k := range keysEach {
						key := fmt.Sprintf("w%d-k%d", w, k)
						queue = append(queue, message(t, int64(len(queue)+1), "orders", []byte(key), []byte(strconv.Itoa(i)), nil, nil))
					}
				}
				for attempts := 0; len(queue) > 0; attempts++ {
					if attempts > 200 {
						errs <- fmt.Errorf("publisher %d: %d messages left after %d attempts", w, len(queue), attempts)
						return
					}
					res := p.PublishDetailed(ctx, queue[:min(batch, len(queue))])
					if res.Err != nil && !errors.Is(res.Err, kerr.InvalidRecord) {
						errs <- fmt.Errorf("publisher %d: %w", w, res.Err)
						return
					}
					queue = queue[res.Acked:]
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if refusals.Hits() == 0 {
			t.Fatal("the broker refused nothing; the test proves nothing")
		}
		var total int64
		for _, n := range endOffsets(t, c.ListenAddrs(), "orders", 4) {
			total += n
		}
		seen := map[string]bool{}
		next := map[string]int{}
		for _, r := range consume(t, c.ListenAddrs(), "orders", int(total)) {
			var id string
			for _, h := range r.Headers {
				if h.Key == idHeader {
					id = string(h.Value)
				}
			}
			if seen[id] {
				continue // a duplicate; its first delivery was checked
			}
			seen[id] = true
			i, _ := strconv.Atoi(string(r.Value))
			if key := string(r.Key); i != next[key] {
				t.Errorf("key %s: message %d delivered first where %d was due", key, i, next[key])
			} else {
				next[key]++
			}
		}
		if len(seen) != publishers*keysEach*perKey {
			t.Fatalf("%d distinct messages delivered, want %d", len(seen), publishers*keysEach*perKey)
		}
	})

	// PublishRefusalFailsTheBatchesInFlightBehindIt: a key's records of one
	// batch that span several partition batches, each its own produce request,
	// all fail with the first one refused, so nothing behind it is appended:
	// the client fails the batches it still holds, and a request already sent
	// (after a first acknowledgement the client pipelines them) fails the
	// broker's idempotent sequence check.
	t.Run("PublishRefusalFailsTheBatchesInFlightBehindIt", func(t *testing.T) {
		t.Parallel()
		// Whether the client pipelined a request behind the refused one before
		// the refusal came back depends on the machine's scheduling: the
		// scenario is run until it did (each run must keep the order either
		// way), a few times at most.
		for range 10 {
			if refusalBehindInFlightRequests(t) {
				return
			}
		}
		t.Fatal("in 10 runs the client never had a request in flight behind the refused one")
	})
}

func equalHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || (a[i].Value == nil) != (b[i].Value == nil) || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func fmtHeaders(hs []kgo.RecordHeader) string {
	var b strings.Builder
	for _, h := range hs {
		if h.Value == nil {
			b.WriteString(h.Key + "=<nil> ")
			continue
		}
		b.WriteString(h.Key + "=" + string(h.Value) + " ")
	}
	return b.String()
}

// slowHandOver sleeps in every hand-over of a record to the client.
type slowHandOver time.Duration

func (d slowHandOver) OnProduceRecordBuffered(*kgo.Record) { time.Sleep(time.Duration(d)) }

// refusalBehindInFlightRequests runs the scenario once on a new cluster and
// reports whether a request was in flight behind the refused one.
func refusalBehindInFlightRequests(t *testing.T) bool {
	t.Helper()
	c := newCluster(t, kfake.SeedTopics(1, "orders"))
	value := bytes.Repeat([]byte("v"), 400)
	one := recordSize(&kgo.Record{Key: []byte("k"), Value: value, Headers: []kgo.RecordHeader{{Key: idHeader, Value: []byte(outbox.NewMessageID().String())}}})
	// Room for one record a partition batch, so each goes in its own request.
	p := newPublisher(t, c, func(cfg *Config) {
		cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.ProducerBatchMaxBytes(int32(one+one/2)))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A first acknowledgement lets the client pipeline requests to the broker.
	if n, err := p.Publish(ctx, []outbox.Message{message(t, 1, "orders", []byte("k"), value, nil, nil)}); n != 1 || err != nil {
		t.Fatalf("warm-up Publish = %d, %v", n, err)
	}
	produces := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Observe: true, Count: -1})
	fault := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord})
	var msgs []outbox.Message
	for i := range 4 {
		msgs = append(msgs, message(t, int64(i+2), "orders", []byte("k"), value, nil, nil))
	}
	res := p.PublishDetailed(ctx, msgs)
	if res.Acked != 0 || !errors.Is(res.Err, kerr.InvalidRecord) {
		t.Fatalf("acked %d, error %v; want 0 and %v", res.Acked, res.Err, kerr.InvalidRecord)
	}
	if fault.Hits() != 1 {
		t.Fatalf("%d produce requests refused, want the first", fault.Hits())
	}
	if got := endOffsets(t, c.ListenAddrs(), "orders", 1); got[0] != 1 {
		t.Fatalf("the partition holds %d records, want only the warm-up: a record behind the refused one was appended", got[0])
	}
	return produces.Hits() >= 2
}
