package outbox

import (
	"slices"
	"sync"
	"time"
)

// parkedBook is a relay's view of its owned buckets' parked partitions and
// of the fleet's replay requests. It survives runs, as the leases do. Its
// lock is taken in one place (locked) and guards memory only, the book's
// and the head-row backoffs' (headRows): every read and write of the table
// happens outside it, so no wait on the store ever holds it, and no other
// lock is taken under it.
type parkedBook struct {
	mu sync.Mutex
	// buckets holds, per owned bucket, the quarantined keys, their parked
	// sequences and the marked replays, read when the bucket is claimed; a
	// bucket absent from the map has not been read since it was claimed
	// (or since a park whose outcome is unknown, or a new replay request).
	buckets map[int]*parkedBucket
	// requests are the buckets' replay requests as last read, at readAt.
	requests map[int]int64
	readAt   time.Time
}

// parkedBucket is what a relay knows of one owned bucket's parked
// partition since it last read it. Its fields are the book's: read and
// written under the book's lock.
type parkedBucket struct {
	keys         map[string][]int64
	replays      []Message
	unreplayable map[int64]string
	// request is the bucket's replay request the relay had seen before it
	// read the partition (0: none); withdrawn once every replay is done.
	request int64
}

func newParkedBook() *parkedBook { return &parkedBook{buckets: map[int]*parkedBucket{}} }

// locked runs fn, which touches only the book's memory, under its lock.
func (b *parkedBook) locked(fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn()
}

// lookup returns the bucket's parked state if the relay has it, and the
// replay request last seen for the bucket.
func (b *parkedBook) lookup(bucket int) (pb *parkedBucket, request int64, ok bool) {
	b.locked(func() {
		pb, ok = b.buckets[bucket]
		request = b.requests[bucket]
	})
	return pb, request, ok
}

// install records a bucket's parked partition as just read, with the
// replay request seen before the read.
func (b *parkedBook) install(bucket int, set ParkedSet, request int64) *parkedBucket {
	pb := &parkedBucket{keys: set.Keys, replays: set.Replays, unreplayable: set.Unreplayable, request: request}
	if pb.keys == nil {
		pb.keys = map[string][]int64{}
	}
	b.locked(func() { b.buckets[bucket] = pb })
	return pb
}

// forget drops the bucket's parked state: the next use reads the
// partition again.
func (b *parkedBook) forget(bucket int) {
	b.locked(func() { delete(b.buckets, bucket) })
}

// retain drops the parked state of buckets not in keep and of the buckets
// in claimed: a bucket the relay did not hold throughout may have been
// parked into or replayed by others, so it is read again when next
// drained. Nil keep forgets everything.
func (b *parkedBook) retain(keep, claimed []int) {
	b.locked(func() {
		for bucket := range b.buckets {
			if !slices.Contains(keep, bucket) || slices.Contains(claimed, bucket) {
				delete(b.buckets, bucket)
			}
		}
	})
}

// behind returns the last parked sequence of key in bucket, or 0 when the
// key is not quarantined. Keyless messages never are.
func (b *parkedBook) behind(bucket int, key []byte) (seq int64) {
	if key == nil {
		return 0
	}
	b.locked(func() {
		if pb := b.buckets[bucket]; pb != nil {
			if seqs := pb.keys[string(key)]; len(seqs) > 0 {
				seq = seqs[len(seqs)-1]
			}
		}
	})
	return seq
}

// noteParked records a parked message of a key so later messages of that
// key park behind it.
func (b *parkedBook) noteParked(bucket int, key []byte, seq int64) {
	if key == nil {
		return
	}
	b.locked(func() {
		if pb := b.buckets[bucket]; pb != nil {
			pb.keys[string(key)] = append(pb.keys[string(key)], seq)
		}
	})
}

