package outbox

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestHeaders(t *testing.T) {
	t.Parallel()
	// HeaderCodec_GoldenVectors pins codec version 1 byte for byte: every
	// vector of facts §3 and every row of testdata/header-vectors.json, in both
	// directions. Other writers and relays read and write these blobs, so a
	// change here corrupts headers across implementations.
	t.Run("HeaderCodec_GoldenVectors", func(t *testing.T) {
		t.Parallel()
		type vector struct {
			name    string
			headers []Header
			blobHex string
		}
		vectors := []vector{
			{"a=b", []Header{{"a", []byte("b")}}, "010100000001000000610100000062"},
			{"k=null", []Header{{"k", nil}}, "0101000000010000006bffffffff"},
			{"empty value", []Header{{"empty", []byte{}}}, "010100000005000000656d70747900000000"},
			{"duplicates", []Header{{"dup", []byte("one")}, {"dup", []byte("two")}}, "010200000003000000647570030000006f6e65030000006475700300000074776f"},
			{"binary and unicode", []Header{{"second", []byte{1, 2, 3, 0xff}}, {"ключ", []byte("значение")}},
				"0102000000060000007365636f6e6404000000010203ff08000000d0bad0bbd18ed18710000000d0b7d0bdd0b0d187d0b5d0bdd0b8d0b5"},
			{"trace", []Header{{"trace", []byte("abc")}}, "010100000005000000747261636503000000616263"},
		}
		var rows []struct {
			Headers []struct {
				Key      string  `json:"key"`
				ValueHex *string `json:"valueHex"`
			} `json:"headers"`
			BlobHex string `json:"blobHex"`
		}
		loadJSON(t, "header-vectors.json", &rows)
		if len(rows) != 100 {
			t.Fatalf("header-vectors.json has %d rows, want 100", len(rows))
		}
		for i, r := range rows {
			v := vector{name: fmt.Sprintf("header-vectors.json row %d", i), blobHex: r.BlobHex}
			for _, h := range r.Headers {
				hd := Header{Key: h.Key}
				if h.ValueHex != nil {
					hd.Value = mustHex(t, *h.ValueHex) // "" is an empty, non-nil value
				}
				v.headers = append(v.headers, hd)
			}
			vectors = append(vectors, v)
		}
		for _, v := range vectors {
			blob := EncodeHeaders(v.headers)
			if got := hex.EncodeToString(blob); got != v.blobHex {
				t.Errorf("%s: EncodeHeaders = %s, want %s", v.name, got, v.blobHex)
			}
			got, err := DecodeHeaders(mustHex(t, v.blobHex))
			if err != nil {
				t.Errorf("%s: DecodeHeaders: %v", v.name, err)
				continue
			}
			if !headersEqual(got, v.headers) {
				t.Errorf("%s: DecodeHeaders = %v, want %v", v.name, got, v.headers)
			}
		}
	})

	t.Run("EncodeHeaders_NoHeadersIsNoBlob", func(t *testing.T) {
		t.Parallel()
		if b := EncodeHeaders(nil); b != nil {
			t.Errorf("EncodeHeaders(nil) = %x, want nil", b)
		}
		if b := EncodeHeaders([]Header{}); b != nil {
			t.Errorf("EncodeHeaders(empty) = %x, want nil", b)
		}
	})

	t.Run("EncodeHeaders_StampsVersionAndSize", func(t *testing.T) {
		t.Parallel()
		hs := []Header{{"x", []byte("yy")}, {"", nil}, {"zzz", []byte{}}}
		b := EncodeHeaders(hs)
		if b[0] != 1 {
			t.Fatalf("version byte %d, want 1", b[0])
		}
		// size = 5 + Σ(8 + key + value), a null value adding no bytes.
		if want := 5 + (8 + 1 + 2) + (8 + 0 + 0) + (8 + 3 + 0); len(b) != want {
			t.Fatalf("blob is %d bytes, want %d", len(b), want)
		}
	})

	t.Run("DecodeHeaders_NilBlobIsNilHeaders", func(t *testing.T) {
		t.Parallel()
		hs, err := DecodeHeaders(nil)
		if hs != nil || err != nil {
			t.Fatalf("DecodeHeaders(nil) = %v, %v; want nil, nil", hs, err)
		}
	})

	t.Run("DecodeHeaders_CountZeroIsEmptyNotNil", func(t *testing.T) {
		t.Parallel()
		hs, err := DecodeHeaders([]byte{1, 0, 0, 0, 0})
		if err != nil || hs == nil || len(hs) != 0 {
			t.Fatalf("DecodeHeaders(count 0) = %#v, %v; want an empty slice", hs, err)
		}
	})

	t.Run("DecodeHeaders_AnyNegativeValueLengthIsNull", func(t *testing.T) {
		t.Parallel()
		for _, n := range []int32{-1, -2, math.MinInt32} {
			blob := []byte{1, 1, 0, 0, 0, 1, 0, 0, 0, 'k'}
			blob = binary.LittleEndian.AppendUint32(blob, uint32(n))
			hs, err := DecodeHeaders(blob)
			if err != nil || len(hs) != 1 || hs[0].Key != "k" || hs[0].Value != nil {
				t.Errorf("value length %d: DecodeHeaders = %#v, %v; want k=null", n, hs, err)
			}
		}
	})

	t.Run("DecodeHeaders_InvalidUTF8KeyIsKeptRaw", func(t *testing.T) {
		t.Parallel()
		blob := mustHex(t, "010100000002000000ff8001000000"+"76")
		hs, err := DecodeHeaders(blob)
		if err != nil {
			t.Fatalf("invalid UTF-8 key rejected: %v", err)
		}
		if hs[0].Key != "\xff\x80" || string(hs[0].Value) != "v" {
			t.Fatalf("DecodeHeaders = %q", hs)
		}
		if !bytes.Equal(EncodeHeaders(hs), blob) {
			t.Fatal("raw key bytes did not survive a round trip")
		}
	})

	t.Run("DecodeHeaders_TrailingBytesAreIgnored", func(t *testing.T) {
		t.Parallel()
		blob := append(mustHex(t, "010100000001000000610100000062"), 0xde, 0xad)
		hs, err := DecodeHeaders(blob)
		if err != nil || !headersEqual(hs, []Header{{"a", []byte("b")}}) {
			t.Fatalf("DecodeHeaders(trailing bytes) = %v, %v; want a=b", hs, err)
		}
	})

	t.Run("DecodeHeaders_ValuesDoNotOverlapOnAppend", func(t *testing.T) {
		t.Parallel()
		blob := EncodeHeaders([]Header{{"a", []byte("11")}, {"b", []byte("22")}})
		hs, err := DecodeHeaders(blob)
		if err != nil {
			t.Fatal(err)
		}
		_ = append(hs[0].Value, 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X')
		if string(hs[1].Value) != "22" || hs[1].Key != "b" {
			t.Fatalf("appending to one value overwrote the next header: %q", hs)
		}
	})

	t.Run("DecodeHeaders_Malformed", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name    string
			blobHex string
			offset  int
			reason  string
		}{
			{"empty non-nil blob", "", 0, "shorter than the 5-byte preamble"},
			{"version only", "01", 0, "shorter than the 5-byte preamble"},
			{"four bytes", "01000000", 0, "shorter than the 5-byte preamble"},
			{"unknown version 99", "630100000001000000610100000062", 0, "unknown version 99"},
			{"version 0", "000000000000", 0, "unknown version 0"},
			{"version 2", "0200000000", 0, "unknown version 2"},
			{"count int32.MaxValue (repo test)", "01ffffff7f", 1, "exceeds"},
			{"negative count", "01ffffffff", 1, "negative header count -1"},
			{"count larger than the bytes can hold", "0102000000010000006100000000", 1, "header count 2 exceeds the 1"},
			{"negative key length", "0101000000ffffffff00000000", 5, "negative key length -1"},
			{"key past the end", "0101000000090000006162630000", 9, "key of 9 bytes runs past the end (5 left)"},
			{"value past the end", "01010000000100000061050000006263", 14, "value of 5 bytes runs past the end (2 left)"},
			{"value length missing", "0101000000030000006162636465", 12, "value length runs past the end (2 bytes left)"},
			{"second header key length missing", "010200000001000000610600000061626364656600", 20, "header 1: key length runs past the end (1 bytes left)"},
		} {
			hs, err := DecodeHeaders(mustHex(t, c.blobHex))
			var hfe *HeaderFormatError
			if !errors.As(err, &hfe) {
				t.Errorf("%s: DecodeHeaders = %v, %v; want *HeaderFormatError", c.name, hs, err)
				continue
			}
			if !errors.Is(err, ErrHeaderFormat) {
				t.Errorf("%s: %v does not match ErrHeaderFormat", c.name, err)
			}
			if hs != nil {
				t.Errorf("%s: headers %v returned with an error", c.name, hs)
			}
			if hfe.Offset != c.offset || !strings.Contains(hfe.Reason, c.reason) {
				t.Errorf("%s: error at offset %d %q; want offset %d containing %q", c.name, hfe.Offset, hfe.Reason, c.offset, c.reason)
			}
		}
	})

	t.Run("HeaderFormatError_UnwrapsToTheSentinel", func(t *testing.T) {
		t.Parallel()
		err := error(&HeaderFormatError{Offset: 3, Reason: "x"})
		if errors.Unwrap(err) != ErrHeaderFormat {
			t.Fatal("Unwrap does not return ErrHeaderFormat")
		}
		if errors.Is(err, ErrInvalidMessage) {
			t.Fatal("a header format error matches ErrInvalidMessage")
		}
		if got, want := err.Error(), "outbox: malformed header blob at offset 3: x"; got != want {
			t.Fatalf("Error() = %q, want %q", got, want)
		}
	})

	t.Run("HeaderCodec_RoundTripPreservesKeysValuesAndOrder", func(t *testing.T) {
		t.Parallel()
		hs := []Header{
			{"string", []byte("value")},
			{"binary", []byte{0, 1, 2, 0xfe, 0xff}},
			{"null", nil},
			{"empty", []byte{}},
			{"ключ", []byte("значение")},
			{"dup", []byte("1")},
			{"dup", []byte("2")},
			{"", []byte("empty key")},
		}
		got, err := DecodeHeaders(EncodeHeaders(hs))
		if err != nil || !headersEqual(got, hs) {
			t.Fatalf("round trip = %v, %v; want %v", got, err, hs)
		}
	})
}

