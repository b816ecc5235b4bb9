package outboxlambda

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// checkStrictJSON refuses what encoding/json would silently change in an
// enqueue request: invalid UTF-8 and lone UTF-16 surrogate escapes in any
// string or member name (json replaces them with U+FFFD, so a replaced key
// byte would move the message to another bucket and partition), and a
// member repeated in the request or in a message (json keeps the last
// copy). Header names may repeat: headers are an ordered list and Kafka
// keeps every copy. Malformed JSON is left to the parser's own error; the
// error is a *FieldError naming where the problem is.
func checkStrictJSON(data []byte) error {
	if !json.Valid(data) {
		return nil
	}
	s := strictScanner{data: data}
	return s.value("", scopeRequest)
}

// scope says which objects of a request refuse repeated members.
type scope int

const (
	scopeRequest  scope = iota // the root: a request or a single message
	scopeMessages              // the root's "messages" array
	scopeMessage               // one message object
	scopeFree                  // headers and JSON values
)

// strictScanner walks JSON that json.Valid accepted, so it checks only what
// the grammar allows but the parser would rewrite.
type strictScanner struct {
	data []byte
	pos  int
}

func (s *strictScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

func (s *strictScanner) value(path string, sc scope) error {
	s.skipSpace()
	switch s.data[s.pos] {
	case '{':
		return s.object(path, sc)
	case '[':
		return s.array(path, sc)
	case '"':
		if problem := s.str(); problem != "" {
			return &FieldError{Field: path, Problem: problem + binaryHint(path)}
		}
		return nil
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return nil
		}
		s.pos++
	}
	return nil
}

func (s *strictScanner) object(path string, sc scope) error {
	s.pos++ // '{'
	seen := map[string]bool{}
	for {
		s.skipSpace()
		switch s.data[s.pos] {
		case '}':
			s.pos++
			return nil
		case ',':
			s.pos++
			s.skipSpace()
		}
		start := s.pos
		if problem := s.str(); problem != "" {
			return &FieldError{Field: path, Problem: "a member name " + problem}
		}
		var name string
		_ = json.Unmarshal(s.data[start:s.pos], &name) // valid: checked above
		child := name
		if path != "" {
			child = path + "." + name
		}
		if seen[name] && sc != scopeFree {
			return &FieldError{Field: child, Problem: "appears more than once in its object (JSON parsers disagree on which copy counts)"}
		}
		seen[name] = true
		s.skipSpace()
		s.pos++ // ':'
		if err := s.value(child, childScope(sc, name)); err != nil {
			return err
		}
	}
}

// binaryHint points a key or value that is not text to base64.
func binaryHint(path string) string {
	for _, f := range []string{"key", "value"} {
		if path == f || strings.HasSuffix(path, "."+f) {
			return "; send binary data base64-encoded with " + f + `Encoding "base64"`
		}
	}
	return ""
}

func childScope(sc scope, name string) scope {
	switch {
	case sc == scopeRequest && name == "messages":
		return scopeMessages
	default:
		return scopeFree
	}
}

func (s *strictScanner) array(path string, sc scope) error {
	s.pos++ // '['
	elem := scopeFree
	if sc == scopeMessages {
		elem = scopeMessage
	}
	for i := 0; ; i++ {
		s.skipSpace()
		switch s.data[s.pos] {
		case ']':
			s.pos++
			return nil
		case ',':
			s.pos++
		}
		if err := s.value(path+"["+strconv.Itoa(i)+"]", elem); err != nil {
			return err
		}
	}
}

// str consumes a string token and returns what is wrong with it, or "".
func (s *strictScanner) str() string {
	s.pos++ // opening quote
	for {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return ""
		case c == '\\' && s.data[s.pos+1] == 'u':
			if problem := s.escapedRune(); problem != "" {
				return problem
			}
		case c == '\\':
			s.pos += 2
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				return fmt.Sprintf("holds invalid UTF-8 (byte 0x%02x)", c)
			}
			s.pos += size
		}
	}
}

// escapedRune consumes a \uXXXX escape, and the low half of a surrogate
// pair after a high one; a surrogate without its other half is no
// character.
func (s *strictScanner) escapedRune() string {
	r := s.hex4(s.pos + 2)
	s.pos += 6
	switch {
	case r >= 0xdc00 && r <= 0xdfff:
		return fmt.Sprintf(`holds a lone UTF-16 surrogate \u%04x`, r)
	case r >= 0xd800 && r <= 0xdbff:
		if s.pos+6 <= len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
			if lo := s.hex4(s.pos + 2); lo >= 0xdc00 && lo <= 0xdfff {
				s.pos += 6
				return ""
			}
		}
		return fmt.Sprintf(`holds a lone UTF-16 surrogate \u%04x`, r)
	}
	return ""
}

func (s *strictScanner) hex4(at int) rune {
	v, _ := strconv.ParseUint(string(s.data[at:at+4]), 16, 32) // json.Valid checked the digits
	return rune(v)
}