// replayable returns pb's marked messages the relay may publish now, in
// original order: a keyless one always; a key's only as a prefix of its
// parked messages, so a key never publishes a message while an earlier one
// of it stays parked.
func (b *parkedBook) replayable(pb *parkedBucket) (out []Message) {
	b.locked(func() {
		marked := make(map[int64]bool, len(pb.replays))
		for _, m := range pb.replays {
			marked[m.Sequence()] = true
		}
		ready := map[int64]bool{}
		for _, seqs := range pb.keys {
			for _, seq := range seqs {
				if !marked[seq] {
					break
				}
				ready[seq] = true
			}
		}
		for _, m := range pb.replays {
			if m.Key == nil || ready[m.Sequence()] {
				out = append(out, m)
			}
		}
	})
	return out
}

// marked returns pb's marked messages still to do.
func (b *parkedBook) marked(pb *parkedBucket) (out []Message) {
	b.locked(func() { out = slices.Clone(pb.replays) })
	return out
}

// takeUnreplayable returns pb's marked messages that do not decode, once.
func (b *parkedBook) takeUnreplayable(pb *parkedBucket) (bad map[int64]string) {
	b.locked(func() { bad, pb.unreplayable = pb.unreplayable, nil })
	return bad
}

// withLaterOfKey returns m and the marked messages of pb after it of its
// key: a refused replay takes them along.
func (b *parkedBook) withLaterOfKey(pb *parkedBucket, m Message) []Message {
	out := []Message{m}
	b.locked(func() {
		for k, seqs := range pb.keys {
			if !slices.Contains(seqs, m.Sequence()) {
				continue
			}
			for _, later := range pb.replays {
				if later.Sequence() > m.Sequence() && later.Key != nil && string(later.Key) == k {
					out = append(out, later)
				}
			}
			return
		}
	})
	return out
}

// dropReplays forgets published (or refused) replays: they leave pb's
// marked list, and published ones leave their key's parked sequences.
func (b *parkedBook) dropReplays(pb *parkedBucket, done []Message, published bool) {
	gone := make(map[int64]bool, len(done))
	for _, m := range done {
		gone[m.Sequence()] = true
	}
	b.locked(func() {
		pb.replays = slices.DeleteFunc(slices.Clone(pb.replays), func(m Message) bool { return gone[m.Sequence()] })
		if !published {
			return
		}
		for _, m := range done {
			if m.Key == nil {
				continue
			}
			k := string(m.Key)
			pb.keys[k] = slices.DeleteFunc(slices.Clone(pb.keys[k]), func(s int64) bool { return gone[s] })
			if len(pb.keys[k]) == 0 {
				delete(pb.keys, k)
			}
		}
	})
}

// request returns the replay request pb was read under (0: none).
func (b *parkedBook) request(pb *parkedBucket) (request int64) {
	b.locked(func() { request = pb.request })
	return request
}

// requestDone records that the bucket's request was withdrawn: pb no
// longer carries it, and the book forgets it unless a newer one was read.
func (b *parkedBook) requestDone(bucket int, pb *parkedBucket, request int64) {
	b.locked(func() {
		pb.request = 0
		if b.requests[bucket] == request {
			delete(b.requests, bucket)
		}
	})
}

// requestsDue reports whether the replay requests are to be read: when
// forced, never read, or last read every ago.
func (b *parkedBook) requestsDue(now time.Time, every time.Duration, force bool) (due bool) {
	b.locked(func() { due = force || b.readAt.IsZero() || now.Sub(b.readAt) >= every })
	return due
}

// setRequests records the replay requests read at now, and forgets the
// parked state of every bucket read under another request, so the relay
// reads the marks.
func (b *parkedBook) setRequests(reqs map[int]int64, now time.Time) {
	b.locked(func() {
		b.requests, b.readAt = reqs, now
		for bucket, req := range reqs {
			if pb := b.buckets[bucket]; pb != nil && pb.request != req {
				delete(b.buckets, bucket)
			}
		}
	})
}

// requested returns the buckets of bs with a replay request.
func (b *parkedBook) requested(bs []int) (out []int) {
	b.locked(func() {
		for _, bucket := range bs {
			if b.requests[bucket] != 0 {
				out = append(out, bucket)
			}
		}
	})
	return out
}
