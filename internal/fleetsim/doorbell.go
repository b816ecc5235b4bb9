package fleetsim

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
)

// The doorbell (SPILLWAY_DOORBELL_TOPIC): every writer's commit rings the
// relay holding its buckets on lab.Doorbell, Kafka's path with a round
// trip each way, and the relays of both functions listen for the buckets
// they hold. The seed draws each ring's fate: lost, late by up to
// ringLateMax, repeated up to ringLateMax later, or on time. A ring only
// decides when its bucket is fetched: every invariant holds whatever
// becomes of it, and a lost one leaves its message to the poll.
const (
	// ringLatency is the doorbell's produce and fetch round trip.
	ringLatency = 10 * time.Millisecond
	// ringLateMax bounds how late a late or repeated ring arrives.
	ringLateMax = 3 * time.Second
)

// DoorbellCounts are the rings the writers produced and their fates,
// and the fetch answers that brought a listening relay at least one.
type DoorbellCounts struct {
	Rings, Lost, Late, Repeated, Delivered int
}

// newDoorbell returns the run's doorbell on its driver.
func (s *sim) newDoorbell() *lab.Doorbell { return &lab.Doorbell{Sim: s.lab, Latency: ringLatency} }

// ring rings buckets for a writer's commit at now, each with the fate the
// seed draws for it.
func (s *sim) ring(buckets []int) {
	now := s.clock.Now()
	for _, b := range buckets {
		fate, delay := ringFate(s.cfg.Seed, now, b)
		s.add(&s.rep.Doorbell.Rings, 1)
		later := func() {
			s.lab.At(now.Add(delay), func(time.Time) error { return s.bell.Ring(context.Background(), []int{b}) })
		}
		switch fate {
		case ringLost:
			s.add(&s.rep.Doorbell.Lost, 1)
			s.trace.add("ring-lost", "", b, "a writer's ring is lost")
		case ringLate:
			s.add(&s.rep.Doorbell.Late, 1)
			s.trace.add("ring-late", "", b, "a writer's ring arrives %v late", delay)
			later()
		case ringRepeated:
			s.add(&s.rep.Doorbell.Repeated, 1)
			_ = s.bell.Ring(context.Background(), []int{b})
			later()
		default:
			_ = s.bell.Ring(context.Background(), []int{b})
		}
	}
}

// Fates of a ring.
const (
	ringOnTime = iota
	ringLost
	ringLate
	ringRepeated
)

// ringFate draws a ring's fate and delay from the seed, the instant and
// the bucket, so that writers ringing at one instant draw the same fates
// in whatever order they run: a tenth of the rings each lost, late and
// repeated.
func ringFate(seed uint64, at time.Time, bucket int) (fate int, delay time.Duration) {
	h := fnv.New64a()
	_, _ = h.Write([]byte("doorbell " + strconv.FormatInt(at.UnixNano(), 10) + " " + strconv.Itoa(bucket)))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	switch n := r.IntN(10); n {
	case 0, 1, 2:
		return n + 1, uniform(r, 0, ringLateMax)
	}
	return ringOnTime, 0
}
