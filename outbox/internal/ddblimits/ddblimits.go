// Package ddblimits is DynamoDB's limits on one write and its item sizing
// rules, written once for the store (outboxddb), which checks what it
// sends, and the embedded server (outboxlocal), which refuses what the
// service would.
package ddblimits

import (
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's limits on what one write may carry.
const (
	// MaxItemSize is the item size limit (400 KB) in bytes.
	MaxItemSize = 400 * 1024
	// MaxTransactionSize is the limit on the aggregate size of one
	// transaction's items (4 MB) in bytes.
	MaxTransactionSize = 4 * 1024 * 1024
	// MaxTransactionItems is the limit on the actions of one transaction.
	MaxTransactionItems = 100
)

// DynamoDB's published item sizing: an item is the sum of its attribute
// names (UTF-8 bytes) and values. Strings count their UTF-8 bytes, binaries
// their bytes, numbers about one byte per two significant digits plus one,
// BOOL and NULL one byte, sets the sum of their elements, and lists and maps
// three bytes of overhead plus one byte per element on top of the elements
// (and, for maps, the element names). Numbers are approximate by DynamoDB's
// own account, so an item within a few bytes of a limit may be judged
// differently by the service.
const (
	// CollectionOverhead is what a list or map adds to its elements.
	CollectionOverhead = 3
	// ElementOverhead is what each element of a list or map adds.
	ElementOverhead = 1
)

// ItemSize returns the size DynamoDB bills and limits for item.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize returns the size of one attribute value, without its name.
func ValueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += NumberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := CollectionOverhead
		for _, e := range v.Value {
			n += ElementOverhead + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := CollectionOverhead
		for name, e := range v.Value {
			n += ElementOverhead + len(name) + ValueSize(e)
		}
		return n
	default:
		return 0
	}
}

// NumberSize approximates a number's stored size: leading and trailing zeros
// are not stored, two significant digits share a byte, one byte is added,
// and a negative sign costs one more.
func NumberSize(s string) int {
	s = strings.TrimSpace(s)
	negative := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.ReplaceAll(s, ".", "")
	// Leading and trailing zeros are not significant (1000 is stored as 1E3).
	digits = strings.Trim(digits, "0")
	significant := max(utf8.RuneCountInString(digits), 1)
	n := (significant+1)/2 + 1
	if negative {
		n++
	}
	return n
}
