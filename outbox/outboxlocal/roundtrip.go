package outboxlocal

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox/internal/sleep"
)

// RoundTrip is a delay an embedded server adds to every request it answers,
// so that a benchmark on the embedded backends pays for requests what it
// would on AWS, where a DynamoDB request or a Kafka produce takes
// milliseconds. The zero value adds nothing.
type RoundTrip struct {
	// Mean is a request's delay before jitter.
	Mean time.Duration
	// Jitter spreads each delay uniformly over Mean × (1 ± Jitter), with
	// Jitter in [0, 1]; 0 delays every request by Mean exactly.
	Jitter float64
	// Seed seeds the draws: one seed gives one sequence of delays, handed
	// to the requests in the order the server takes them.
	Seed uint64
}

// String is the delay as the bench prints it: "5ms ±20%".
func (rt RoundTrip) String() string {
	if rt.Jitter == 0 {
		return rt.Mean.String()
	}
	return fmt.Sprintf("%v ±%g%%", rt.Mean, rt.Jitter*100)
}

func (rt RoundTrip) validate(server string) error {
	if rt.Mean < 0 || rt.Jitter < 0 || rt.Jitter > 1 {
		return fmt.Errorf("outboxlocal: %s round trip %v: want a mean >= 0 and a jitter in [0, 1]", server, rt)
	}
	return nil
}

// delays draws a RoundTrip's delays; safe for concurrent use. A nil
// *delays draws zero.
type delays struct {
	rt  RoundTrip
	mu  sync.Mutex
	rng *rand.Rand
}

// draws returns the delays of rt, nil when it adds nothing.
func (rt RoundTrip) draws() *delays {
	if rt.Mean <= 0 {
		return nil
	}
	return &delays{rt: rt, rng: rand.New(rand.NewPCG(rt.Seed, 0))}
}

func (d *delays) next() time.Duration {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	spread := (2*d.rng.Float64() - 1) * d.rt.Jitter
	return time.Duration(float64(d.rt.Mean) * (1 + spread))
}

// delayedHandler holds every request for its drawn delay before the inner
// handler sees it. The wait is outside the embedded server's lock, so
// concurrent requests wait side by side, as on the network.
type delayedHandler struct {
	inner  http.Handler
	delays *delays
}

func (h delayedHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !sleep.For(h.delays.next(), req.Context().Done()) {
		// The client gave up: its SDK reports its context's error.
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.inner.ServeHTTP(w, req)
}
