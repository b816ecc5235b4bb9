package outboxlocal

import (
	"bytes"
	"encoding/base64"
	"regexp"
)

// minidyn decodes attribute values into structs whose B, L and M fields are
// `omitempty`: an empty binary, list or map loses its type, the item is
// stored with a typeless value, GetItem returns a wrong attribute and every
// later Query on the table fails. The embedded server therefore never sees
// an empty one: requests carry a fixed non-empty marker of the same type
// instead, and responses turn the marker back into the empty value.
//
// The markers are ordinary values to the server, so equality conditions
// between empty values still hold; size() and ordering comparisons on an
// empty value see the marker instead (see README.md).
var (
	// emptyBinaryMarker is what an empty B value becomes on the server.
	emptyBinaryMarker = []byte("\x00spillway:empty-binary:5f1c\x00")
	// emptyListMarker is the single element of what an empty L becomes.
	emptyListMarker = []byte("\x00spillway:empty-list:8a0e\x00")
	// emptyMapMarkerName is the single attribute of what an empty M becomes.
	emptyMapMarkerName = "spillway:empty-map:3d9b"

	emptyValuePattern = regexp.MustCompile(`\{\s*"(B|L|M)"\s*:\s*(""|\[\s*\]|\{\s*\})\s*\}`)

	wireEmptyBinary = []byte(`{"B":""}`)
	wireEmptyList   = []byte(`{"L":[]}`)
	wireEmptyMap    = []byte(`{"M":{}}`)

	serverEmptyBinary = []byte(`{"B":"` + base64.StdEncoding.EncodeToString(emptyBinaryMarker) + `"}`)
	serverEmptyList   = []byte(`{"L":[{"B":"` + base64.StdEncoding.EncodeToString(emptyListMarker) + `"}]}`)
	serverEmptyMap    = []byte(`{"M":{"` + emptyMapMarkerName + `":{"NULL":true}}}`)
)

// nullValuePattern matches an attribute value whose only member is JSON
// null, which is what the Go SDK sends for a nil B, L, M or set.
var nullValuePattern = regexp.MustCompile(`\{\s*"(S|N|B|SS|NS|BS|M|L|NULL|BOOL)"\s*:\s*null\s*\}`)

// messageEmptyValue is DynamoDB's refusal of an attribute value that holds
// no value of any type.
const messageEmptyValue = "One or more parameter values were invalid: Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"

// hasNullValue reports whether a request body holds a typeless value. The
// server would store it without a type and break later reads, as with an
// empty binary; DynamoDB refuses it (an empty binary must be sent as "").
func hasNullValue(body []byte) bool { return nullValuePattern.Match(body) }

// encodeEmptyValues replaces every empty B, L or M value of a request body
// by its marker. A JSON string cannot contain an unescaped quote, so the
// pattern only ever matches attribute values, never string content.
func encodeEmptyValues(body []byte) []byte {
	return emptyValuePattern.ReplaceAllFunc(body, func(m []byte) []byte {
		sub := emptyValuePattern.FindSubmatch(m)
		switch {
		case string(sub[1]) == "B" && string(sub[2]) == `""`:
			return serverEmptyBinary
		case string(sub[1]) == "L" && sub[2][0] == '[':
			return serverEmptyList
		case string(sub[1]) == "M" && sub[2][0] == '{':
			return serverEmptyMap
		default:
			// A mistyped value such as {"B":[]}: leave it for the
			// server to reject.
			return m
		}
	})
}

// decodeEmptyValues turns the markers of a server response back into empty
// values. The server encodes with encoding/json, so the markers come back
// byte for byte as they were sent.
func decodeEmptyValues(body []byte) []byte {
	for _, r := range [...]struct{ marker, empty []byte }{
		{serverEmptyList, wireEmptyList},
		{serverEmptyMap, wireEmptyMap},
		{serverEmptyBinary, wireEmptyBinary},
	} {
		// ReplaceAll copies even when nothing matches; pages are large.
		if bytes.Contains(body, r.marker) {
			body = bytes.ReplaceAll(body, r.marker, r.empty)
		}
	}
	return body
}