func FuzzDecodeHeaders(f *testing.F) {
	for _, s := range []string{
		"010100000001000000610100000062",
		"0101000000010000006bffffffff",
		"010200000003000000647570030000006f6e65030000006475700300000074776f",
		"01ffffff7f",
		"0100000000",
		"0101000000fe",
		"0101000000010000006bfeffffff",
		"",
	} {
		f.Add(mustHex(f, s))
	}
	f.Fuzz(func(t *testing.T, blob []byte) {
		hs, err := DecodeHeaders(blob)
		if err != nil {
			var hfe *HeaderFormatError
			if !errors.As(err, &hfe) || !errors.Is(err, ErrHeaderFormat) {
				t.Fatalf("error %v is not a *HeaderFormatError", err)
			}
			if hfe.Offset < 0 || hfe.Offset > len(blob) {
				t.Fatalf("offset %d outside a %d-byte blob", hfe.Offset, len(blob))
			}
			return
		}
		if len(hs) == 0 {
			return // count 0 re-encodes to no blob by design
		}
		// What decoded re-encodes to the bytes it came from, provided the
		// blob had no trailing bytes and wrote every null as -1 (the only
		// two freedoms the decoder allows).
		re := EncodeHeaders(hs)
		if canonical, ok := canonicalHeaderBlob(blob, len(re)); ok && !bytes.Equal(re, canonical) {
			t.Fatalf("re-encoded %x, want %x", re, canonical)
		}
		again, err := DecodeHeaders(re)
		if err != nil || !headersEqual(again, hs) {
			t.Fatalf("re-decoded %v, %v; want %v", again, err, hs)
		}
	})
}

