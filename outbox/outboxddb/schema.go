package outboxddb

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Item attribute names. They are part of the table contract shared with
// writers and relays in other languages: never rename them.
const (
	attrMessageID   = "MessageId"
	attrTopic       = "Topic"
	attrKey         = "Key"
	attrValue       = "Value"
	attrHeaders     = "Headers"
	attrPartition   = "Partition"
	attrCreatedAt   = "CreatedAtUtc"
	attrBucketCount = "BucketCount"
	attrSequence    = "Sequence"
	attrOwner       = "Owner"
	attrExpiresAt   = "ExpiresAtUtc"
	attrLastSeen    = "LastSeenUtc"
	attrStoppedAt   = "StoppedAtUtc"
	// attrKeepsAhead is the keep-ahead mark (lease.RelayState.KeepsAhead)
	// on a heartbeat: BOOL true, written only by relays whose rounds leave
	// leases unrenewed. Relays of other languages neither read nor write
	// it; their heartbeats replace their own record whole, without it.
	attrKeepsAhead = "KeepsAhead"
	// attrTxFirst and attrTxCount stamp a message with its transaction's
	// reservation in its bucket: the first number and how many (numbers
	// first..first+count-1, one message each, committed together). Spillway's
	// writers write both; relays of other languages ignore them, and a row
	// without them is relayed as an unstamped one (docs/protocol.md,
	// "Fetching a bucket in order").
	attrTxFirst = "TxFirst"
	attrTxCount = "TxCount"
)

// Sort-key values and prefixes of the coordination and counter items.
const (
	sequenceSortKey = "SEQUENCE"
	leasePrefix     = "LEASE#"
	relayPrefix     = "RELAY#"
)

// Expressions, verbatim from the table contract so request logs and alarms
// compare across implementations.
const (
	exprHeartbeatCondition = "attribute_not_exists(#lastSeen) OR #lastSeen <= :now"
	exprPartitionIs        = "#pk = :pk"
	exprPartitionAndPrefix = "#pk = :pk AND begins_with(#sk, :prefix)"
	exprPartitionBetween   = "#pk = :pk AND #sk BETWEEN :first AND :last"
	exprSetExpiry          = "SET #expires = :expiry"
	exprKeepCondition      = "#owner = :me AND #expires = :seen AND #expires <= :expiry"
	exprRenewCondition     = "#owner = :me AND #expires > :now AND #expires <= :expiry"
	exprRelease            = "SET #expires = :now REMOVE #owner"
	exprReleaseCondition   = "#owner = :me AND #expires = :seen"
	exprClaim              = "SET #owner = :me, #expires = :expiry"
	exprClaimCondition     = "attribute_not_exists(#owner) OR attribute_not_exists(#expires) OR #expires <= :now"
	exprPruneCondition     = "attribute_not_exists(#pk) OR #lastSeen < :dead OR (attribute_exists(#stopped) AND #lastSeen < :stopped)"
	exprReserve            = "ADD #sequence :count"
	exprMessageIsNew       = "attribute_not_exists(#pk)"
	exprProjected          = "#projected"
)

// keys builds the partition and sort keys of one outbox (one key prefix and
// one pair of key attribute names).
type keys struct {
	pk, sk string
	prefix string
}

func newKeys(o Options) keys { return keys{pk: o.PartitionKey, sk: o.SortKey, prefix: o.KeyPrefix} }

// messagePartition is {P}#MESSAGES#{b}, the bucket unpadded.
func (k keys) messagePartition(bucket int) string {
	return k.prefix + "#MESSAGES#" + strconv.Itoa(bucket)
}

// parseMessagePartition returns the bucket of a message partition key of
// this outbox.
func (k keys) parseMessagePartition(pk string) (int, bool) {
	rest, ok := strings.CutPrefix(pk, k.prefix+"#MESSAGES#")
	if !ok {
		return 0, false
	}
	n, ok := parseDigits(rest)
	if !ok || n > maxInt32 {
		return 0, false
	}
	return int(n), true
}

// sequencePartition is {P}#SEQUENCE#{b}: counters have partitions of their
// own so they do not share the messages' write capacity.
func (k keys) sequencePartition(bucket int) string {
	return k.prefix + "#SEQUENCE#" + strconv.Itoa(bucket)
}

// coordinationPartition holds every lease and heartbeat, so one consistent
// query reads them as one view.
func (k keys) coordinationPartition() string { return k.prefix + "#COORDINATION" }

func (k keys) key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{k.pk: str(pk), k.sk: str(sk)}
}

func (k keys) messageKey(bucket int, seq int64) map[string]types.AttributeValue {
	return k.key(k.messagePartition(bucket), sequenceSortKeyOf(seq))
}

func (k keys) counterKey(bucket int) map[string]types.AttributeValue {
	return k.key(k.sequencePartition(bucket), sequenceSortKey)
}

func (k keys) leaseKey(bucket int) map[string]types.AttributeValue {
	return k.key(k.coordinationPartition(), leaseSortKey(bucket))
}

func (k keys) relayKey(relayID string) map[string]types.AttributeValue {
	return k.key(k.coordinationPartition(), relayPrefix+relayID)
}

// sequenceSortKeyOf zero-pads to 19 digits so the string order of sort keys
// is the numeric order of sequence numbers (int64 max has 19 digits).
func sequenceSortKeyOf(seq int64) string { return fmt.Sprintf("%019d", seq) }

func leaseSortKey(bucket int) string { return fmt.Sprintf("%s%010d", leasePrefix, bucket) }

// parseDigits parses a plain non-negative decimal: digits only, no sign, no
// spaces, no exponent, at most int64.
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// parseLeaseSortKey returns the bucket of a lease sort key.
func parseLeaseSortKey(sk string) (int, bool) {
	rest, ok := strings.CutPrefix(sk, leasePrefix)
	if !ok {
		return 0, false
	}
	n, ok := parseDigits(rest)
	if !ok || n > maxInt32 {
		return 0, false
	}
	return int(n), true
}

const maxInt32 = 1<<31 - 1

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func names(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// stringAttr returns the S value of name.
func stringAttr(item map[string]types.AttributeValue, name string) (string, bool) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

// intAttr returns the N value of name as an integer; a missing attribute,
// another type or a non-integer number reports false.
func intAttr(item map[string]types.AttributeValue, name string) (int64, bool) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}
