package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func quarantineOpts(id string) outbox.RelayOptions {
	o := testOpts(id)
	o.PoisonPolicy = outbox.PoisonQuarantine
	return o
}

// late is a topic the tests create only after the relay failed to publish
// to it, which makes a message for it poison until then.
const late = "late-topic"

// enqueueKeyWithPoison commits n messages of key "k" in order, the poison-th
// of them for the late topic, and returns them.
func enqueueKeyWithPoison(t *testing.T, b *backend, l *ledger, n, poison int) []outbox.Message {
	t.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		tp := topic
		if i == poison {
			tp = late
		}
		msgs[i] = b.messageTo(t, tp, "k", 64)
	}
	b.enqueueLists(t, l, msgs)
	return msgs
}

// keyDeliveries lists the message ids of key's records on tp, in offset
// order.
func keyDeliveries(t *testing.T, b *backend, tp, key string) []string {
	t.Helper()
	var out []string
	for _, r := range outboxtest.ConsumeAll(t, b.kafka, tp) {
		if string(r.Key) == key {
			out = append(out, string(r.Headers[len(r.Headers)-1].Value))
		}
	}
	return out
}

func TestQuarantineOrder(t *testing.T) {
	// The park of key k's poison message applies, but its response is lost
	// and every retry the SDK makes is throttled: the relay gets an error for
	// a park that happened. It must not publish k's later messages as if k
	// were not quarantined; the replay then delivers k in commit order.
	t.Run("AParkWhoseResponseWasLost_StillHoldsTheKeyBack", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := newLedger()
			msgs := enqueueKeyWithPoison(t, b, l, 5, 1)
			b.ddb.Faults.LoseResponseThenThrottle("TransactWriteItems", outboxlocal.DefaultMaxAttempts-1)
			r := b.newRig(t, quarantineOpts("relay-a"), nil)
			r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			got := keyDeliveries(t, b, topic, "k")
			if !slices.Equal(got, []string{msgs[0].ID.String()}) {
				t.Fatalf("k delivered %d messages before the replay, want only its first: its second is parked", len(got))
			}

			// The topic exists and k is replayed: k arrives in commit order.
			if err := b.kafka.CreateTopic(t.Context(), late, 3); err != nil {
				t.Fatal(err)
			}
			s, err := outboxddb.NewStore(b.ddb.Client, outboxddb.StoreOptions{Options: b.opts})
			if err != nil {
				t.Fatal(err)
			}
			parked, err := s.ListParked(t.Context())
			if err != nil || len(parked) != 4 {
				t.Fatalf("parked %d (%v), want k's last 4", len(parked), err)
			}
			if _, err := s.RequestReplay(t.Context(), parked, ""); err != nil {
				t.Fatal(err)
			}
			r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			b.verify(t, l)
		})
	})

	// A row that cannot be read (its Topic is gone) but whose Key can is
	// parked as undecodable, and its key's later messages park behind it, in
	// the relay that parked it as in any other: the key reads as the parked
	// partition lists it.
	t.Run("AnUndecodableRowWithAKey_QuarantinesTheKey", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			var msgs []outbox.Message
			for range 4 {
				msgs = append(msgs, b.messageTo(t, topic, "k", 64))
			}
			stored, err := b.writer.EnqueueBatch(t.Context(), msgs)
			if err != nil {
				t.Fatal(err)
			}
			bad := stored[1]
			if _, err := b.ddb.Client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
				TableName: aws.String(b.opts.TableName),
				Key: map[string]types.AttributeValue{
					"PK": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#MESSAGES#%d", outboxddb.DefaultKeyPrefix, bad.Bucket())},
					"SK": &types.AttributeValueMemberS{Value: fmt.Sprintf("%019d", bad.Sequence())},
				},
				UpdateExpression: aws.String("REMOVE Topic"),
			}); err != nil {
				t.Fatal(err)
			}
			r := b.newRig(t, quarantineOpts("relay-a"), nil)
			r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			if got := keyDeliveries(t, b, topic, "k"); !slices.Equal(got, []string{stored[0].ID.String()}) {
				t.Fatalf("k delivered %d messages, want only the one before the undecodable row", len(got))
			}
			s, err := outboxddb.NewStore(b.ddb.Client, outboxddb.StoreOptions{Options: b.opts})
			if err != nil {
				t.Fatal(err)
			}
			parked, err := s.ListParked(t.Context(), bad.Bucket())
			if err != nil || len(parked) != 3 || parked[0].Reason != outbox.ParkUndecodableItem || parked[1].Reason != outbox.ParkKeyQuarantined {
				t.Fatalf("parked %+v (%v), want the undecodable row and k's 2 later messages behind it", parked, err)
			}
		})
	})

	// A replay interrupted at any point and run again keeps the key's order
	// and loses nothing: the operator's marking stops after 10 of 30 messages
	// (before the bucket's request is raised), more messages of the key are
	// committed, the relay publishes the marked prefix and parks the new ones
	// behind the rest; the replay is run again, and the relay's first delete of
	// the replayed messages fails, so it publishes them again (duplicates, not
	// a reorder).
	t.Run("AnInterruptedReplayRunAgain_KeepsTheKeysOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := newLedger()
			enqueueKeyWithPoison(t, b, l, 30, 0)
			r := b.newRig(t, quarantineOpts("relay-a"), nil)
			r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			if err := b.kafka.CreateTopic(t.Context(), late, 3); err != nil {
				t.Fatal(err)
			}
			operator, err := outboxddb.NewStore(&failingUpdates{Client: b.ddb.Client, n: 10}, outboxddb.StoreOptions{Options: b.opts})
			if err != nil {
				t.Fatal(err)
			}
			parked, err := operator.ListParked(t.Context())
			if err != nil || len(parked) != 30 {
				t.Fatalf("parked %d (%v), want the key's 30", len(parked), err)
			}
			if n, err := operator.RequestReplay(t.Context(), parked, ""); n != 10 || err == nil {
				t.Fatalf("interrupted replay marked %d (%v), want 10 and the interruption", n, err)
			}
			var later []outbox.Message
			for range 5 {
				later = append(later, b.messageTo(t, topic, "k", 64))
			}
			b.enqueueLists(t, l, later)
			r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			if got := keyDeliveries(t, b, topic, "k"); len(got) != 9 {
				t.Fatalf("k delivered %d messages to %s after the interrupted replay, want the 9 marked ones after the first", len(got), topic)
			}

			s, err := outboxddb.NewStore(b.ddb.Client, outboxddb.StoreOptions{Options: b.opts})
			if err != nil {
				t.Fatal(err)
			}
			if parked, err = s.ListParked(t.Context()); err != nil || len(parked) != 25 {
				t.Fatalf("parked %d (%v), want the 20 unmarked and the 5 later ones", len(parked), err)
			}
			if _, err := s.RequestReplay(t.Context(), parked, ""); err != nil {
				t.Fatal(err)
			}
			b.ddb.Faults.ThrottleNext("BatchWriteItem", outboxlocal.DefaultMaxAttempts)
			r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			d := b.verify(t, l)
			if d.duplicates == 0 {
				t.Fatal("no duplicate: the failed delete of the replayed messages did not happen")
			}
			if parked, err = s.ListParked(t.Context()); err != nil || len(parked) != 0 {
				t.Fatalf("parked %d (%v), want none", len(parked), err)
			}
		})
	})
}

// failingUpdates fails every UpdateItem after the first n.
type failingUpdates struct {
	outboxddb.Client
	n int
}

func (c *failingUpdates) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.n == 0 {
		return nil, errors.New("interrupted")
	}
	c.n--
	return c.Client.UpdateItem(ctx, in, optFns...)
}
