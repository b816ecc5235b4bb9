package scale

import (
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

func TestModel(t *testing.T) {
	// AgreesWithTheEmbeddedServer runs the same fleets on both
	// backends: a fleet with fewer relays than buckets, and one with distant
	// standbys that rest every other round.
	t.Run("AgreesWithTheEmbeddedServer", func(t *testing.T) {
		for _, size := range []Config{ValidationSize, {Buckets: 4, Relays: 12}} {
			t.Run(fmt.Sprintf("%dx%d", size.Buckets, size.Relays), func(t *testing.T) {
				var v Validation
				var err error
				synctest.Test(t, func(t *testing.T) {
					v, err = Validate(t.Context(), Config{Buckets: size.Buckets, Relays: size.Relays, SteadyRounds: 3})
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := v.Agree(); err != nil {
					t.Fatal(err)
				}
				if !v.Model.Converged || v.Model.Steady.Rounds == 0 {
					t.Fatalf("fleet did not settle: %+v", v.Model)
				}
				if size.Relays > 2*size.Buckets && v.Model.Steady.Requests["PutItem"] >= v.Model.Steady.Rounds {
					t.Fatalf("no distant standby rested: %d heartbeats in %d rounds", v.Model.Steady.Requests["PutItem"], v.Model.Steady.Rounds)
				}
			})
		}
	})

	// ChargesRefusalsPrunesAndReleasesLikeTheEmbeddedServer drives two
	// relays' stores through what a settled fleet never does: a clock that goes
	// back (a refused heartbeat), a dead relay's record pruned, a relay taking
	// over lapsed leases, and graceful releases; after every step both
	// backends must have counted the same requests, refusals and units.
	t.Run("ChargesRefusalsPrunesAndReleasesLikeTheEmbeddedServer", func(t *testing.T) {
		synctest.Test(t, testModelChargesRefusalsPrunesAndReleases)
	})

	// RefusesWhatItCannotAnswer keeps the model honest: a request
	// outside the acquisition round fails instead of being answered wrongly.
	t.Run("RefusesWhatItCannotAnswer", func(t *testing.T) {
		c := newModel().client()
		if _, err := c.BatchWriteItem(t.Context(), nil); err == nil {
			t.Fatal("BatchWriteItem answered")
		}
		if _, err := conditionHolds("#a = :l", map[string]string{"#a": "A"}, map[string]types.AttributeValue{":l": &types.AttributeValueMemberL{}}, nil); err == nil {
			t.Fatal("a condition on a list was evaluated")
		}
		if err := applyUpdate("ADD #a :n", map[string]string{"#a": "A"}, nil, nil); err == nil {
			t.Fatal("an ADD update was applied")
		}
	})
}

// skewedClock is the bubble's clock seen by a host whose clock is off by
// skew: a step back in time is a skew.
type skewedClock struct {
	outbox.SystemClock
	skew time.Duration
}

func (c *skewedClock) Now() time.Time { return time.Now().Add(c.skew) }

func testModelChargesRefusalsPrunesAndReleases(t *testing.T) {
	ctx := t.Context()
	start := runStart(time.Now())
	emb, err := startEmbedded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer emb.close()
	backends := []backend{emb, newModel()}
	clock := &skewedClock{}
	stores := make([]map[string]*outboxddb.Store, len(backends))
	for i, be := range backends {
		stores[i] = map[string]*outboxddb.Store{}
		for _, id := range []string{"relay-a", "relay-b", "relay-c"} {
			s, err := outboxddb.NewStore(be.client(), outboxddb.StoreOptions{Options: outboxddb.Options{TableName: be.table(), BucketCount: 8, Clock: clock, Logger: slog.New(slog.DiscardHandler)}})
			if err != nil {
				t.Fatal(err)
			}
			stores[i][id] = s
		}
	}
	leaseDur := outbox.DefaultLeaseDuration
	steps := []struct {
		name  string
		at    time.Duration
		relay string
		stop  bool
	}{
		{"a takes every bucket", 0, "relay-a", false},
		{"a renews", 10 * time.Second, "relay-a", false},
		{"b joins", 12 * time.Second, "relay-b", false},
		{"a releases b's share", 20 * time.Second, "relay-a", false},
		{"a's clock went back: heartbeat refused", 15 * time.Second, "relay-a", false},
		{"b claims its share", 22 * time.Second, "relay-b", false},
		{"a and b are long dead: c starts, takes every bucket and prunes a", 22*time.Second + 11*leaseDur, "relay-c", false},
		{"b stops", 23*time.Second + 11*leaseDur, "relay-b", true},
		{"a comes back", 24*time.Second + 11*leaseDur, "relay-a", false},
		{"c hands a its share", 25*time.Second + 11*leaseDur, "relay-c", false},
		{"c stops", 26*time.Second + 11*leaseDur, "relay-c", true},
	}
	// Each store is one relay's run: its rounds carry their state.
	rounds := map[*outboxddb.Store]lease.RoundState{}
	for _, step := range steps {
		var tallies []outboxlocal.Counts
		// The step's instant, on a clock set back if it is past.
		at := start.Add(step.at)
		time.Sleep(time.Until(at))
		clock.skew = time.Until(at)
		for i, be := range backends {
			s := stores[i][step.relay]
			req := lease.Request{RelayID: step.relay, BucketCount: 8, LeaseDuration: leaseDur}
			var err error
			if step.stop {
				_, err = s.ReleaseLeases(ctx, req.RelayID)
			} else {
				var acq lease.Acquisition
				acq, err = acquire(ctx, s, req, rounds[s])
				st := lease.RoundState{Round: rounds[s].Round, Standby: acq.Standby}
				if !acq.Rested {
					st.Round++
				}
				rounds[s] = st
			}
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			tallies = append(tallies, be.tally())
		}
		if !reflect.DeepEqual(tallies[0], tallies[1]) {
			t.Fatalf("%s: embedded counted %+v, model %+v", step.name, tallies[0], tallies[1])
		}
	}
	final := backends[1].tally()
	if final.Refused == 0 || final.Requests["DeleteItem"] == 0 {
		t.Fatalf("the script should refuse a heartbeat and prune a record: %+v", final)
	}
}
