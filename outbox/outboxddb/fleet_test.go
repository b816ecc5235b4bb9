package outboxddb

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// Fleet timings of the seed's table: L = 30 s, I = 10 s.
const (
	fleetLease = 30 * time.Second
	fleetRenew = 10 * time.Second
)

// fleet drives several relays, one Store each, against one table in a
// synctest bubble. Each relay may run with its own clock offset (a host whose
// clock was set back).
type fleet struct {
	t      *testing.T
	e      *env
	n      int
	stores map[string]*Store
	runs   map[string]*relayRun
	skews  map[string]*skewClock
}

func newFleet(t *testing.T, bucketCount int) *fleet {
	t.Helper()
	return &fleet{
		t:      t,
		e:      newEnv(t, func(o *Options) { o.BucketCount = bucketCount }),
		n:      bucketCount,
		stores: map[string]*Store{},
		runs:   map[string]*relayRun{},
		skews:  map[string]*skewClock{},
	}
}

// skewClock is the fleet's clock shifted by an offset.
type skewClock struct {
	base outbox.Clock
	mu   sync.Mutex
	off  time.Duration
}

func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Now().Add(c.off)
}

func (c *skewClock) set(off time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = off
}

// relay returns the relay's store, starting one on first use.
func (f *fleet) relay(id string) *Store {
	if s, ok := f.stores[id]; ok {
		return s
	}
	return f.restart(id)
}

// restart gives the relay a fresh store instance, as a new process would
// have: no memory of heartbeats sent, rounds run or deletes made.
func (f *fleet) restart(id string) *Store {
	clock := f.skews[id]
	if clock == nil {
		clock = &skewClock{base: f.e.clock}
		f.skews[id] = clock
	}
	s := f.e.store(f.t, func(o *StoreOptions) { o.Clock = clock })
	f.stores[id] = s
	f.runs[id] = &relayRun{s: s}
	return s
}

// newRun starts a new run of the relay on its store, as a warm Lambda
// execution environment's next invocation does: the store stays, the round
// count starts again.
func (f *fleet) newRun(id string) {
	f.runs[id] = &relayRun{s: f.relay(id), st: lease.RoundState{Standby: f.runs[id].st.Standby}}
}

func (f *fleet) request(id string) lease.Request {
	return lease.Request{RelayID: id, BucketCount: f.n, LeaseDuration: fleetLease}
}

// round advances the clock by I and runs one acquisition of each relay, one
// after the other in the order given. It returns the acquisitions and the
// refused writes of the round.
func (f *fleet) round(ids ...string) (map[string]lease.Acquisition, int) {
	f.t.Helper()
	time.Sleep(fleetRenew)
	return f.acquire(ids...)
}

// acquire runs one acquisition per relay, in order, without moving the
// clock.
func (f *fleet) acquire(ids ...string) (map[string]lease.Acquisition, int) {
	f.t.Helper()
	acqs := map[string]lease.Acquisition{}
	c := f.e.counts(func() {
		for _, id := range ids {
			f.relay(id)
			acq, err := f.runs[id].acquire(f.t.Context(), f.request(id))
			if err != nil {
				f.t.Fatalf("%s: %v", id, err)
			}
			acqs[id] = acq
		}
	})
	return acqs, c.Refused
}

// concurrentRound runs one acquisition of every relay at once.
func (f *fleet) concurrentRound(ids ...string) (map[string]lease.Acquisition, int) {
	f.t.Helper()
	time.Sleep(fleetRenew)
	for _, id := range ids {
		f.relay(id)
	}
	var mu sync.Mutex
	acqs := map[string]lease.Acquisition{}
	c := f.e.counts(func() {
		var wg sync.WaitGroup
		for _, id := range ids {
			run := f.runs[id]
			wg.Go(func() {
				acq, err := run.acquire(f.t.Context(), f.request(id))
				if err != nil {
					f.t.Errorf("%s: %v", id, err)
				}
				mu.Lock()
				acqs[id] = acq
				mu.Unlock()
			})
		}
		wg.Wait()
	})
	return acqs, c.Refused
}

