package outboxddb

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

func TestParked(t *testing.T) {
	t.Run("Park_MovesTheRowKeepingEveryAttribute_ThenMarkReplayAndDrop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t, func(o *StoreOptions) { o.CountParked = true })
			msgs := enqueue(t, w, 5, 3)
			// Park message 1 as unknown-topic, then message 3 behind it (same key
			// for the test's purpose: quarantine is by key, the store only moves).
			first := outbox.Parking{Bucket: 5, Sequence: 1, Reason: outbox.ParkUnknownTopic, Error: "UNKNOWN_TOPIC_OR_PARTITION", Attempts: 2, FirstFailedAt: t0}
			c := e.counts(func() {
				if err := s.Park(t.Context(), first); err != nil {
					t.Fatal(err)
				}
			})
			// One consistent read of the row and one transaction.
			wantRequests(t, c, map[string]int{"Query": 1, "TransactWriteItems": 1})
			if err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: 3, Reason: outbox.ParkKeyQuarantined, Behind: 1}); err != nil {
				t.Fatal(err)
			}
			// Behind a parked item that is not there: a conflict, nothing moves.
			if err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: 2, Reason: outbox.ParkKeyQuarantined, Behind: 9}); !errors.Is(err, outbox.ErrParkConflict) {
				t.Fatalf("park behind a missing item = %v, want a conflict", err)
			}
			// A row that is gone: a conflict.
			if err := s.Park(t.Context(), first); !errors.Is(err, outbox.ErrParkConflict) {
				t.Fatalf("park a parked row again = %v, want a conflict", err)
			}
			left, err := s.FetchBatch(t.Context(), 5, 10)
			if err != nil {
				t.Fatal(err)
			}
			wantInts(t, "left in the bucket", sequences(left), []int64{2})

			var set outbox.ParkedSet
			c = e.counts(func() {
				if set, err = s.ParkedKeys(t.Context(), 5); err != nil {
					t.Fatal(err)
				}
			})
			wantRequests(t, c, map[string]int{"Query": 1})
			keys := set.Keys
			if len(keys) != 2 || len(keys[string(msgs[0].Key)]) != 1 || keys[string(msgs[2].Key)][0] != 3 || len(set.Replays) != 0 {
				t.Fatalf("parked keys %+v", set)
			}
			parked, err := s.ListParked(t.Context(), 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(parked) != 2 || parked[0].MessageID != msgs[0].ID.String() || parked[0].Reason != outbox.ParkUnknownTopic ||
				parked[0].Attempts != 2 || !parked[0].FirstFailedAt.Equal(t0) || parked[0].ParkedAt.IsZero() ||
				parked[0].Error != "UNKNOWN_TOPIC_OR_PARTITION" || string(parked[0].Key) != string(msgs[0].Key) || parked[1].Sequence != 3 {
				t.Fatalf("parked %+v", parked)
			}
			bl, err := s.Backlog(t.Context())
			if err != nil || bl.Parked != 2 || bl.Pending != 1 {
				t.Fatalf("backlog %+v, %v; want 1 pending and 2 parked", bl, err)
			}

			// Mark the first for replay with another topic: one update for the
			// mark, one for the bucket's request; nothing moves.
			c = e.counts(func() {
				if n, err := s.RequestReplay(t.Context(), parked[:1], "fixed"); err != nil || n != 1 {
					t.Fatalf("request replay = %d, %v", n, err)
				}
			})
			wantRequests(t, c, map[string]int{"UpdateItem": 2})
			reqs, err := s.ReplayRequests(t.Context())
			if err != nil || len(reqs) != 1 || reqs[5] != 1 {
				t.Fatalf("replay requests %v, %v; want bucket 5's first", reqs, err)
			}
			if set, err = s.ParkedKeys(t.Context(), 5); err != nil || len(set.Replays) != 1 {
				t.Fatalf("parked set %+v, %v; want one replay", set, err)
			}
			if r := set.Replays[0]; r.ID != msgs[0].ID || r.Sequence() != 1 || r.Topic != "fixed" || string(r.Value) != string(msgs[0].Value) || string(r.Headers) != string(msgs[0].Headers) {
				t.Fatalf("replay %+v, want message 1 under its sequence with topic fixed", r)
			}
			// The relay parks nothing more behind a marked message: it replays it
			// first.
			if err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: 2, Reason: outbox.ParkKeyQuarantined, Behind: 1}); !errors.Is(err, outbox.ErrParkConflict) {
				t.Fatalf("park behind a marked message = %v, want a conflict", err)
			}
			if err := s.DeleteReplayed(t.Context(), 5, set.Replays); err != nil {
				t.Fatal(err)
			}
			if err := s.ReplayDone(t.Context(), 5, 1); err != nil {
				t.Fatal(err)
			}
			if err := s.ReplayDone(t.Context(), 5, 1); !errors.Is(err, outbox.ErrParkConflict) {
				t.Fatalf("second withdrawal = %v, want a conflict", err)
			}
			if reqs, err := s.ReplayRequests(t.Context()); err != nil || len(reqs) != 0 {
				t.Fatalf("replay requests %v, %v; want none", reqs, err)
			}
			if rest, err := s.ListParked(t.Context(), 5); err != nil || len(rest) != 1 || rest[0].Sequence != 3 {
				t.Fatalf("parked after the replay %+v, %v; want message 3", rest, err)
			}

			if err := s.DropParked(t.Context(), parked[1]); err != nil {
				t.Fatal(err)
			}
			if err := s.DropParked(t.Context(), parked[1]); !errors.Is(err, outbox.ErrParkConflict) {
				t.Fatalf("second drop = %v, want a conflict", err)
			}
			if rest, err := s.ListParked(t.Context()); err != nil || len(rest) != 0 {
				t.Fatalf("parked after replay and drop: %+v, %v", rest, err)
			}
		})
	})

	t.Run("Replay_OfAnUndecodableItem_NamesTheProblem", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t)
			if _, err := e.d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
				TableName: aws.String(e.opts.TableName),
				Item:      item{"PK": S("OUTBOX#MESSAGES#1"), "SK": S("0000000000000000001"), "MessageId": S("5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7"), "CreatedAtUtc": N("1")},
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.Park(t.Context(), outbox.Parking{Bucket: 1, Sequence: 1, Reason: outbox.ParkUndecodableItem, Error: "Topic is missing"}); err != nil {
				t.Fatal(err)
			}
			parked, err := s.ListParked(t.Context(), 1)
			if err != nil || len(parked) != 1 {
				t.Fatalf("parked %+v, %v", parked, err)
			}
			if _, err := s.RequestReplay(t.Context(), parked, ""); err != nil {
				t.Fatal(err)
			}
			set, err := s.ParkedKeys(t.Context(), 1)
			if err != nil || len(set.Replays) != 0 || !strings.Contains(set.Unreplayable[1], "Topic") {
				t.Fatalf("parked set %+v, %v; want the decoder's complaint", set, err)
			}
			if err := s.RefuseReplay(t.Context(), 1, 1, set.Unreplayable[1]); err != nil {
				t.Fatal(err)
			}
			if parked, err = s.ListParked(t.Context(), 1); err != nil || !parked[0].ReplayRequested.IsZero() || !strings.Contains(parked[0].Error, "Topic") {
				t.Fatalf("parked %+v, %v; want the mark cleared and the complaint kept", parked, err)
			}
			// With a topic the row becomes a message again.
			if _, err := s.RequestReplay(t.Context(), parked, "orders"); err != nil {
				t.Fatal(err)
			}
			if set, err = s.ParkedKeys(t.Context(), 1); err != nil || len(set.Replays) != 1 || set.Replays[0].Topic != "orders" {
				t.Fatalf("parked set %+v, %v; want the row as a message to orders", set, err)
			}
		})
	})

	// A park whose response is lost is retried by the SDK with the same
	// ClientRequestToken: DynamoDB answers the retry as the request it repeats,
	// so the relay learns the park applied instead of a conflict.
	t.Run("Park_ARetryAfterALostResponse_IsTheSameRequest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			enqueue(t, w, 5, 1)
			e.d.Faults.LoseResponse("TransactWriteItems")
			c := e.counts(func() {
				if err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: 1, Reason: outbox.ParkTooLarge}); err != nil {
					t.Fatalf("park after a lost response = %v, want success", err)
				}
			})
			wantRequests(t, c, map[string]int{"Query": 1, "TransactWriteItems": 2})
			if parked, err := s.ListParked(t.Context(), 5); err != nil || len(parked) != 1 {
				t.Fatalf("parked %+v, %v; want the row once", parked, err)
			}
		})
	})

	// Two outboxes parking the same row (bucket, sequence, message id) at the
	// same instant send different tokens: DynamoDB keeps tokens per account and
	// region, and would refuse the second park as a retry of the first with
	// other parameters. One park's token is the same on every retry.
	t.Run("ParkToken_IsTheCallsOwn_AndDiffersBetweenOutboxes", func(t *testing.T) {
		p := outbox.Parking{Bucket: 1, Sequence: 1, Reason: outbox.ParkTooLarge, Attempts: 1}
		at := &types.AttributeValueMemberN{Value: "639000000000000000"}
		orders := parkToken("orders", "OUTBOX#1", p, "", at)
		if again := parkToken("orders", "OUTBOX#1", p, "", at); again != orders {
			t.Errorf("the same park sent tokens %s and %s", orders, again)
		}
		for _, other := range [][2]string{{"billing", "OUTBOX#1"}, {"orders", "BILLING#1"}} {
			if tok := parkToken(other[0], other[1], p, "", at); tok == orders {
				t.Errorf("table %s partition %s sends the token of table orders partition OUTBOX#1: %s", other[0], other[1], tok)
			}
		}
		if n := len(orders); n > 36 {
			t.Errorf("token of %d characters, DynamoDB takes at most 36", n)
		}
	})

	// A park carries the bucket's lease into its transaction: it applies only
	// while the lease item names the parking relay and expires after the
	// margin, and a refused lease check is outbox.ErrLeaseLost (the relay
	// stops acting on the bucket), not a conflict. The check costs 2 write
	// units: the park of a small row goes from 4 to 6.
	t.Run("Park_CarriesTheLease_AndARefusedLeaseIsLeaseLost", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			enqueue(t, w, 5, 3)
			if _, err := s.acquire(t.Context(), lease.Request{RelayID: "relay-a", BucketCount: 8, LeaseDuration: fleetLease}, lease.RoundState{}); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			held := outbox.LeaseCheck{Owner: "relay-a", Beyond: now.Add(10 * time.Second)}
			var c outboxlocal.Counts
			for _, refused := range []outbox.LeaseCheck{
				{Owner: "relay-b", Beyond: now},                               // another relay's
				{Owner: "relay-a", Beyond: now.Add(fleetLease)},               // not beyond the margin
				{Owner: "relay-a", Beyond: now.Add(fleetLease + time.Second)}, // long expired by then
			} {
				c = e.counts(func() {
					err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: 1, Reason: outbox.ParkTooLarge, Lease: refused})
					if !errors.Is(err, outbox.ErrLeaseLost) || errors.Is(err, outbox.ErrParkConflict) {
						t.Fatalf("park under %+v = %v, want lease lost", refused, err)
					}
				})
			}
			if c.Refused != 1 {
				t.Fatalf("refused %d, want the transaction refused", c.Refused)
			}
			c = e.counts(func() {
				if err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: 1, Reason: outbox.ParkTooLarge, Lease: held}); err != nil {
					t.Fatal(err)
				}
			})
			wantRequests(t, c, map[string]int{"Query": 1, "TransactWriteItems": 1})
			if c.OpWriteUnits["TransactWriteItems"] != 6 {
				t.Fatalf("park write units %v, want 6 (put 2, delete 2, lease check 2)", c.OpWriteUnits["TransactWriteItems"])
			}
			left, err := s.FetchBatch(t.Context(), 5, 10)
			if err != nil {
				t.Fatal(err)
			}
			wantInts(t, "left in the bucket", sequences(left), []int64{2, 3})
		})
	})
}
