package outboxlocal

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's published item sizing: an item is the sum of its attribute
// names (UTF-8 bytes) and values. Strings count their UTF-8 bytes, binaries
// their bytes, numbers about one byte per two significant digits plus one,
// BOOL and NULL one byte, sets the sum of their elements, and lists and maps
// three bytes of overhead plus one byte per element on top of the elements
// (and, for maps, the element names).
const (
	collectionOverhead = 3
	elementOverhead    = 1
	// MaxItemSize is DynamoDB's item size limit (400 KB).
	MaxItemSize = 400 * 1024
	// MaxTransactionBytes is DynamoDB's limit on the aggregate size of a
	// transaction's items (4 MB).
	MaxTransactionBytes = 4 * 1024 * 1024
	// MaxTransactionActions is DynamoDB's limit on actions per transaction.
	MaxTransactionActions = 100
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
		return numberSize(v.Value)
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
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := collectionOverhead
		for _, e := range v.Value {
			n += elementOverhead + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := collectionOverhead
		for name, e := range v.Value {
			n += elementOverhead + len(name) + ValueSize(e)
		}
		return n
	default:
		return 0
	}
}

// numberSize approximates a number's stored size: leading and trailing zeros
// are not stored, two significant digits share a byte, one byte is added,
// and a negative sign costs one more.
func numberSize(s string) int {
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

// wireValue is one attribute value as the DynamoDB JSON protocol carries it.
type wireValue struct {
	S    *string                    `json:"S"`
	N    *string                    `json:"N"`
	B    []byte                     `json:"B"`
	BOOL *bool                      `json:"BOOL"`
	NULL *bool                      `json:"NULL"`
	SS   []string                   `json:"SS"`
	NS   []string                   `json:"NS"`
	BS   [][]byte                   `json:"BS"`
	L    []json.RawMessage          `json:"L"`
	M    map[string]json.RawMessage `json:"M"`
}

// wireItemSize sizes an item in wire form; malformed values count as zero
// bytes, since the server rejects them anyway.
func wireItemSize(item map[string]json.RawMessage) int {
	n := 0
	for name, raw := range item {
		n += len(name) + wireValueSize(raw)
	}
	return n
}

func wireValueSize(raw json.RawMessage) int {
	var v wireValue
	if json.Unmarshal(raw, &v) != nil {
		return 0
	}
	switch {
	case v.S != nil:
		return len(*v.S)
	case v.N != nil:
		return numberSize(*v.N)
	case v.BOOL != nil, v.NULL != nil:
		return 1
	case v.SS != nil:
		n := 0
		for _, s := range v.SS {
			n += len(s)
		}
		return n
	case v.NS != nil:
		n := 0
		for _, s := range v.NS {
			n += numberSize(s)
		}
		return n
	case v.BS != nil:
		n := 0
		for _, b := range v.BS {
			n += len(b)
		}
		return n
	case v.L != nil:
		n := collectionOverhead
		for _, e := range v.L {
			n += elementOverhead + wireValueSize(e)
		}
		return n
	case v.M != nil:
		n := collectionOverhead
		for name, e := range v.M {
			n += elementOverhead + len(name) + wireValueSize(e)
		}
		return n
	default:
		return len(v.B)
	}
}