// owners reads the table: relay id → buckets whose lease names it and has
// not expired at the fleet clock's now. The read is not counted against the
// round it follows.
func (f *fleet) owners() map[string][]int {
	f.t.Helper()
	view, err := f.e.store(f.t).ReadCoordination(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string][]int{}
	for _, l := range view.Leases {
		if l.Owner != "" && !l.Expired(view.ReadAt) {
			out[l.Owner] = append(out[l.Owner], l.Bucket)
		}
	}
	return out
}

// check asserts the round: the refused writes, the table's live owners, and
// that each relay that ran reports exactly the buckets the table gives it.
func (f *fleet) check(step string, acqs map[string]lease.Acquisition, refused, wantRefused int, want map[string][]int) {
	f.t.Helper()
	if refused != wantRefused {
		f.t.Errorf("%s: %d refused writes, want %d", step, refused, wantRefused)
	}
	got := f.owners()
	if render(got) != render(want) {
		f.t.Fatalf("%s: table owners %s, want %s", step, render(got), render(want))
	}
	for id, acq := range acqs {
		if !slices.Equal(acq.Owned, got[id]) && !(len(acq.Owned) == 0 && len(got[id]) == 0) {
			f.t.Fatalf("%s: %s reports %v owned, the table %v", step, id, acq.Owned, got[id])
		}
	}
}

func render(owners map[string][]int) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(owners)) {
		if len(owners[id]) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%v", id, owners[id]))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func span(from, to int) []int {
	var out []int
	for b := from; b <= to; b++ {
		out = append(out, b)
	}
	return out
}

// settle brings relays a and b to the steady split a:0-3, b:4-7 on 8
// buckets, from a fresh table.
func (f *fleet) settle() {
	f.t.Helper()
	acqs, refused := f.round("relay-a")
	f.check("relay-a alone", acqs, refused, 0, map[string][]int{"relay-a": span(0, 7)})
	acqs, refused = f.round("relay-a", "relay-b")
	f.check("relay-b joins", acqs, refused, 0, map[string][]int{"relay-a": span(0, 7)})
	acqs, refused = f.round("relay-a", "relay-b")
	f.check("relay-a hands over", acqs, refused, 0, map[string][]int{"relay-a": span(0, 3), "relay-b": span(4, 7)})
}

// outlive runs rounds of survivor alone after a settle while silent runs
// none: for the two rounds before silent's leases lapse, survivor keeps to
// its own half without a write to the other's buckets; at the lapse it
// holds all eight.
func (f *fleet) outlive(survivor, silent string) {
	f.t.Helper()
	split := map[string][]int{"relay-a": span(0, 3), "relay-b": span(4, 7)}
	for i := range 2 {
		acqs, refused := f.round(survivor)
		f.check(fmt.Sprintf("%s silent, round %d", silent, i), acqs, refused, 0, split)
	}
	acqs, refused := f.round(survivor)
	f.check(survivor+" takes the lapsed leases", acqs, refused, 0, map[string][]int{survivor: span(0, 7)})
}

