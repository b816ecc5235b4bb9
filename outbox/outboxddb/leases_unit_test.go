package outboxddb

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// recordingObserver is a HookRequest keeping "kind:op" of every report.
type recordingObserver struct {
	mu     sync.Mutex
	events []string
}

func (o *recordingObserver) OnRefused(req Request) { o.add("refused_write:" + req.Op) }

func (o *recordingObserver) OnThrottle(req Request, _ error) { o.add("throttle:" + req.Op) }

func (o *recordingObserver) add(e string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

// ops lists "kind:op" of the reports, sorted.
func (o *recordingObserver) ops() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := slices.Clone(o.events)
	slices.Sort(out)
	return out
}

var (
	refusedErr  = &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	throttleErr = &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
)

func leaseBucket(in *dynamodb.UpdateItemInput) int {
	b, _ := parseLeaseSortKey(in.Key["SK"].(*types.AttributeValueMemberS).Value)
	return b
}

func TestLeases(t *testing.T) {
	t.Run("Acquisition_CoordinationRead_FollowsEveryPage_BeforePlanning", func(t *testing.T) {
		s, f, _ := shapeStore(t, 4)
		f.query = func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			if in.ExclusiveStartKey == nil {
				// relay-b holds 2-3 on the first page; its heartbeat is on the
				// second: planned on the first page alone, relay-a would claim
				// everything free and count itself alone.
				return &dynamodb.QueryOutput{
					Items:            []item{leaseItem(2, "relay-b", t0Plus5s), leaseItem(3, "relay-b", t0Plus5s)},
					LastEvaluatedKey: item{"PK": S("OUTBOX#COORDINATION"), "SK": S("LEASE#0000000003")},
				}, nil
			}
			return &dynamodb.QueryOutput{Items: []item{relayItem("relay-b", ticksAt(-time.Second), false)}}, nil
		}
		acq, err := s.acquire(context.Background(), testLease, lease.RoundState{})
		if err != nil {
			t.Fatal(err)
		}
		wantInts(t, "claimed", acq.Claimed, []int{0, 1})
		wantOps(t, f, "PutItem", "Query", "Query", "UpdateItem", "UpdateItem")
		second := coordinationQuery()
		second.ExclusiveStartKey = item{"PK": S("OUTBOX#COORDINATION"), "SK": S("LEASE#0000000003")}
		wantShapes(t, f, "Query", coordinationQuery(), second)
	})

	t.Run("Acquisition_RefusedKeepsAndClaims_AreNotOwned_AndAreCounted", func(t *testing.T) {
		obs := &recordingObserver{}
		f := &fakeDB{}
		s, err := NewStore(f, StoreOptions{Options: Options{TableName: "outbox", BucketCount: 4, Clock: newStepClock(t0), Hooks: []outbox.Hook{obs}}})
		if err != nil {
			t.Fatal(err)
		}
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			return &dynamodb.QueryOutput{Items: []item{leaseItem(0, "relay-a", t0Plus5s), leaseItem(1, "relay-a", t0Plus5s)}}, nil
		}
		f.update = func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			if b := leaseBucket(in); b == 1 || b == 3 {
				return nil, refusedErr
			}
			return &dynamodb.UpdateItemOutput{}, nil
		}
		acq, err := s.acquire(context.Background(), testLease, lease.RoundState{})
		if err != nil {
			t.Fatal(err)
		}
		wantInts(t, "owned", acq.Owned, []int{0, 2})
		wantInts(t, "claimed", acq.Claimed, []int{2})
		wantInts(t, "lost", acq.Lost, []int{1})
		if acq.Refused != 2 || acq.HeartbeatRefused || acq.StandbyRank != -1 {
			t.Fatalf("acquisition %+v", acq)
		}
		if got := obs.ops(); !slices.Equal(got, []string{"refused_write:claim", "refused_write:keep"}) {
			t.Fatalf("observed %v", got)
		}
	})

	t.Run("Acquisition_RefusedHeartbeat_ClaimsNothing_AndStillKeepsWhatItHolds", func(t *testing.T) {
		var logs bytes.Buffer
		obs := &recordingObserver{}
		f := &fakeDB{}
		s, err := NewStore(f, StoreOptions{Options: Options{TableName: "outbox", BucketCount: 4, Clock: newStepClock(t0), Hooks: []outbox.Hook{obs},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
		if err != nil {
			t.Fatal(err)
		}
		f.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, refusedErr }
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			return &dynamodb.QueryOutput{Items: []item{leaseItem(0, "relay-a", t0Plus5s)}}, nil
		}
		acq, err := s.acquire(context.Background(), testLease, lease.RoundState{})
		if err != nil {
			t.Fatalf("a refused heartbeat failed the round: %v", err)
		}
		if !acq.HeartbeatRefused || acq.Refused != 1 || len(acq.Claimed) != 0 {
			t.Fatalf("acquisition %+v", acq)
		}
		wantInts(t, "owned", acq.Owned, []int{0})
		wantOps(t, f, "PutItem", "Query", "UpdateItem") // the keep; no claim
		if !strings.Contains(logs.String(), "claiming nothing") {
			t.Fatalf("no warning about the skipped claims: %q", logs.String())
		}
		if acq.Standby.Distant() {
			t.Fatal("refused heartbeat made the relay a distant standby")
		}
	})

	t.Run("Acquisition_WriteErrorsOtherThanRefusals_FailTheRound", func(t *testing.T) {
		for name, c := range map[string]struct {
			setup    func(f *fakeDB)
			wantOps  []string
			observed string
		}{
			"heartbeat throttled": {
				func(f *fakeDB) {
					f.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, throttleErr }
				},
				[]string{"PutItem"}, "throttle:heartbeat",
			},
			"coordination read throttled": {
				func(f *fakeDB) {
					f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) { return nil, throttleErr }
				},
				[]string{"PutItem", "Query"}, "throttle:coordination_read",
			},
			"claim throttled": {
				func(f *fakeDB) {
					f.update = func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, throttleErr }
				},
				[]string{"PutItem", "Query", "UpdateItem"}, "throttle:claim",
			},
		} {
			t.Run(name, func(t *testing.T) {
				obs := &recordingObserver{}
				f := &fakeDB{}
				c.setup(f)
				s, err := NewStore(f, StoreOptions{Options: Options{TableName: "outbox", BucketCount: 4, MaxConcurrency: 1, Clock: newStepClock(t0), Hooks: []outbox.Hook{obs}}})
				if err != nil {
					t.Fatal(err)
				}
				_, err = s.acquire(context.Background(), testLease, lease.RoundState{})
				var pte *types.ProvisionedThroughputExceededException
				if !errors.As(err, &pte) {
					t.Fatalf("round = %v, want the throttle", err)
				}
				wantOps(t, f, c.wantOps...)
				if got := obs.ops(); !slices.Equal(got, []string{c.observed}) {
					t.Fatalf("observed %v, want %s", got, c.observed)
				}
			})
		}
	})

	t.Run("Acquisition_PrunesOnARunsFirstRoundAndEveryTenth_AndAFailedPruneDoesNotFailTheRound", func(t *testing.T) {
		var logs bytes.Buffer
		clock := newStepClock(t0)
		f := &fakeDB{}
		s, err := NewStore(f, StoreOptions{Options: Options{TableName: "outbox", BucketCount: 1, Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
		if err != nil {
			t.Fatal(err)
		}
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			dead := lease.Ticks(clock.Now().Add(-11 * fleetLease))
			return &dynamodb.QueryOutput{Items: []item{relayItem("relay-dead", itoa(dead), false)}}, nil
		}
		f.delete = func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) { return nil, throttleErr }
		var pruned []int
		run := &relayRun{s: s}
		for round := 1; round <= 21; round++ {
			clock.Set(t0.Add(time.Duration(round) * fleetRenew))
			before := f.count("DeleteItem")
			if _, err := run.acquire(context.Background(), lease.Request{RelayID: "relay-a", BucketCount: 1, LeaseDuration: fleetLease}); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if f.count("DeleteItem") > before {
				pruned = append(pruned, round)
			}
		}
		wantInts(t, "pruning rounds", pruned, []int{1, 10, 20})
		if !strings.Contains(logs.String(), "pruning a stale heartbeat record failed") {
			t.Fatalf("failed prune not logged: %q", logs.String())
		}
	})

	t.Run("Acquisition_DistantStandby_RestsEveryOtherRound_OnlyWithTheDefaultRatio", func(t *testing.T) {
		for name, c := range map[string]struct {
			lease time.Duration
			want  []int // requests per round
		}{
			"L 30 s, I 10 s: every other round": {30 * time.Second, []int{2, 0, 2, 0, 2, 0}},
			"L 20 s, I 10 s: 2I >= 0.75 L":      {20 * time.Second, []int{2, 2, 2, 2, 2, 2}},
		} {
			t.Run(name, func(t *testing.T) {
				clock := newStepClock(t0)
				f := &fakeDB{}
				s, err := NewStore(f, StoreOptions{Options: Options{TableName: "outbox", BucketCount: 1, Clock: clock}})
				if err != nil {
					t.Fatal(err)
				}
				f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
					now := clock.Now()
					return &dynamodb.QueryOutput{Items: []item{
						leaseItem(0, "pod-a", itoa(lease.Ticks(now.Add(c.lease)))),
						relayItem("pod-a", itoa(lease.Ticks(now)), false),
						relayItem("pod-b", itoa(lease.Ticks(now)), false),
					}}, nil
				}
				var got []int
				run := &relayRun{s: s}
				for round := range 6 {
					clock.Set(t0.Add(time.Duration(round) * fleetRenew))
					before := len(f.ops())
					acq, err := run.acquire(context.Background(), lease.Request{RelayID: "pod-c", BucketCount: 1, LeaseDuration: c.lease})
					if err != nil {
						t.Fatal(err)
					}
					// pod-b is first in line for the one bucket; pod-c is behind it.
					if acq.StandbyRank != 1 || len(acq.Owned) != 0 || acq.Rested != (len(f.ops()) == before) {
						t.Fatalf("round %d: %+v", round, acq)
					}
					got = append(got, len(f.ops())-before)
				}
				wantInts(t, "requests per round", got, c.want)
			})
		}
	})

	t.Run("Release_RepeatsForAStragglerThatTakesABucketBack_AndStillGivesUpInTheEnd", func(t *testing.T) {
		s, f, _ := shapeStore(t, 4)
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			// A claim of the round the stop cancelled keeps landing.
			return &dynamodb.QueryOutput{Items: []item{leaseItem(1, "relay-a", t0Plus5s), leaseItem(2, "relay-a", t0Plus5s)}}, nil
		}
		rel, err := s.ReleaseLeases(context.Background(), testLease.RelayID)
		if err != nil {
			t.Fatal(err)
		}
		if !rel.Unfinished || !slices.Equal(rel.Released, []int{1, 2}) {
			t.Fatalf("release %+v", rel)
		}
		counts := map[string]int{}
		for _, op := range f.ops() {
			counts[op]++
		}
		if counts["PutItem"] != 1 || counts["Query"] != 3 || counts["UpdateItem"] != 6 {
			t.Fatalf("requests %v, want 1 PutItem, 3 Query, 6 UpdateItem", counts)
		}
	})

	t.Run("Release_StampsTheRelayStopped_BeforeItTouchesALease", func(t *testing.T) {
		s, f, _ := shapeStore(t, 4)
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			return &dynamodb.QueryOutput{Items: []item{leaseItem(1, "relay-a", t0Plus5s), leaseItem(2, "relay-b", t0Plus5s)}}, nil
		}
		f.update = func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, throttleErr }
		if _, err := s.ReleaseLeases(context.Background(), testLease.RelayID); err == nil {
			t.Fatal("a failed lease write did not fail the release")
		}
		wantOps(t, f, "PutItem", "Query", "UpdateItem")
	})

	t.Run("Renewal_RefusedLeaseMeansFalse_AndNoHeartbeat", func(t *testing.T) {
		s, f, _ := shapeStore(t, 4)
		f.update = func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			if leaseBucket(in) == 2 {
				return nil, refusedErr
			}
			return &dynamodb.UpdateItemOutput{}, nil
		}
		if ok, err := s.renew(context.Background(), testLease, []int{1, 2}); ok || err != nil {
			t.Fatalf("renewal = %v, %v", ok, err)
		}
		wantOps(t, f, "UpdateItem", "UpdateItem")

		// All renewed: a refused heartbeat is ignored, a failing one is returned.
		f.reset()
		f.update = nil
		f.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, refusedErr }
		if ok, err := s.renew(context.Background(), testLease, []int{1}); !ok || err != nil {
			t.Fatalf("renewal with a refused heartbeat = %v, %v", ok, err)
		}
		f.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, throttleErr }
		if ok, err := s.renew(context.Background(), testLease, []int{1}); ok || err == nil {
			t.Fatalf("renewal with a throttled heartbeat = %v, %v", ok, err)
		}
	})

	t.Run("ReadCoordination_IsOneConsistentView_WithoutAWrite", func(t *testing.T) {
		s, f, _ := shapeStore(t, 4)
		f.query = func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			return &dynamodb.QueryOutput{Items: []item{
				leaseItem(3, "relay-b", t0Plus5s),
				leaseItem(0, "relay-a", ""), // no expiry: free
				{"PK": S("OUTBOX#COORDINATION"), "SK": S("LEASE#0000000011"), "Owner": S("relay-a"), "ExpiresAtUtc": N(t0Plus5s)},
				relayItem("relay-b", t0Ticks, true),
				relayItem("relay-a", t0Ticks, false),
				{"PK": S("OUTBOX#COORDINATION"), "SK": S("SOMETHING-ELSE")},
			}}, nil
		}
		view, err := s.ReadCoordination(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wantOps(t, f, "Query")
		wantShapes(t, f, "Query", coordinationQuery())
		if !view.ReadAt.Equal(t0) || len(view.Leases) != 2 || len(view.Relays) != 2 {
			t.Fatalf("view %+v", view)
		}
		if l := view.Leases[0]; l.Bucket != 0 || l.Owner != "" || !l.ExpiresAt.IsZero() {
			t.Fatalf("lease 0 %+v, want free", l)
		}
		if l := view.Leases[1]; l.Bucket != 3 || l.Owner != "relay-b" || !l.ExpiresAt.Equal(t0.Add(5*time.Second)) {
			t.Fatalf("lease 3 %+v", l)
		}
		if r := view.Relays; r[0].RelayID != "relay-a" || r[0].Stopped || r[1].RelayID != "relay-b" || !r[1].Stopped || !r[0].LastSeen.Equal(t0) {
			t.Fatalf("relays %+v", r)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