// canonicalHeaderBlob reports whether blob is exactly what the encoder
// would write: it is re-encodable byte for byte when it has no trailing
// bytes (its length equals the re-encoding's) and no null value written as
// a negative length other than -1. It returns blob when so.
func canonicalHeaderBlob(blob []byte, encodedLen int) ([]byte, bool) {
	if len(blob) != encodedLen {
		return nil, false
	}
	count := int(binary.LittleEndian.Uint32(blob[1:]))
	o := 5
	for range count {
		o += 4 + int(binary.LittleEndian.Uint32(blob[o:]))
		n := int32(binary.LittleEndian.Uint32(blob[o:]))
		o += 4
		if n < -1 {
			return nil, false
		}
		if n > 0 {
			o += int(n)
		}
	}
	return blob, true
}

func FuzzHeadersRoundTrip(f *testing.F) {
	f.Add([]byte("a\x00b"), []byte("pattern"))
	f.Add([]byte("ключ"), []byte{})
	f.Add([]byte{}, []byte{0xff, 0, 1})
	f.Fuzz(func(t *testing.T, keys, values []byte) {
		// Derive a header list from the two inputs: keys split at NUL, each
		// header taking a prefix of values whose length and nullness come
		// from the input bytes themselves.
		var hs []Header
		for i, k := range bytes.Split(keys, []byte{0}) {
			var v []byte
			if len(values) > 0 {
				n := int(values[0]) % (len(values) + 1)
				v, values = values[:n], values[n:]
				if i%3 == 2 {
					v = nil
				}
			}
			hs = append(hs, Header{Key: string(k), Value: v})
		}
		blob := EncodeHeaders(hs)
		got, err := DecodeHeaders(blob)
		if err != nil {
			t.Fatalf("DecodeHeaders(EncodeHeaders(%q)): %v", hs, err)
		}
		if !headersEqual(got, hs) {
			t.Fatalf("round trip = %q, want %q", got, hs)
		}
	})
}

// headersEqual compares keys, value bytes and value nullness.
func headersEqual(a, b []Header) bool {
	return slices.EqualFunc(a, b, func(x, y Header) bool {
		return x.Key == y.Key && bytes.Equal(x.Value, y.Value) && (x.Value == nil) == (y.Value == nil)
	})
}
