package outboxddb

import (
	"fmt"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// InvalidItemError reports a stored item that does not follow the table
// layout. It matches outbox.ErrInvalidItem with errors.Is.
type InvalidItemError struct {
	// PartitionKey and SortKey locate the item; either is empty when the
	// item lacks it.
	PartitionKey, SortKey string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *InvalidItemError) Error() string {
	return fmt.Sprintf("outboxddb: invalid item (partition key %q, sort key %q): %s", e.PartitionKey, e.SortKey, e.Reason)
}

// Is reports whether target is outbox.ErrInvalidItem.
func (e *InvalidItemError) Is(target error) bool { return target == outbox.ErrInvalidItem }

// reservation is the block of a bucket's sequence numbers one transaction
// took: first..first+count-1, one message each.
type reservation struct{ first, count int64 }

// holds reports whether seq is one of r's numbers.
func (r reservation) holds(seq int64) bool { return seq >= r.first && seq < r.first+r.count }

// largestReservation sizes the stamp before the numbers are known: no stamp
// is larger.
var largestReservation = reservation{first: math.MaxInt64 - MaxTransactionItems, count: MaxTransactionItems}

// encodeMessage builds the message item stored under (m.Bucket, m.Sequence),
// stamped with the writer's bucket count (checkBucketCount) and with res,
// the reservation of its transaction in the bucket (stampOf).
// Nil payloads are absent attributes; empty ones are present, empty binaries,
// because a reader must tell a keyless record from an empty key.
func (k keys) encodeMessage(m outbox.Message, bucketCount int, res reservation) map[string]types.AttributeValue {
	item := k.messageKey(m.Bucket(), m.Sequence())
	item[attrMessageID] = str(m.ID.String())
	item[attrTopic] = str(m.Topic)
	item[attrCreatedAt] = num(lease.Ticks(m.CreatedAt))
	item[attrBucketCount] = num(int64(bucketCount))
	item[attrTxFirst] = num(res.first)
	item[attrTxCount] = num(res.count)
	for _, b := range []struct {
		name  string
		value []byte
	}{{attrKey, m.Key}, {attrValue, m.Value}, {attrHeaders, m.Headers}} {
		if b.value != nil {
			item[b.name] = &types.AttributeValueMemberB{Value: b.value}
		}
	}
	if m.Partition != nil {
		item[attrPartition] = num(int64(*m.Partition))
	}
	return item
}

// decodeMessage reads a message item fetched from bucket's partition. It
// never panics: whatever the item holds, a malformed one comes back as an
// *InvalidItemError naming its key.
func (k keys) decodeMessage(item map[string]types.AttributeValue, bucket int) (outbox.Message, error) {
	pk, ok := stringAttr(item, k.pk)
	if !ok {
		pk = k.messagePartition(bucket)
	}
	sk, _ := stringAttr(item, k.sk)
	invalid := func(format string, args ...any) (outbox.Message, error) {
		return outbox.Message{}, &InvalidItemError{PartitionKey: pk, SortKey: sk, Reason: fmt.Sprintf(format, args...)}
	}

	seq, ok := parseDigits(sk)
	if !ok {
		return invalid("sort key %s is not a sequence number", k.sk)
	}
	rawID, ok := stringAttr(item, attrMessageID)
	if !ok {
		return invalid("%s is missing or not a string", attrMessageID)
	}
	id, err := outbox.ParseMessageID(rawID)
	if err != nil {
		return invalid("%s %q is not a GUID", attrMessageID, rawID)
	}
	topic, ok := stringAttr(item, attrTopic)
	if !ok || topic == "" {
		return invalid("%s is missing or empty (bucket %d)", attrTopic, bucket)
	}
	created, ok := intAttr(item, attrCreatedAt)
	if !ok {
		return invalid("%s is missing or not an integer", attrCreatedAt)
	}
	m := outbox.Stored(outbox.Message{
		ID:        id,
		Topic:     topic,
		CreatedAt: lease.TimeFromTicks(created),
	}, bucket, seq)
	for _, b := range []struct {
		name string
		dst  *[]byte
	}{{attrKey, &m.Key}, {attrValue, &m.Value}, {attrHeaders, &m.Headers}} {
		v, present := item[b.name]
		if !present {
			continue
		}
		bin, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			return invalid("%s is not a binary", b.name)
		}
		// A present attribute is a real payload even when empty.
		*b.dst = append([]byte{}, bin.Value...)
	}
	if _, present := item[attrPartition]; present {
		p, ok := intAttr(item, attrPartition)
		if !ok || p < -maxInt32-1 || p > maxInt32 {
			return invalid("%s is not a 32-bit integer", attrPartition)
		}
		p32 := int32(p)
		m.Partition = &p32
	}
	return m, nil
}

