package outboxlocal

import (
	"encoding/json"

	"github.com/spillway-dev/spillway/outbox/internal/ddblimits"
)

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
		return ddblimits.NumberSize(*v.N)
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
			n += ddblimits.NumberSize(s)
		}
		return n
	case v.BS != nil:
		n := 0
		for _, b := range v.BS {
			n += len(b)
		}
		return n
	case v.L != nil:
		n := ddblimits.CollectionOverhead
		for _, e := range v.L {
			n += ddblimits.ElementOverhead + wireValueSize(e)
		}
		return n
	case v.M != nil:
		n := ddblimits.CollectionOverhead
		for name, e := range v.M {
			n += ddblimits.ElementOverhead + len(name) + wireValueSize(e)
		}
		return n
	default:
		return len(v.B)
	}
}
