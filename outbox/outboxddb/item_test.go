package outboxddb

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

func TestItem(t *testing.T) {
	t.Run("SortKeys_OrderAsTheirSequenceNumbers", func(t *testing.T) {
		seqs := []int64{1, 9, 10, 99, 100, 1_000_000, math.MaxInt64}
		var keys []string
		for _, seq := range seqs {
			sk := sequenceSortKeyOf(seq)
			if len(sk) != 19 {
				t.Fatalf("sort key %q of %d is %d characters, want 19", sk, seq, len(sk))
			}
			if back, ok := parseDigits(sk); !ok || back != seq {
				t.Fatalf("sort key %q parses to %d, %v", sk, back, ok)
			}
			keys = append(keys, sk)
		}
		if !slices.IsSorted(keys) {
			t.Fatalf("sort keys %v are not in sequence order", keys)
		}
		if got := sequenceSortKeyOf(42); got != "0000000000000000042" {
			t.Fatalf("sort key of 42 = %q", got)
		}
		if got := leaseSortKey(3); got != "LEASE#0000000003" {
			t.Fatalf("lease sort key of 3 = %q", got)
		}
	})

	t.Run("KeyPrefix_SeparatesEveryPartitionOfTwoOutboxes", func(t *testing.T) {
		k := newKeys(Options{PartitionKey: "pk", SortKey: "sk", KeyPrefix: "ORDERS"})
		for got, want := range map[string]string{
			k.messagePartition(3):     "ORDERS#MESSAGES#3",
			k.sequencePartition(3):    "ORDERS#SEQUENCE#3",
			k.coordinationPartition(): "ORDERS#COORDINATION",
			k.messagePartition(12):    "ORDERS#MESSAGES#12",
		} {
			if got != want {
				t.Errorf("partition %q, want %q", got, want)
			}
		}
		if b, ok := k.parseMessagePartition("ORDERS#MESSAGES#12"); !ok || b != 12 {
			t.Errorf("parse = %d, %v", b, ok)
		}
		for _, foreign := range []string{"BILLING#MESSAGES#1", "ORDERS#MESSAGES#", "ORDERS#MESSAGES#-1", "ORDERS#SEQUENCE#1"} {
			if _, ok := k.parseMessagePartition(foreign); ok {
				t.Errorf("%q parsed as a message partition of ORDERS", foreign)
			}
		}
	})

	t.Run("Message_RoundTripsThroughItsItem", func(t *testing.T) {
		k := newKeys(Options{}.WithDefaults())
		id := outbox.NewMessageID()
		p := int32(7)
		created := time.Date(2026, 9, 1, 10, 0, 0, 123456700, time.FixedZone("x", 3600))
		in := outbox.Stored(outbox.Message{
			ID: id, Topic: "orders", Key: []byte{}, Value: []byte("v"), Headers: []byte{1, 0, 0, 0, 0},
			Partition: &p, CreatedAt: created,
		}, 3, 42)
		it := k.encodeMessage(in, 8, reservation{first: 41, count: 3})
		if sk := it["SK"].(*types.AttributeValueMemberS).Value; sk != "0000000000000000042" {
			t.Fatalf("sort key %q", sk)
		}
		if pk := it["PK"].(*types.AttributeValueMemberS).Value; pk != "OUTBOX#MESSAGES#3" {
			t.Fatalf("partition key %q", pk)
		}
		if bc := it["BucketCount"].(*types.AttributeValueMemberN).Value; bc != "8" {
			t.Fatalf("bucket count %q", bc)
		}
		if got := it["MessageId"].(*types.AttributeValueMemberS).Value; got != strings.ToLower(id.String()) {
			t.Fatalf("message id %q", got)
		}
		out, err := k.decodeMessage(it, 3)
		if err != nil {
			t.Fatal(err)
		}
		if out.ID != id || out.Topic != "orders" || out.Key == nil || len(out.Key) != 0 || !bytes.Equal(out.Value, []byte("v")) ||
			!bytes.Equal(out.Headers, in.Headers) || *out.Partition != 7 || out.Bucket() != 3 || out.Sequence() != 42 {
			t.Fatalf("decoded %+v", out)
		}
		// The offset is dropped: the instant survives, in UTC.
		if !out.CreatedAt.Equal(created) || out.CreatedAt.Location() != time.UTC {
			t.Fatalf("created %v, want %v in UTC", out.CreatedAt, created)
		}
	})

	t.Run("NullPayloads_AreAbsentAttributes", func(t *testing.T) {
		k := newKeys(Options{}.WithDefaults())
		it := k.encodeMessage(outbox.Stored(outbox.Message{ID: outbox.NewMessageID(), Topic: "t"}, 0, 1), 8, reservation{first: 1, count: 1})
		for _, name := range []string{"Key", "Value", "Headers", "Partition"} {
			if _, ok := it[name]; ok {
				t.Errorf("%s present for a nil payload", name)
			}
		}
		out, err := k.decodeMessage(it, 0)
		if err != nil {
			t.Fatal(err)
		}
		if out.Key != nil || out.Value != nil || out.Headers != nil || out.Partition != nil {
			t.Fatalf("decoded %+v, want nil payloads", out)
		}
	})

	t.Run("DecodeMessage_MalformedItems_AreInvalidItemErrorsNamingTheKey", func(t *testing.T) {
		k := newKeys(Options{}.WithDefaults())
		good := func() map[string]types.AttributeValue {
			return k.encodeMessage(outbox.Stored(outbox.Message{ID: outbox.NewMessageID(), Topic: "t"}, 2, 5), 8, reservation{first: 5, count: 1})
		}
		for name, c := range map[string]struct {
			edit func(map[string]types.AttributeValue)
			want string
		}{
			"sort key not a number":     {func(it map[string]types.AttributeValue) { it["SK"] = S("SEQUENCE") }, "sort key"},
			"signed sort key":           {func(it map[string]types.AttributeValue) { it["SK"] = S("+000000000000000005") }, "sort key"},
			"sort key overflows int64":  {func(it map[string]types.AttributeValue) { it["SK"] = S("99999999999999999999") }, "sort key"},
			"sort key missing":          {func(it map[string]types.AttributeValue) { delete(it, "SK") }, "sort key"},
			"message id missing":        {func(it map[string]types.AttributeValue) { delete(it, "MessageId") }, "MessageId"},
			"message id not a GUID":     {func(it map[string]types.AttributeValue) { it["MessageId"] = S("nope") }, "MessageId"},
			"message id of wrong type":  {func(it map[string]types.AttributeValue) { it["MessageId"] = N("1") }, "MessageId"},
			"topic missing":             {func(it map[string]types.AttributeValue) { delete(it, "Topic") }, "Topic"},
			"topic empty":               {func(it map[string]types.AttributeValue) { it["Topic"] = S("") }, "Topic"},
			"created missing":           {func(it map[string]types.AttributeValue) { delete(it, "CreatedAtUtc") }, "CreatedAtUtc"},
			"created not an integer":    {func(it map[string]types.AttributeValue) { it["CreatedAtUtc"] = N("1.5") }, "CreatedAtUtc"},
			"partition beyond int32":    {func(it map[string]types.AttributeValue) { it["Partition"] = N("2147483648") }, "Partition"},
			"partition below int32":     {func(it map[string]types.AttributeValue) { it["Partition"] = N("-2147483649") }, "Partition"},
			"partition not a number":    {func(it map[string]types.AttributeValue) { it["Partition"] = S("3") }, "Partition"},
			"key of wrong type":         {func(it map[string]types.AttributeValue) { it["Key"] = S("k") }, "Key"},
			"value of wrong type":       {func(it map[string]types.AttributeValue) { it["Value"] = N("1") }, "Value"},
			"headers of the wrong type": {func(it map[string]types.AttributeValue) { it["Headers"] = S("h") }, "Headers"},
		} {
			t.Run(name, func(t *testing.T) {
				it := good()
				c.edit(it)
				_, err := k.decodeMessage(it, 2)
				var inv *InvalidItemError
				if !errors.Is(err, outbox.ErrInvalidItem) || !errors.As(err, &inv) {
					t.Fatalf("decode = %v, want an invalid-item error", err)
				}
				if inv.PartitionKey != "OUTBOX#MESSAGES#2" || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "OUTBOX#MESSAGES#2") {
					t.Fatalf("error %q does not name the item and %s", err, c.want)
				}
			})
		}
	})

	t.Run("CheckBucketCount_OnlyAStampThatDiffers", func(t *testing.T) {
		k := newKeys(Options{}.WithDefaults())
		it := k.encodeMessage(outbox.Stored(outbox.Message{ID: outbox.NewMessageID(), Topic: "t"}, 2, 5), 16, reservation{first: 5, count: 1})
		err := k.checkBucketCount(it, 2, 8)
		if !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), "16") || !strings.Contains(err.Error(), "bucket 2") {
			t.Fatalf("check = %v, want a misconfiguration naming bucket 2 and count 16", err)
		}
		// One sentence: the sequence number is not called a message, and
		// no advice to relay with the writer's count (a drain with another
		// count leaves lease items beyond the table's).
		var se *StampError
		if !errors.As(err, &se) || *se != (StampError{Bucket: 2, Sequence: 5, Stamped: 16, BucketCount: 8}) ||
			!strings.Contains(err.Error(), "sequence number 5") || strings.Contains(err.Error(), "--bucket-count") || strings.Count(err.Error(), ". ") > 0 {
			t.Fatalf("check = %#v (%v), want the StampError of bucket 2, sequence number 5, in one sentence", err, err)
		}
		for _, stamp := range []types.AttributeValue{nil, N("8"), N("eight"), S("16")} {
			delete(it, "BucketCount")
			if stamp != nil {
				it["BucketCount"] = stamp
			}
			if err := k.checkBucketCount(it, 2, 8); err != nil {
				t.Fatalf("stamp %v: %v", canon(stamp), err)
			}
		}
	})

	t.Run("Size_CountsNamesAndValuesAsDynamoDBDoes", func(t *testing.T) {
		it := map[string]types.AttributeValue{
			"PK":  S("abc"),          // 2 + 3
			"Key": B([]byte{1, 2}),   // 3 + 2
			"N1":  N("12345"),        // 2 + 3 + 1
			"N2":  N("-0.0012300"),   // 2 + 2 + 1 + 1
			"N3":  N("100000000000"), // 2 + 1 + 1
		}
		if got := ItemSize(it); got != 5+5+6+6+4 {
			t.Fatalf("item size %d, want %d", got, 5+5+6+6+4)
		}
	})
}