// stampOf reads the reservation a row at seq is stamped with; ok is false
// for a row without the stamp (a writer of another language, or from
// before the stamp). A stamp that is not two integers naming a reservation
// of at most MaxTransactionItems numbers that holds seq is an
// *InvalidItemError: it cannot say which rows the row's transaction wrote.
func (k keys) stampOf(item map[string]types.AttributeValue, seq int64) (r reservation, ok bool, err error) {
	_, hasFirst := item[attrTxFirst]
	_, hasCount := item[attrTxCount]
	if !hasFirst && !hasCount {
		return reservation{}, false, nil
	}
	r.first, ok = intAttr(item, attrTxFirst)
	var okCount bool
	r.count, okCount = intAttr(item, attrTxCount)
	if !ok || !okCount || r.first < 1 || r.count < 1 || r.count > MaxTransactionItems || !r.holds(seq) {
		pk, _ := stringAttr(item, k.pk)
		sk, _ := stringAttr(item, k.sk)
		return reservation{}, false, &InvalidItemError{PartitionKey: pk, SortKey: sk,
			Reason: fmt.Sprintf("%s and %s must be integers naming 1 to %d numbers that hold the row's sequence %d", attrTxFirst, attrTxCount, MaxTransactionItems, seq)}
	}
	return r, true, nil
}

// StampError reports a message stamped with another bucket count than the
// reader's: its writer hashed keys over another count, so a relay stops at
// it. It matches outbox.ErrMisconfigured.
type StampError struct {
	// Bucket and Sequence locate the message.
	Bucket   int
	Sequence int64
	// Stamped is the writer's count, BucketCount the reader's.
	Stamped, BucketCount int
}

// Error implements error: one sentence naming both counts and the fix.
func (e *StampError) Error() string {
	return fmt.Sprintf("outboxddb: bucket %d holds a message written with bucket count %d at sequence number %d but this relay uses %d, so the relay stops there: "+
		"a writer of the table uses the wrong count; set it to %d, then see docs/operations.md#a-message-written-with-another-bucket-count",
		e.Bucket, e.Stamped, e.Sequence, e.BucketCount, e.BucketCount)
}

// Is reports whether target is outbox.ErrMisconfigured.
func (e *StampError) Is(target error) bool { return target == outbox.ErrMisconfigured }

// checkBucketCount enforces the writer's stamp: a message written with
// another bucket count means writers and relays hash keys to different
// buckets, which breaks per-key order and strands buckets no relay claims.
// Items without the stamp, or with one that is not an integer, are not
// checked.
func (k keys) checkBucketCount(item map[string]types.AttributeValue, bucket, bucketCount int) error {
	stamped, ok := intAttr(item, attrBucketCount)
	if !ok || stamped == int64(bucketCount) {
		return nil
	}
	sk, _ := stringAttr(item, k.sk)
	seq, _ := parseDigits(sk)
	return &StampError{Bucket: bucket, Sequence: seq, Stamped: int(min(stamped, maxInt32)), BucketCount: bucketCount}
}

// leaseRecord is one lease item as read from the coordination partition.
type leaseRecord struct {
	bucket int
	owner  string // empty when free
	// expires is the stored expiry in ticks; 0 when missing or unreadable,
	// in which case the lease counts as free whatever Owner says.
	expires int64
}

// relayRecord is one heartbeat item.
type relayRecord struct {
	id         string
	lastSeen   int64 // ticks; 0 when missing
	stopped    bool
	keepsAhead bool
}

// state is the record as the core reads it.
func (r relayRecord) state() lease.RelayState {
	return lease.RelayState{RelayID: r.id, LastSeen: timeOf(r.lastSeen), Stopped: r.stopped, KeepsAhead: r.keepsAhead}
}

// coordinationItems splits the items of the coordination partition into
// lease and relay records; anything else is ignored.
func (k keys) coordinationItems(items []map[string]types.AttributeValue) (leases []leaseRecord, relays []relayRecord) {
	for _, item := range items {
		sk, ok := stringAttr(item, k.sk)
		if !ok {
			continue
		}
		if bucket, ok := parseLeaseSortKey(sk); ok {
			l := leaseRecord{bucket: bucket}
			if expires, ok := intAttr(item, attrExpiresAt); ok {
				l.expires = expires
				l.owner, _ = stringAttr(item, attrOwner)
			}
			leases = append(leases, l)
			continue
		}
		if id, ok := strings.CutPrefix(sk, relayPrefix); ok {
			r := relayRecord{id: id}
			r.lastSeen, _ = intAttr(item, attrLastSeen)
			_, r.stopped = item[attrStoppedAt]
			if v, ok := item[attrKeepsAhead].(*types.AttributeValueMemberBOOL); ok {
				r.keepsAhead = v.Value
			}
			relays = append(relays, r)
		}
	}
	return leases, relays
}
