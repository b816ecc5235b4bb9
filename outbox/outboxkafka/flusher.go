package outboxkafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
)

// flusher sends the records of concurrent publishes on a client that sends
// only while a Flush runs (kgo.ManualFlushing), and hands records to the
// client only while no Flush runs.
//
// That is what keeps a refused record ahead of its key. When a broker
// refuses a partition batch, the client fails every record of that
// partition it holds, and a batch already in flight behind the refused one
// fails the idempotent sequence check. A record handed over after that
// refusal would start the partition afresh and be appended ahead of the
// refused record's retry; the client would send it at once while a Flush
// runs. Between Flushes the client starts no send of its own accord, so
// a hand-over is normally complete before a refusal of any of its records
// can come back, and a refusal fails them all.
//
// Normally, not always: a hand-over's first records can leave before its
// last are in. The sink's drain, started while a Flush ran, can make one
// more pass after the Flush returned (franz-go sink.go, drain and
// produce), and a topic's first records are partitioned, and sent, one at
// a time as its metadata arrives. If such a record is refused before a
// later record of its partition is handed over, the later one starts the
// partition afresh. So every record carries a context that a failure of
// any earlier record of its hand-over cancels: a record not yet handed over
// then stays out, and a record handed over but not sent fails when the
// client comes to send it (the client checks the context of a partition's
// first unsent record before sending it; sink.go, tryAddBatch). One
// window stays open: the client reports the refusal on its promise
// goroutine after it failed the partition, and were that report to lag
// behind the rest of the hand-over and the start of the next Flush, the
// later record would be sent before its context is cancelled.
//
// Flushes are shared: hand-overs that start while a Flush runs join the
// round after it at once, wait for the running Flush, then hand over, and
// the last of them to finish starts one Flush for all (group commit).
// Joining before the wait is what keeps them together: were they to join
// as they wake, the first awake would start a Flush of its own before the
// others joined, and with a produce round trip of milliseconds the buckets
// of a relay would produce one after another. A publish hands over at most
// once per Flush, as it waits for its records before handing over more, so
// a Flush waits for at most one hand-over per concurrent publish.
type flusher struct {
	cl    *kgo.Client
	clock outbox.Clock
	// maxRecords and maxBytes are the client's buffer limits; maxBytes 0
	// means none. With manual flushing the client refuses a record over
	// them with kgo.ErrMaxBuffered instead of waiting for room.
	maxRecords, maxBytes int64

	// produceMu lets one hand-over at a time check the room left in the
	// client and fill it: between Flushes only hand-overs add records, so
	// the room counted stays free until the records are in.
	produceMu sync.Mutex

	mu sync.Mutex
	// next collects the hand-overs of the coming Flush; nil before the
	// first one joins. It collects while a Flush runs too: hand-overs
	// joined then wait for that Flush before handing over.
	next *flushRound
	// running is the Flush under way, nil when none runs.
	running *flushRound
	// reserved is a round of one record's own, waiting for the rounds
	// ahead of it; no other hand-over joins a round until it has run.
	reserved *flushRound
}

// flushRound is one shared Flush and the hand-overs it sends.
type flushRound struct {
	handing int           // hand-overs joined and not yet finished
	done    chan struct{} // closed when the Flush has returned
	// alone: the round holds one hand-over and admits no other.
	alone bool
	// records are every hand-over's records, appended under produceMu and
	// read once done is closed: a broker refuses a partition batch whole,
	// so a refusal is a record's own only when no other record of its
	// partition went out in the same Flush (another bucket's publish may
	// share it).
	records []*kgo.Record
}

// shared reports whether another record of r's topic and partition went
// out in the round's Flush. Only after done is closed.
func (round *flushRound) shared(r *kgo.Record) bool {
	for _, o := range round.records {
		if o != r && o.Topic == r.Topic && o.Partition == r.Partition {
			return true
		}
	}
	return false
}

func newFlusher(cl *kgo.Client, clock outbox.Clock) *flusher {
	maxRecords, _ := cl.OptValue(kgo.MaxBufferedRecords).(int64)
	maxBytes, _ := cl.OptValue(kgo.MaxBufferedBytes).(int64)
	return &flusher{cl: cl, clock: clock, maxRecords: maxRecords, maxBytes: maxBytes}
}