func TestFleet(t *testing.T) {
	// HowRelaysShareBuckets reproduces every row of the seed's table "How
	// relays share buckets", asserting ownership after each round and the exact
	// number of refused conditional writes the table states.
	t.Run("HowRelaysShareBuckets", func(t *testing.T) {
		ab := map[string][]int{"relay-a": span(0, 3), "relay-b": span(4, 7)}

		t.Run("steady state", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				for i := range 5 {
					var acqs map[string]lease.Acquisition
					var refused int
					c := f.e.counts(func() { acqs, refused = f.round("relay-a", "relay-b") })
					f.check(fmt.Sprintf("steady round %d", i), acqs, refused, 0, ab)
					// Per relay: one heartbeat, one consistent read, one renewal per
					// owned bucket.
					wantRequests(t, c, map[string]int{"PutItem": 2, "Query": 2, "UpdateItem": 8})
				}
			})
		})

		t.Run("instance starts, scale out", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				// relay-c joins a fair fleet: on its first round it owns nothing and
				// writes no lease.
				acqs, refused := f.round("relay-a", "relay-b", "relay-c")
				f.check("relay-c joins", acqs, refused, 0, ab)
				// The peers see its heartbeat on their next round: the shares become
				// a=3 b=3 c=2 (the remainder stays with the relays that hold more),
				// so each hands one bucket back, outside its range first, and
				// relay-c claims them on its following round. Buckets a peer keeps
				// do not move.
				acqs, refused = f.round("relay-a", "relay-b", "relay-c")
				want := map[string][]int{"relay-a": span(0, 2), "relay-b": span(4, 6), "relay-c": {3, 7}}
				f.check("peers hand over, relay-c claims", acqs, refused, 0, want)
				wantInts(t, "relay-a released", acqs["relay-a"].Released, []int{3})
				wantInts(t, "relay-b released", acqs["relay-b"].Released, []int{7})
				acqs, refused = f.round("relay-a", "relay-b", "relay-c")
				f.check("settled", acqs, refused, 0, want)
			})
		})

		t.Run("graceful stop", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				time.Sleep(time.Second)
				var rel lease.Release
				c := f.e.counts(func() {
					var err error
					if rel, err = f.relay("relay-b").ReleaseLeases(t.Context(), "relay-b"); err != nil {
						t.Fatal(err)
					}
				})
				wantInts(t, "released", rel.Released, span(4, 7))
				if rel.Unfinished || c.Refused != 0 {
					t.Fatalf("release %+v with %d refusals", rel, c.Refused)
				}
				// Stopped stamp, two lease reads, four releases.
				wantRequests(t, c, map[string]int{"PutItem": 1, "Query": 2, "UpdateItem": 4})
				f.check("relay-b stopped", nil, 0, 0, map[string][]int{"relay-a": span(0, 3)})
				// relay-a claims the buckets on its next round, long before they
				// would have expired.
				acqs, refused := f.round("relay-a")
				f.check("relay-a takes over", acqs, refused, 0, map[string][]int{"relay-a": span(0, 7)})
			})
		})

		t.Run("crash", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				// relay-b's last round was at the settle; it never runs again. Its
				// leases and heartbeat lapse together after L; until then relay-a
				// writes nothing to its buckets.
				f.outlive("relay-a", "relay-b")
			})
		})

		t.Run("whole fleet replaced at once", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				// relay-a and relay-b die; relay-c and relay-d start on the next
				// round and wait for the old leases to lapse, then split.
				acqs, refused := f.round("relay-c", "relay-d")
				f.check("replacements start", acqs, refused, 0, ab)
				acqs, refused = f.round("relay-c", "relay-d")
				f.check("still waiting", acqs, refused, 0, ab)
				acqs, refused = f.round("relay-c", "relay-d")
				f.check("old leases lapsed", acqs, refused, 0, map[string][]int{"relay-c": span(0, 3), "relay-d": span(4, 7)})
			})
		})

		t.Run("stop that misses the shutdown deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				// relay-b was publishing: its last act was an in-flight renewal 5 s
				// into the next interval; it does not release. Same as a crash, from
				// the renewal on.
				time.Sleep(5 * time.Second)
				if ok, err := f.relay("relay-b").renew(t.Context(), f.request("relay-b"), span(4, 7)); err != nil || !ok {
					t.Fatalf("renewal = %v, %v", ok, err)
				}
				for i := range 2 {
					acqs, refused := f.round("relay-a")
					f.check(fmt.Sprintf("before expiry %d", i), acqs, refused, 0, ab)
				}
				acqs, refused := f.round("relay-a")
				f.check("at expiry", acqs, refused, 0, map[string][]int{"relay-a": span(0, 7)})
			})
		})

		t.Run("restart under the same relay id", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				f.restart("relay-b")
				acqs, refused := f.round("relay-a", "relay-b")
				f.check("restarted relay-b resumes at once", acqs, refused, 0, ab)
				if acq := acqs["relay-b"]; len(acq.Claimed) != 0 {
					t.Fatalf("restarted relay claimed %v; it should keep its leases", acq.Claimed)
				}
			})
		})

		t.Run("host clock set back by more than LeaseRenewInterval", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				// relay-b stops gracefully a second into the interval (its
				// clock runs a second ahead, the fleet's stays on the round),
				// leaving 4-7 free; then relay-a's host clock steps back 25 s.
				f.skews["relay-b"].set(time.Second)
				if _, err := f.relay("relay-b").ReleaseLeases(t.Context(), "relay-b"); err != nil {
					t.Fatal(err)
				}
				f.skews["relay-a"].set(-25 * time.Second)
				before := f.owners()
				for i := range 2 {
					// relay-a's heartbeat is refused (the stored one is later), so it
					// claims none of the free buckets; its renewals would move
					// expiries backwards, so it sends none and reports nothing owned.
					// The leases still name it: nobody takes them.
					acqs, refused := f.round("relay-a")
					f.check(fmt.Sprintf("clock behind, round %d", i), nil, refused, 1, before)
					if acq := acqs["relay-a"]; !acq.HeartbeatRefused || len(acq.Owned) != 0 {
						t.Fatalf("round %d: %+v", i, acq)
					}
				}
				// Its clock has passed the stored heartbeat: it keeps its leases
				// again and claims the free ones.
				acqs, refused := f.round("relay-a")
				f.check("clock caught up", acqs, refused, 0, map[string][]int{"relay-a": span(0, 7)})
			})
		})

		t.Run("stall past the lease", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				f.settle()
				// relay-a stalls; relay-b takes its leases once they lapse.
				f.outlive("relay-b", "relay-a")
				// relay-a wakes inside a publish: its in-flight renewal is refused,
				// one refusal per lost bucket, and it stops publishing them.
				var ok bool
				c := f.e.counts(func() {
					var err error
					if ok, err = f.relay("relay-a").renew(t.Context(), f.request("relay-a"), span(0, 3)); err != nil {
						t.Fatal(err)
					}
				})
				if ok || c.Refused != 4 {
					t.Fatalf("stalled renewal = %v with %d refusals, want false with 4 (one per lost bucket)", ok, c.Refused)
				}
				wantRequests(t, c, map[string]int{"UpdateItem": 4}) // no heartbeat after a refusal
				// It gets a share back only when a peer hands one over.
				acqs, refused := f.acquire("relay-a", "relay-b")
				f.check("relay-a is back, relay-b hands over", acqs, refused, 0, map[string][]int{"relay-b": span(4, 7)})
				acqs, refused = f.round("relay-a", "relay-b")
				f.check("relay-a claims its share", acqs, refused, 0, ab)
			})
		})

		t.Run("many instances start at once on free buckets", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 8)
				ids := []string{"relay-a", "relay-b", "relay-c", "relay-d"}
				refusedEarly := 0
				for range 2 {
					_, refused := f.concurrentRound(ids...)
					refusedEarly += refused
				}
				if bound := 8 * (len(ids) - 1); refusedEarly > bound {
					t.Fatalf("%d refused writes in the first two rounds, want at most %d", refusedEarly, bound)
				}
				t.Logf("refused writes in the first two rounds: %d", refusedEarly)
				for i := range 3 {
					acqs, refused := f.concurrentRound(ids...)
					if refused != 0 {
						t.Fatalf("round %d after the start: %d refused writes, want none", i+3, refused)
					}
					claimed := map[int]string{}
					for id, acq := range acqs {
						for _, b := range acq.Owned {
							if other, dup := claimed[b]; dup {
								t.Fatalf("bucket %d owned by %s and %s", b, other, id)
							}
							claimed[b] = id
						}
					}
				}
				owners := f.owners()
				total := 0
				for _, id := range ids {
					if len(owners[id]) != 2 {
						t.Fatalf("split %s, want 2 buckets each", render(owners))
					}
					total += len(owners[id])
				}
				if total != 8 {
					t.Fatalf("split %s covers %d buckets", render(owners), total)
				}
			})
		})

		t.Run("more instances than buckets", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, 2)
				acqs, refused := f.round("pod-m", "pod-n")
				f.check("owners start", acqs, refused, 0, map[string][]int{"pod-m": {0, 1}})
				acqs, refused = f.round("pod-m", "pod-n")
				f.check("owners split", acqs, refused, 0, map[string][]int{"pod-m": {0}, "pod-n": {1}})
				// pod-a, pod-b and pod-c join: standbys, even though their ids sort
				// first. pod-a and pod-b are first in line (one per bucket) and run
				// every round; pod-c is behind them and rests every other round.
				pods := []string{"pod-a", "pod-b", "pod-c", "pod-m", "pod-n"}
				var cRequests []int
				for i := range 6 {
					time.Sleep(fleetRenew)
					acqs := map[string]lease.Acquisition{}
					refused := 0
					for _, id := range pods {
						var one map[string]lease.Acquisition
						var r int
						c := f.e.counts(func() { one, r = f.acquire(id) })
						acqs[id], refused = one[id], refused+r
						switch id {
						case "pod-c":
							cRequests = append(cRequests, c.TotalRequests())
						case "pod-a", "pod-b":
							// One heartbeat and one read a round. In the round after
							// they joined, a relay that settled before the later
							// joiners' heartbeats reads the heartbeats, sees them
							// and reads everything: two reads.
							reads := 1
							if i == 1 {
								reads = 2
							}
							wantRequests(t, c, map[string]int{"PutItem": 1, "Query": reads})
						}
					}
					f.check(fmt.Sprintf("standby round %d", i), acqs, refused, 0, map[string][]int{"pod-m": {0}, "pod-n": {1}})
					for rank, id := range []string{"pod-a", "pod-b"} {
						if acqs[id].StandbyRank != rank {
							t.Fatalf("round %d: %s standby rank %d, want %d", i, id, acqs[id].StandbyRank, rank)
						}
					}
				}
				wantInts(t, "pod-c requests per round", cRequests, []int{2, 0, 2, 0, 2, 0})
				// A bucket frees up: the first standby in id order steps in.
				time.Sleep(time.Second)
				if _, err := f.relay("pod-m").ReleaseLeases(t.Context(), "pod-m"); err != nil {
					t.Fatal(err)
				}
				acqs, refused = f.round("pod-a", "pod-b", "pod-c", "pod-n")
				f.check("pod-a steps in", acqs, refused, 0, map[string][]int{"pod-a": {0}, "pod-n": {1}})
			})
		})
	})

	t.Run("SteadyState_RequestsPerRound", func(t *testing.T) {
		// The figures of the report: one relay owning 1, 2 and 8 buckets.
		for _, n := range []int{1, 2, 8} {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, n)
				f.round("relay-a")
				var acqs map[string]lease.Acquisition
				var refused int
				c := f.e.counts(func() { acqs, refused = f.round("relay-a") })
				f.check("steady", acqs, refused, 0, map[string][]int{"relay-a": span(0, n-1)})
				wantRequests(t, c, map[string]int{"PutItem": 1, "Query": 1, "UpdateItem": n})
				t.Logf("%d owned bucket(s): %v requests per round, %.1f write units, %.1f read units", n, c.Requests, c.WriteUnits, c.ReadUnits)
			})
		}
	})
}