// FuzzDecodeMessage feeds arbitrary attribute maps to the decoder: it must
// return a message or an invalid-item error, never panic, and a message it
// returns must have what every published record needs.
func FuzzDecodeMessage(f *testing.F) {
	f.Add("0000000000000000042", "d9b2d63d-a233-4123-847a-76838bf2413a", "orders", "639238464000000000", "7", []byte("k"), uint8(0))
	f.Add("x", "", "", "", "", []byte(nil), uint8(255))
	f.Add("1", "{D9B2D63D-A233-4123-847A-76838BF2413A}", "t", "-1", "2147483648", []byte{}, uint8(7))
	k := newKeys(Options{}.WithDefaults())
	f.Fuzz(func(t *testing.T, sk, id, topic, created, partition string, payload []byte, mask uint8) {
		it := map[string]types.AttributeValue{}
		// Each bit of mask drops an attribute or swaps its type, so the
		// fuzzer reaches missing and mistyped attributes too.
		put := func(bit uint8, name string, v, other types.AttributeValue) {
			switch {
			case mask&(1<<bit) == 0:
				it[name] = v
			case mask&(1<<((bit+4)%8)) == 0:
				it[name] = other
			}
		}
		put(0, "SK", S(sk), N(sk))
		put(1, "MessageId", S(id), B([]byte(id)))
		put(2, "Topic", S(topic), N(topic))
		put(3, "CreatedAtUtc", N(created), S(created))
		put(4, "Partition", N(partition), S(partition))
		put(5, "Key", B(payload), S(string(payload)))
		put(6, "Value", B(payload), nil)
		put(7, "Headers", B(payload), &types.AttributeValueMemberNULL{Value: true})
		if it["Value"] == nil {
			delete(it, "Value")
		}
		m, err := k.decodeMessage(it, 1)
		if err != nil {
			if !errors.Is(err, outbox.ErrInvalidItem) {
				t.Fatalf("error %v is not an invalid-item error", err)
			}
			return
		}
		if m.Topic == "" || m.Sequence() < 0 || m.Bucket() != 1 {
			t.Fatalf("decoded an incomplete message %+v", m)
		}
	})
}
