package outbox

import (
	"context"
	"slices"
	"sync"
	"time"
)

// DoorbellLookBack is how far back a Doorbell transport delivers rings for
// a bucket it starts listening for: longer than a subscription takes to
// start, so a commit made meanwhile is not left to the poll. Rings older
// than that were made before the relay's claim, whose probe of every
// owned bucket finds their messages.
const DoorbellLookBack = time.Second

// Ringer is a writer's end of the doorbell: after a commit it tells the
// relay holding the commit's buckets that a message is there, so the relay
// fetches it at once instead of at its next probe, without a read of the
// table and without a new invocation. Ring must not wait for the holder
// (a Kafka ringer hands the record to its client and returns), and its
// failure never fails the write: a lost ring delays its message to the
// holder's next poll, never loses or reorders it.
type Ringer interface {
	Ring(ctx context.Context, buckets []int) error
}

// Doorbell is a relay's end of the doorbell (RelayConfig.Doorbell): the
// rings writers send for the buckets the relay holds. A ring only decides
// when a bucket is fetched: the fetch is the strongly consistent one of the
// poll, under the lease, so a ring that is lost, late or repeated costs at
// most a poll's wait or a fetch that finds nothing, never a message or a
// key's order. *Rings implements the bookkeeping; an implementation adds
// the transport.
type Doorbell interface {
	// Listen sets the buckets whose rings the relay wants from now on
	// (none: nil), replacing the previous set. It must not block on the
	// network: a transport subscribes in the background and, so that a
	// commit made while it subscribes is not missed, delivers the rings
	// of a short while before the call too.
	Listen(buckets []int)
	// Rung is ready after a ring for a bucket listened for arrived; one
	// signal may stand for several rings.
	Rung() <-chan struct{}
	// Take returns the buckets rung since the last Take, ascending, and
	// forgets them.
	Take() []int
}

// Rings is the bookkeeping of a Doorbell: the buckets listened for and
// those rung since the relay last took them. Transports deliver each ring
// with Deliver. The zero value is not usable; call NewRings.
type Rings struct {
	mu        sync.Mutex
	listening []int
	rung      []int
	signal    chan struct{}
}

// NewRings returns a Rings listening for no bucket.
func NewRings() *Rings { return &Rings{signal: make(chan struct{}, 1)} }

// Listen implements Doorbell: rings already taken in for a bucket no
// longer listened for are dropped.
func (r *Rings) Listen(buckets []int) {
	set := slices.Clone(buckets)
	slices.Sort(set)
	set = slices.Compact(set)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listening = set
	r.rung = slices.DeleteFunc(r.rung, func(b int) bool { return !slices.Contains(set, b) })
}

// Listening returns the buckets listened for, ascending.
func (r *Rings) Listening() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.listening)
}

// Deliver records a ring for bucket and reports whether it was listened
// for; a ring for another bucket is dropped.
func (r *Rings) Deliver(bucket int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := slices.BinarySearch(r.listening, bucket); !ok {
		return false
	}
	if i, found := slices.BinarySearch(r.rung, bucket); !found {
		r.rung = slices.Insert(r.rung, i, bucket)
	}
	select {
	case r.signal <- struct{}{}:
	default:
	}
	return true
}

// Rung implements Doorbell.
func (r *Rings) Rung() <-chan struct{} { return r.signal }

// Take implements Doorbell.
func (r *Rings) Take() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rung
	r.rung = nil
	return out
}
