package outbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
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

// ParseMessageID parses a GUID the way .NET's Guid.Parse does, so any id a
// .NET writer or a hand-made row can hold is read alike:
//
//   - surrounding Unicode white space is ignored;
//   - "N": 32 hex digits;
//   - "D": hyphenated 8-4-4-4-12, and "B"/"P": the same inside {} or ();
//     as in .NET a group may carry a "+" and/or "0x" prefix counted within
//     its width ("+0x4" for a four-digit group), except the last eight
//     digits;
//   - "X": {0xhhhhhhhh,0xhhhh,0xhhhh,{0xhh,0xhh,0xhh,0xhh,0xhh,0xhh,0xhh,0xhh}},
//     white space anywhere, each number with its "0x" and 1 to 8 significant
//     digits (the 16-bit fields keep their low 16 bits, as .NET does; a
//     byte field over 0xff is refused).
//
// Hex digits may be any case. The error wraps ErrInvalidMessage and names the
// syntax the input was read as.
func ParseMessageID(s string) (MessageID, error) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	if len(t) < 32 {
		return MessageID{}, parseIDError(s, fmt.Sprintf("%d characters, want at least 32", len(t)))
	}
	var (
		id  MessageID
		err error
	)
	switch {
	case t[0] == '(':
		id, err = parseEnclosed(t, '(', ')')
	case t[0] == '{' && t[9] == '-':
		id, err = parseEnclosed(t, '{', '}')
	case t[0] == '{':
		id, err = parseHexLiteral(t)
	case t[8] == '-':
		id, err = parseHyphenated(t)
	default:
		id, err = parseCompact(t)
	}
	if err != nil {
		return MessageID{}, parseIDError(s, err.Error())
	}
	return id, nil
}

// parseCompact reads the "N" syntax: exactly 32 hex digits.
func parseCompact(s string) (MessageID, error) {
	if len(s) != 32 {
		return MessageID{}, fmt.Errorf("%d characters in the 32-digit form", len(s))
	}
	var id MessageID
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return MessageID{}, errors.New("not hex")
	}
	return id, nil
}

// parseEnclosed reads the "B" and "P" syntaxes: "D" inside open and close.
func parseEnclosed(s string, open, close byte) (MessageID, error) {
	if len(s) != 38 || s[0] != open || s[37] != close {
		return MessageID{}, fmt.Errorf("want 36 characters enclosed in %c%c", open, close)
	}
	return parseHyphenated(s[1:37])
}

// parseHyphenated reads the "D" syntax, 8-4-4-4-12 hex digits.
func parseHyphenated(s string) (MessageID, error) {
	if len(s) != 36 {
		return MessageID{}, fmt.Errorf("%d characters in the hyphenated form, want 36", len(s))
	}
	for _, at := range [...]int{8, 13, 18, 23} {
		if s[at] != '-' {
			return MessageID{}, fmt.Errorf("want '-' at position %d of the hyphenated form", at)
		}
	}
	var id MessageID
	compact := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(id[:], []byte(compact)); err == nil {
		return id, nil
	}
	if !strings.ContainsAny(s, "xX+") {
		return MessageID{}, errors.New("not hex")
	}
	return parsePrefixedGroups(s)
}

// parsePrefixedGroups reads a hyphenated GUID whose groups carry "+" or "0x"
// prefixes within their widths; the last eight digits take none.
func parsePrefixedGroups(s string) (MessageID, error) {
	var id MessageID
	groups := [...]struct{ from, to, bytes int }{{0, 8, 4}, {9, 13, 2}, {14, 18, 2}, {19, 23, 2}, {24, 28, 2}}
	at := 0
	for _, g := range groups {
		v, ok, _ := parseHexNumber(s[g.from:g.to])
		if !ok {
			return MessageID{}, fmt.Errorf("group at position %d is not hex", g.from)
		}
		putBigEndian(id[at:at+g.bytes], v)
		at += g.bytes
	}
	if _, err := hex.Decode(id[12:], []byte(s[28:36])); err != nil {
		return MessageID{}, errors.New("last group is not hex")
	}
	return id, nil
}

// parseHexLiteral reads the "X" syntax.
func parseHexLiteral(s string) (MessageID, error) {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	inner, ok := strings.CutPrefix(s, "{")
	if ok {
		inner, ok = strings.CutSuffix(inner, "}}")
	}
	head, tail, found := strings.Cut(inner, ",{")
	if !ok || !found {
		return MessageID{}, errors.New(`want {0xhhhhhhhh,0xhhhh,0xhhhh,{0xhh,…}}`)
	}
	var id MessageID
	fields := strings.Split(head, ",")
	bytes := strings.Split(tail, ",")
	if len(fields) != 3 || len(bytes) != 8 {
		return MessageID{}, fmt.Errorf("%d leading numbers and %d bytes, want 3 and 8", len(fields), len(bytes))
	}
	widths := [...]int{4, 2, 2}
	at := 0
	for i, f := range fields {
		v, err := parseHexLiteralNumber(f, i)
		if err != nil {
			return MessageID{}, err
		}
		putBigEndian(id[at:at+widths[i]], v)
		at += widths[i]
	}
	for i, b := range bytes {
		v, err := parseHexLiteralNumber(b, 3+i)
		if err != nil {
			return MessageID{}, err
		}
		if v > 0xff {
			return MessageID{}, fmt.Errorf("byte %d is 0x%x, over 0xff", i, v)
		}
		id[8+i] = byte(v)
	}
	return id, nil
}

func parseHexLiteralNumber(f string, i int) (uint32, error) {
	body, ok := strings.CutPrefix(f, "0x")
	if !ok {
		body, ok = strings.CutPrefix(f, "0X")
	}
	if !ok || body == "" {
		return 0, fmt.Errorf("number %d (%.12q) lacks its 0x prefix", i+1, f)
	}
	v, ok, overflow := parseHexNumber(body)
	switch {
	case overflow:
		return 0, fmt.Errorf("number %d has more than 8 significant hex digits", i+1)
	case !ok:
		return 0, fmt.Errorf("number %d (%.12q) is not hex", i+1, f)
	}
	return v, nil
}

// parseHexNumber reads hex digits after an optional "+" and an optional
// "0x", as .NET's GUID parser does for each number. Digits beyond the
// eighth significant one report overflow; the value keeps the low 32 bits.
func parseHexNumber(s string) (v uint32, ok, overflow bool) {
	s = strings.TrimPrefix(s, "+")
	if len(s) > 1 && s[0] == '0' && (s[1]|0x20) == 'x' {
		s = s[2:]
	}
	s = strings.TrimLeft(s, "0")
	for i := 0; i < len(s); i++ {
		d, isHex := hexDigit(s[i])
		if !isHex {
			return 0, false, false
		}
		v = v<<4 | uint32(d)
	}
	return v, true, len(s) > 8
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		return c | 0x20 - 'a' + 10, true
	}
	return 0, false
}

// putBigEndian writes the low len(dst) bytes of v, most significant first.
func putBigEndian(dst []byte, v uint32) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte(v)
		v >>= 8
	}
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
