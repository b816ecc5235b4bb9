package outbox

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestMessageID(t *testing.T) {
	t.Parallel()
	t.Run("NewMessageID_IsRandomVersion4", func(t *testing.T) {
		t.Parallel()
		seen := make(map[MessageID]bool)
		for range 1000 {
			id := NewMessageID()
			if v := id[6] >> 4; v != 4 {
				t.Fatalf("%s: version nibble %d, want 4", id, v)
			}
			if variant := id[8] >> 6; variant != 0b10 {
				t.Fatalf("%s: variant bits %02b, want 10", id, variant)
			}
			if id.IsZero() {
				t.Fatal("random id is the nil GUID")
			}
			if seen[id] {
				t.Fatalf("duplicate random id %s", id)
			}
			seen[id] = true
			// The text form is what other relays parse back.
			back, err := ParseMessageID(id.String())
			if err != nil || back != id {
				t.Fatalf("ParseMessageID(%q) = %v, %v; want %v", id.String(), back, err, id)
			}
		}
	})

	t.Run("ParseMessageID_AcceptsEveryGUIDSyntax", func(t *testing.T) {
		t.Parallel()
		want := MessageID{0xd9, 0xb2, 0xd6, 0x3d, 0xa2, 0x33, 0x41, 0x23, 0x84, 0x7a, 0x76, 0x83, 0x8b, 0xf2, 0x41, 0x3a}
		for _, s := range []string{
			"d9b2d63d-a233-4123-847a-76838bf2413a",
			"D9B2D63D-A233-4123-847A-76838BF2413A",
			"d9B2d63D-a233-4123-847A-76838bf2413a",
			"d9b2d63da2334123847a76838bf2413a",
			"D9B2D63DA2334123847A76838BF2413A",
			"{d9b2d63d-a233-4123-847a-76838bf2413a}",
			"{D9B2D63D-A233-4123-847A-76838BF2413A}",
			"(d9b2d63d-a233-4123-847a-76838bf2413a)",
			// Guid.Parse trims surrounding white space.
			" d9b2d63d-a233-4123-847a-76838bf2413a ",
			"\t{d9b2d63d-a233-4123-847a-76838bf2413a}\r\n",
			"\u00a0d9b2d63da2334123847a76838bf2413a\u2003",
			// The "X" syntax, white space allowed anywhere.
			"{0xd9b2d63d,0xa233,0x4123,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41,0x3a}}",
			" { 0XD9B2D63D , 0xa233,0x4123, {0x84, 0x7a,0x76,0x83,0x8b,0xf2,0x41,0x3a} } ",
			"{0x00d9b2d63d,0x0a233,0x+4123,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41,0x3a}}",
		} {
			got, err := ParseMessageID(s)
			if err != nil {
				t.Errorf("ParseMessageID(%q): %v", s, err)
				continue
			}
			if got != want {
				t.Errorf("ParseMessageID(%q) = %x, want %x", s, got, want)
			}
		}
	})

	// .NET's hyphenated parser lets a group carry "+" and "0x" within its width;
	// the value is read as a number, so "0x33" in a four-digit group is 0x0033.
	t.Run("ParseMessageID_ReadsPrefixedGroupsLikeDotNet", func(t *testing.T) {
		t.Parallel()
		for in, want := range map[string]string{
			"+9b2d63d-a233-4123-847a-76838bf2413a":   "09b2d63d-a233-4123-847a-76838bf2413a",
			"d9b2d63d-0x33-+123-847a-76838bf2413a":   "d9b2d63d-0033-0123-847a-76838bf2413a",
			"{0xb2d63d-a233-4123-+0xa-76838bf2413a}": "00b2d63d-a233-4123-000a-76838bf2413a",
			"(d9b2d63d-a233-4123-847a-0X388bf2413a)": "d9b2d63d-a233-4123-847a-00388bf2413a",
		} {
			got, err := ParseMessageID(in)
			if err != nil || got.String() != want {
				t.Errorf("ParseMessageID(%q) = %s, %v; want %s", in, got, err, want)
			}
		}
	})

	t.Run("ParseMessageID_RejectsMalformed", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{
			"",
			"d9b2d63d-a233-4123-847a-76838bf2413",    // 35 chars
			"d9b2d63d-a233-4123-847a-76838bf2413a0",  // 37 chars
			"d9b2d63d_a233-4123-847a-76838bf2413a",   // wrong separator
			"d9b2d63da-233-4123-847a-76838bf2413a",   // hyphen misplaced
			"g9b2d63d-a233-4123-847a-76838bf2413a",   // not hex
			"d9b2d63da2334123847a76838bf2413z",       // not hex, N form
			"{d9b2d63d-a233-4123-847a-76838bf2413a)", // mismatched brackets
			"[d9b2d63d-a233-4123-847a-76838bf2413a]", // unknown brackets
			"d9b2d63d -a233-4123-847a-76838bf2413a",  // inner white space
			"d9b2d63d-a233-4123-847a-76838bf2413a\x00",
			"-9b2d63d-a233-4123-847a-76838bf2413a",
			"d9b2d63d-a233-4123-847a-76838bf2+13a",                                  // no prefix in the last digits
			"{0xd9b2d63d,0xa233,0x4123,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41,0x13a}}", // byte over 0xff
			"{0x1d9b2d63d,0xa233,0x4123,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41,0x3a}}", // 9 digits
			"{d9b2d63d,0xa233,0x4123,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41,0x3a}}",    // no 0x
			"{0xd9b2d63d,0xa233,0x4123,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41}}",       // 7 bytes
			"{0xd9b2d63d,0xa233,0x4123,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41,0x3a}}}", // extra brace
			"{0xd9b2d63d,0xa233,0x,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41,0x3a,0x00}}", // empty number
			strings.Repeat("a", 1000),
		} {
			id, err := ParseMessageID(s)
			if err == nil {
				t.Errorf("ParseMessageID(%q) = %s, want an error", s, id)
				continue
			}
			if !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("ParseMessageID(%q) error %v does not wrap ErrInvalidMessage", s, err)
			}
			if len(err.Error()) > 300 {
				t.Errorf("ParseMessageID error echoes %d bytes of input", len(err.Error()))
			}
		}
	})

	t.Run("StringIsLowercaseHyphenated", func(t *testing.T) {
		t.Parallel()
		id := MessageID{0x3F, 0x25, 0x04, 0xE0, 0x4F, 0x89, 0x11, 0xD3, 0x9A, 0x0C, 0x03, 0x05, 0xE8, 0x2C, 0x33, 0x01}
		if got, want := id.String(), "3f2504e0-4f89-11d3-9a0c-0305e82c3301"; got != want {
			t.Fatalf("String() = %q, want %q", got, want)
		}
		if got, want := (MessageID{}).String(), "00000000-0000-0000-0000-000000000000"; got != want {
			t.Fatalf("zero String() = %q, want %q", got, want)
		}
	})

	t.Run("GUIDBytesSwapsTheFirstThreeGroups", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct{ id, guidHex string }{
			// facts §2.1 and the keyless vectors C11-C13.
			{"00112233-4455-6677-8899-aabbccddeeff", "33221100554477668899aabbccddeeff"},
			{"3f2504e0-4f89-11d3-9a0c-0305e82c3301", "e004253f894fd3119a0c0305e82c3301"},
			{"d9b2d63d-a233-4123-847a-76838bf2413a", "3dd6b2d933a22341847a76838bf2413a"},
		} {
			id := mustParseID(t, c.id)
			g := id.GUIDBytes()
			if got := hex.EncodeToString(g[:]); got != c.guidHex {
				t.Errorf("%s GUIDBytes = %s, want %s", c.id, got, c.guidHex)
			}
		}
	})

	t.Run("IsZero", func(t *testing.T) {
		t.Parallel()
		if !(MessageID{}).IsZero() {
			t.Fatal("zero id is not IsZero")
		}
		if mustParseID(t, "00000000-0000-0000-0000-000000000001").IsZero() {
			t.Fatal("non-zero id is IsZero")
		}
		if !mustParseID(t, "00000000-0000-0000-0000-000000000000").IsZero() {
			t.Fatal("parsed nil GUID is not IsZero")
		}
	})
}

func mustParseID(t testing.TB, s string) MessageID {
	t.Helper()
	id, err := ParseMessageID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
