package outbox

import (
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// jitter draws the random part of backoffs. It is seeded from the relay id so
// two relays that fail together do not retry in lockstep, and one relay's
// sequence is reproducible in tests. It is not safe for concurrent use: the
// relay draws under the lock of its head-row backoffs (headRows).
type jitter struct {
	rng *rand.Rand
}

func newJitter(relayID string) *jitter {
	h := fnv.New64a()
	_, _ = h.Write([]byte(relayID))
	s := h.Sum64()
	return &jitter{rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))}
}

// backoff returns the delay after the failures-th consecutive fruitless
// failure: the base for the first one (or when the renew interval leaves no
// room), then base plus a uniform share of an exponentially growing ceiling
// that never passes renew, so a kept lease is renewed before it runs out.
func (j *jitter) backoff(failures int, base, renew time.Duration) time.Duration {
	if failures <= 1 || renew <= base {
		return base
	}
	shift := failures - 1
	if shift > 30 {
		shift = 30
	}
	ceiling := base << shift
	if ceiling > renew || ceiling <= 0 {
		ceiling = renew
	}
	return base + time.Duration(j.rng.Float64()*float64(ceiling-base))
}