// send hands over the longest prefix of records the client has room for,
// in order, and waits for each one's outcome in outcomes. It returns how
// many it handed over; none when the client was full, after the Flush that
// empties it. It returns ctx's error, having handed over nothing, when ctx
// has ended or ends while it waits for a running Flush.
//
// The outcome of a record handed over is final: either the client stopped
// it (ctx ended before it was sent), or Kafka answered, or the client gave
// up after Config.ProduceTimeout.
//
// alone sends the records in a Flush of their own: a verdict on a record a
// broker refused with its partition batch, while other records of that
// partition shared its Flush.
func (f *flusher) send(ctx context.Context, records []*kgo.Record, outcomes []outcome, alone bool) (int, error) {
	join := f.join
	if alone {
		join = f.joinAlone
	}
	round, err := join(ctx)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	// Each record's context is a child of its predecessor's, and a failure
	// cancels the failed record's: the later records are held back (see
	// flusher), the earlier ones are not, so the prefix keeps what it can.
	fence, release := context.WithCancelCause(ctx)
	defer release(nil)
	f.produceMu.Lock()
	n := f.room(records)
	for i, r := range records[:n] {
		if fence.Err() != nil {
			// A failure is in: what is not handed over stays out.
			err := heldBack(ctx, fence)
			for j := i; j < n; j++ {
				outcomes[j].err, outcomes[j].at = err, f.clock.Now()
			}
			break
		}
		rctx, failed := context.WithCancelCause(fence)
		fence = rctx
		if r.Context == nil {
			// The client would make rctx the record's context, which the
			// partitioner searches for an explicit partition: through the
			// whole chain, each record one level deeper than the last.
			r.Context = ctx
		}
		round.records = append(round.records, r)
		wg.Add(1)
		o := &outcomes[i]
		f.cl.Produce(rctx, r, func(_ *kgo.Record, err error) {
			switch {
			case err == nil:
			case errors.Is(err, context.Canceled) && ctx.Err() == nil && rctx.Err() != nil:
				err = heldBack(ctx, rctx)
			case errors.Is(err, context.Canceled) && ctx.Err() == nil:
				// Failed with another hand-over's record held back at
				// the head of its partition: a failure like any other.
				err = fmt.Errorf("outboxkafka: not sent: failed with its partition's first unsent record, held back by its own hand-over (%w)", err)
				failed(err)
			default:
				failed(err)
			}
			// Promises run one at a time on the client's goroutine; the
			// WaitGroup orders these writes before the caller's reads.
			o.err, o.at = err, f.clock.Now()
			wg.Done()
		})
	}
	f.produceMu.Unlock()
	f.leave(round)
	if n == 0 {
		// Others filled the client: their Flush makes room.
		select {
		case <-round.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return 0, nil
	}
	wg.Wait()
	if slices.ContainsFunc(outcomes[:n], func(o outcome) bool { return o.err != nil }) {
		// A refusal's verdict needs the whole Flush: its other records
		// end before it returns, and it always returns.
		<-round.done
		for i := range outcomes[:n] {
			outcomes[i].shared = outcomes[i].err != nil && round.shared(records[i])
		}
	}
	return n, nil
}

// heldBack is the outcome of a record send kept from the broker because an
// earlier record of its hand-over failed (fence is its context, or its
// predecessor's): the caller's ctx error when that ended the hand-over,
// otherwise an error that names the failure without wrapping it, so it
// neither passes for the caller's stop nor condemns this record for
// another's fault (classify).
func heldBack(ctx, fence context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("outboxkafka: not sent: an earlier record of its hand-over failed (%v)", context.Cause(fence))
}

// room returns how many of records, from the first, fit in the client's
// buffer now. A record larger than the whole byte limit is let through: the
// client refuses it as too large without buffering it, which no wait could
// change.
func (f *flusher) room(records []*kgo.Record) int {
	free := f.maxRecords - f.cl.BufferedProduceRecords()
	var freeBytes int64
	if f.maxBytes > 0 {
		freeBytes = f.maxBytes - f.cl.BufferedProduceBytes()
	}
	n := 0
	for _, r := range records {
		size := userSize(r)
		tooLarge := f.maxBytes > 0 && size > f.maxBytes
		switch {
		case tooLarge:
		case free <= 0, f.maxBytes > 0 && size > freeBytes:
			return n
		default:
			free--
			freeBytes -= size
		}
		n++
	}
	return n
}

// userSize is the size the client counts against MaxBufferedBytes: keys,
// values and header keys and values.
func userSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// join admits a hand-over to the coming Flush, to hand over once no Flush
// runs, unless ctx has ended.
func (f *flusher) join(ctx context.Context) (*flushRound, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	for {
		// A round of one record's own goes first: nothing joins it, and
		// nothing joins the round after it until it has run.
		busy := f.reserved
		if busy == nil && f.next != nil && f.next.alone {
			busy = f.next
		}
		if busy == nil {
			break
		}
		if err := f.await(ctx, busy); err != nil {
			return nil, err
		}
	}
	if f.next == nil {
		f.next = &flushRound{done: make(chan struct{})}
	}
	round := f.next
	round.handing++
	if running := f.running; running != nil {
		// The round cannot start before this hand-over leaves it, so
		// once the running Flush returns it is still the one collecting.
		if err := f.await(ctx, running); err != nil {
			// await returned unlocked; the round may start without it.
			f.leave(round)
			return nil, err
		}
	}
	f.mu.Unlock()
	return round, nil
}

// joinAlone admits a hand-over to a Flush of its own: it reserves the next
// round, so no other hand-over joins one meanwhile, and waits until no
// round runs or collects.
func (f *flusher) joinAlone(ctx context.Context) (*flushRound, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	for f.reserved != nil {
		if err := f.await(ctx, f.reserved); err != nil {
			return nil, err
		}
	}
	round := &flushRound{done: make(chan struct{}), alone: true, handing: 1}
	f.reserved = round
	for f.running != nil || f.next != nil {
		busy := cmp.Or(f.running, f.next)
		if err := f.await(ctx, busy); err != nil {
			// Nothing was handed over: the round ends empty, and the
			// hand-overs waiting for it go on.
			f.mu.Lock()
			f.reserved = nil
			close(round.done)
			f.mu.Unlock()
			return nil, err
		}
	}
	f.reserved, f.next = nil, round
	f.mu.Unlock()
	return round, nil
}

// await waits, with f.mu held, for round's Flush to return or ctx to end.
// It returns with f.mu held, or unlocked with ctx's error.
func (f *flusher) await(ctx context.Context, round *flushRound) error {
	f.mu.Unlock()
	select {
	case <-round.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.mu.Lock()
	return nil
}

// leave ends a hand-over; the last one of its round starts the Flush, or
// the running Flush does as it returns.
func (f *flusher) leave(round *flushRound) {
	f.mu.Lock()
	defer f.mu.Unlock()
	round.handing--
	if round.handing > 0 || f.running != nil {
		return
	}
	f.start(round)
}

// start runs round's Flush, with f.mu held; a round every hand-over left
// without handing anything over (their ctx ended while they waited) ends
// without one.
func (f *flusher) start(round *flushRound) {
	f.next = nil
	if len(round.records) == 0 {
		close(round.done)
		return
	}
	f.running = round
	go f.flush(round)
}

// flush sends what the round handed over and waits until the client holds
// no record. It does not stop early: records still being sent after an
// early return could meet a new hand-over. Every record ends by itself:
// its publish's ctx stops it while unsent, Config.ProduceTimeout bounds its
// delivery, and Close fails it.
func (f *flusher) flush(round *flushRound) {
	_ = f.cl.Flush(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = nil
	close(round.done)
	if next := f.next; next != nil && next.handing == 0 {
		// Its hand-overs all left while this Flush ran.
		f.start(next)
	}
}

// outcome is one record's promise result.
type outcome struct {
	err error
	at  time.Time
	// shared: the record failed, and another record of its partition went
	// out in the same Flush, so a batch-level refusal may be that one's.
	shared bool
}
