package e2e

import (
	"fmt"
	"slices"
	"testing"
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
	o := manualOpts(id)
	o.PoisonPolicy = outbox.PoisonQuarantine
	return o
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

// The park of key k's poison message applies, but its response is lost
// and every retry the SDK makes is throttled: the relay gets an error for
// a park that happened. It must not publish k's later messages as if k
// were not quarantined; the replay then delivers k in commit order.
func TestQuarantine_AParkWhoseResponseWasLost_StillHoldsTheKeyBack(t *testing.T) {
	const late = "late-topic"
	b, clock := newManual(t)
	l := newLedger()
	var msgs []outbox.Message
	for i := range 5 {
		tp := topic
		if i == 1 {
			tp = late
		}
		msgs = append(msgs, b.messageTo(t, tp, "k", 64))
	}
	b.enqueueLists(t, l, msgs)
	b.ddb.Faults.LoseResponseThenThrottle("TransactWriteItems", outboxlocal.DefaultMaxAttempts-1)
	r := b.newRig(t, quarantineOpts("relay-a"), nil)
	r.run(t, outbox.RunInput{Deadline: clock.Now().Add(time.Minute)})
	got := keyDeliveries(t, b, topic, "k")
	if !slices.Equal(got, []string{msgs[0].ID.String()}) {
		t.Fatalf("k delivered %d messages before the replay, want only its first: its second is parked", len(got))
	}

	// The topic exists and k is replayed: k arrives in commit order.
	if err := b.kafka.CreateTopic(t.Context(), late, 3); err != nil {
		t.Fatal(err)
	}
	s, err := outboxddb.NewStore(b.ddb.Client, b.opts)
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
	r.run(t, outbox.RunInput{Deadline: clock.Now().Add(time.Minute)})
	b.verify(t, l)
}

// A row that cannot be read (its Topic is gone) but whose Key can is
// parked as undecodable, and its key's later messages park behind it, in
// the relay that parked it as in any other: the key reads as the parked
// partition lists it.
func TestQuarantine_AnUndecodableRowWithAKey_QuarantinesTheKey(t *testing.T) {
	b, clock := newManual(t)
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
			"PK": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#MESSAGES#%d", outboxddb.DefaultKeyPrefix, bad.Bucket)},
			"SK": &types.AttributeValueMemberS{Value: fmt.Sprintf("%019d", bad.Sequence)},
		},
		UpdateExpression: aws.String("REMOVE Topic"),
	}); err != nil {
		t.Fatal(err)
	}
	r := b.newRig(t, quarantineOpts("relay-a"), nil)
	r.run(t, outbox.RunInput{Deadline: clock.Now().Add(time.Minute)})
	if got := keyDeliveries(t, b, topic, "k"); !slices.Equal(got, []string{stored[0].ID.String()}) {
		t.Fatalf("k delivered %d messages, want only the one before the undecodable row", len(got))
	}
	s, err := outboxddb.NewStore(b.ddb.Client, b.opts)
	if err != nil {
		t.Fatal(err)
	}
	parked, err := s.ListParked(t.Context(), bad.Bucket)
	if err != nil || len(parked) != 3 || parked[0].Reason != outbox.ParkUndecodableItem || parked[1].Reason != outbox.ParkKeyQuarantined {
		t.Fatalf("parked %+v (%v), want the undecodable row and k's 2 later messages behind it", parked, err)
	}
}
