package outbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// MessageID identifies a message end to end. It holds the 16 bytes of a
// GUID in RFC 4122 order: the order of the hex digits in its text form.
//
// The zero value is the nil GUID; NewMessage treats it as "not set".
type MessageID [16]byte

// NewMessageID returns a random version 4 id drawn from crypto/rand.
func NewMessageID() MessageID {
	var id MessageID
	// crypto/rand.Read never fails on supported platforms (it aborts the
	// program instead), so there is no error to return.
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

// ParseMessageID parses a GUID in any of the syntaxes .NET's Guid.Parse
// writes: 32 hex digits ("N"), hyphenated 8-4-4-4-12 ("D"), and the
// hyphenated form inside braces ("B") or parentheses ("P"). Hex digits may be
// any case. Surrounding whitespace and the hex-literal "X" syntax are
// rejected. The error wraps ErrInvalidMessage.
func ParseMessageID(s string) (MessageID, error) {
	var id MessageID
	body := s
	switch len(s) {
	case 32:
		if err := decodeHex(id[:], s); err != nil {
			return MessageID{}, parseIDError(s, err.Error())
		}
		return id, nil
	case 38:
		if !(s[0] == '{' && s[37] == '}') && !(s[0] == '(' && s[37] == ')') {
			return MessageID{}, parseIDError(s, "38 characters but not enclosed in {} or ()")
		}
		body = s[1:37]
	case 36:
	default:
		return MessageID{}, parseIDError(s, fmt.Sprintf("length %d, want 32, 36 or 38 characters", len(s)))
	}
	// body is 8-4-4-4-12 with hyphens at 8, 13, 18 and 23.
	for _, at := range [...]int{8, 13, 18, 23} {
		if body[at] != '-' {
			return MessageID{}, parseIDError(s, fmt.Sprintf("want '-' at position %d of the hyphenated form", at))
		}
	}
	compact := body[0:8] + body[9:13] + body[14:18] + body[19:23] + body[24:36]
	if err := decodeHex(id[:], compact); err != nil {
		return MessageID{}, parseIDError(s, err.Error())
	}
	return id, nil
}

func decodeHex(dst []byte, s string) error {
	// hex.DecodeString accepts exactly the hex digits of both cases and
	// nothing else, which is the whole validation a GUID body needs.
	b, err := hex.DecodeString(s)
	if err != nil {
		return fmt.Errorf("not hex: %v", err)
	}
	copy(dst, b)
	return nil
}

func parseIDError(s, reason string) error {
	const maxEcho = 64
	if len(s) > maxEcho {
		s = s[:maxEcho] + "..."
	}
	return fmt.Errorf("%w: parse message id %q: %s", ErrInvalidMessage, s, reason)
}

// String returns the id as 36 lowercase hyphenated hex digits, the .NET "D"
// format stamped on every Kafka record.
func (id MessageID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return string(b[:])
}

// GUIDBytes returns the id in .NET's in-memory GUID order (Guid.ToByteArray):
// the first three groups little-endian, the last eight bytes as written.
// Keyless messages hash these bytes, so a Go writer places them in the same
// bucket as a .NET writer would.
func (id MessageID) GUIDBytes() [16]byte {
	g := id
	g[0], g[1], g[2], g[3] = id[3], id[2], id[1], id[0]
	g[4], g[5] = id[5], id[4]
	g[6], g[7] = id[7], id[6]
	return g
}

// IsZero reports whether id is the nil GUID (all zero bytes).
func (id MessageID) IsZero() bool { return id == MessageID{} }
