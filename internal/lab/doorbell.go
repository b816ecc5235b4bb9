package lab

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// Doorbell is a simulation's doorbell topic, the Kafka path by which
// writers tell the relay holding a bucket of a commit (outbox.Ringer,
// outbox.Doorbell), on the bubble's clock with Kafka's round trips: a ring
// is on the broker one Latency after the writer hands it over (its
// produce's acknowledgement), and reaches a listening relay one Latency
// later (the answer to the relay's waiting fetch). A relay that starts
// listening for a bucket gets its rings of the last outbox.DoorbellLookBack
// after one Latency, as the Kafka listener does. The driver (Sim) delivers
// them, so a seed fixes their order. With Down set every ring is lost: the
// path has failed, and the relays' polls find the messages.
type Doorbell struct {
	// Sim runs the deliveries (required).
	Sim *Sim
	// Latency is one Kafka round trip. Default none.
	Latency time.Duration
	// Down loses every ring (a fault study).
	Down bool

	mu        sync.Mutex
	onBroker  []ring // the last DoorbellLookBack of rings, in order
	listeners []*DoorbellListener
	stats     DoorbellStats
}

// ring is one record on the doorbell topic.
type ring struct {
	bucket int
	at     time.Time
}

// DoorbellStats counts a doorbell's Kafka traffic.
type DoorbellStats struct {
	// Rings counts the records writers produced, one per bucket rung;
	// Delivered the fetch answers that brought a listening relay at least
	// one ring (one per listener and instant).
	Rings, Delivered int
}

var _ outbox.Ringer = (*Doorbell)(nil)

// Ring implements outbox.Ringer: it returns at once, as a Kafka ringer
// hands its records to the client.
func (d *Doorbell) Ring(_ context.Context, buckets []int) error {
	at := time.Now().Add(d.Latency)
	d.mu.Lock()
	d.stats.Rings += len(buckets)
	d.mu.Unlock()
	if d.Down {
		return nil
	}
	bs := slices.Clone(buckets)
	d.Sim.At(at, func(now time.Time) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		old := 0
		for old < len(d.onBroker) && now.Sub(d.onBroker[old].at) >= outbox.DoorbellLookBack {
			old++
		}
		d.onBroker = d.onBroker[old:]
		for _, b := range bs {
			d.onBroker = append(d.onBroker, ring{bucket: b, at: now})
		}
		for _, l := range d.listeners {
			listening := l.Listening()
			l.fetch(now, slices.DeleteFunc(slices.Clone(bs), func(b int) bool { return !slices.Contains(listening, b) }))
		}
		return nil
	})
	return nil
}

// Stats returns the counts so far.
func (d *Doorbell) Stats() DoorbellStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Listener returns a new relay's end of the doorbell: one per execution
// environment, as each has its Kafka client.
func (d *Doorbell) Listener() *DoorbellListener {
	l := &DoorbellListener{Rings: outbox.NewRings(), d: d}
	d.mu.Lock()
	d.listeners = append(d.listeners, l)
	d.mu.Unlock()
	return l
}

// DoorbellListener is one relay's end of a Doorbell (outbox.Doorbell).
type DoorbellListener struct {
	*outbox.Rings
	d *Doorbell
}

var _ outbox.Doorbell = (*DoorbellListener)(nil)

// Listen implements outbox.Doorbell: the buckets it adds get their rings
// of the last outbox.DoorbellLookBack one fetch later.
func (l *DoorbellListener) Listen(buckets []int) {
	before := l.Listening()
	l.Rings.Listen(buckets)
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	var back []int
	for _, r := range d.onBroker {
		if !slices.Contains(before, r.bucket) && now.Sub(r.at) < outbox.DoorbellLookBack {
			back = append(back, r.bucket)
		}
	}
	l.fetch(now, back)
}

// fetch delivers the rings of buckets, those listened for, one Latency
// after now: the answer to the fetch waiting for them. Called with d.mu
// held.
func (l *DoorbellListener) fetch(now time.Time, buckets []int) {
	if len(buckets) == 0 {
		return
	}
	bs := slices.Clone(buckets)
	l.d.Sim.At(now.Add(l.d.Latency), func(time.Time) error {
		delivered := false
		for _, b := range bs {
			delivered = l.Deliver(b) || delivered
		}
		if delivered {
			l.d.mu.Lock()
			l.d.stats.Delivered++
			l.d.mu.Unlock()
		}
		return nil
	})
}
