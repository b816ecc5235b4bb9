package outbox

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Header is one Kafka record header carried by a message. Duplicate keys are
// allowed and order is preserved end to end.
type Header struct {
	// Key is the header key. It travels as raw bytes; invalid UTF-8 is kept
	// as is rather than rejected, because other relays publish such rows.
	Key string
	// Value is the header value; nil is a null value, distinct from an empty
	// one.
	Value []byte
}

// headerCodecVersion is the first byte of every blob. A reader meeting any
// other value must refuse the blob rather than guess its layout.
const headerCodecVersion = 1

// headerPreamble is the version byte plus the int32 count.
const headerPreamble = 5

// EncodeHeaders encodes headers in header codec version 1: a version byte 1,
// then a little-endian int32 count, then per header an int32 key length, the
// key bytes, an int32 value length (-1 for a nil value) and the value bytes.
// It returns nil for no headers, so the store writes no attribute; a blob
// with count 0 is never produced.
//
// Keys and values longer than math.MaxInt32 bytes cannot be represented; the
// function panics on them rather than write a blob no reader can decode.
func EncodeHeaders(headers []Header) []byte {
	if len(headers) == 0 {
		return nil
	}
	size := headerPreamble
	for _, h := range headers {
		size += 8 + len(h.Key) + len(h.Value)
	}
	b := make([]byte, 0, size)
	b = append(b, headerCodecVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(int32Len(len(headers))))
	for _, h := range headers {
		b = binary.LittleEndian.AppendUint32(b, uint32(int32Len(len(h.Key))))
		b = append(b, h.Key...)
		if h.Value == nil {
			b = binary.LittleEndian.AppendUint32(b, math.MaxUint32) // int32 -1
			continue
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(int32Len(len(h.Value))))
		b = append(b, h.Value...)
	}
	return b
}

func int32Len(n int) int32 {
	if n > math.MaxInt32 {
		panic(fmt.Sprintf("outbox: EncodeHeaders: length %d exceeds the codec's int32 limit", n))
	}
	return int32(n)
}

// HeaderFormatError reports a header blob that does not decode under codec
// version 1. It matches ErrHeaderFormat with errors.Is.
type HeaderFormatError struct {
	// Offset is the byte offset in the blob where decoding failed.
	Offset int
	// Reason says what was wrong there.
	Reason string
}

// Error implements error.
func (e *HeaderFormatError) Error() string {
	return fmt.Sprintf("outbox: malformed header blob at offset %d: %s", e.Offset, e.Reason)
}

// Unwrap returns ErrHeaderFormat.
func (e *HeaderFormatError) Unwrap() error { return ErrHeaderFormat }

// Is reports whether target is ErrHeaderFormat.
func (e *HeaderFormatError) Is(target error) bool { return target == ErrHeaderFormat }

// decodeHook, when set, is called by every DecodeHeaders call given a
// blob. Only tests set it, before the code they drive starts, to count the
// decodes of a relayed batch: one per fetched blob (Message.DecodedHeaders).
var decodeHook func()

// DecodeHeaders decodes a header codec version 1 blob. A nil blob decodes to
// nil headers; a blob with count 0 decodes to an empty, non-nil slice.
//
// Decoding is total: it never panics and never allocates more than the blob
// can describe. Every malformation is a *HeaderFormatError: a version byte
// other than 1, a blob shorter than 5 bytes (an empty non-nil blob included),
// a negative count, a count larger than (len(blob)-5)/8, a negative key
// length, and a key or value running past the end. Any negative value length
// decodes as a nil (null) value, not only -1. Bytes after the last header are
// ignored, as the .NET reader ignores them, so a row other relays publish is
// never poison here. Keys are taken byte for byte, valid UTF-8 or not.
//
// Values alias blob: callers that modify blob afterwards must copy them.
// Each value's capacity ends at its length, so appending to one never
// overwrites its neighbour.
func DecodeHeaders(blob []byte) ([]Header, error) {
	if blob == nil {
		return nil, nil
	}
	if decodeHook != nil {
		decodeHook()
	}
	if len(blob) < headerPreamble {
		return nil, &HeaderFormatError{Offset: 0, Reason: fmt.Sprintf("blob is %d bytes, shorter than the 5-byte preamble", len(blob))}
	}
	if blob[0] != headerCodecVersion {
		return nil, &HeaderFormatError{Offset: 0, Reason: fmt.Sprintf("unknown version %d", blob[0])}
	}
	count := int32(binary.LittleEndian.Uint32(blob[1:]))
	if count < 0 {
		return nil, &HeaderFormatError{Offset: 1, Reason: fmt.Sprintf("negative header count %d", count)}
	}
	// Each header takes at least 8 bytes (two lengths), so a larger count
	// cannot be honest; refusing it bounds the allocation below.
	if maxCount := (len(blob) - headerPreamble) / 8; int(count) > maxCount {
		return nil, &HeaderFormatError{Offset: 1, Reason: fmt.Sprintf("header count %d exceeds the %d that %d bytes can hold", count, maxCount, len(blob))}
	}
	headers := make([]Header, 0, count)
	o := headerPreamble
	for i := range int(count) {
		keyLen, err := readLength(blob, o, i, "key")
		if err != nil {
			return nil, err
		}
		o += 4
		if keyLen < 0 {
			return nil, &HeaderFormatError{Offset: o - 4, Reason: fmt.Sprintf("header %d: negative key length %d", i, keyLen)}
		}
		if int64(keyLen) > int64(len(blob)-o) {
			return nil, &HeaderFormatError{Offset: o, Reason: fmt.Sprintf("header %d: key of %d bytes runs past the end (%d left)", i, keyLen, len(blob)-o)}
		}
		key := string(blob[o : o+int(keyLen)])
		o += int(keyLen)

		valueLen, err := readLength(blob, o, i, "value")
		if err != nil {
			return nil, err
		}
		o += 4
		if valueLen < 0 {
			headers = append(headers, Header{Key: key})
			continue
		}
		if int64(valueLen) > int64(len(blob)-o) {
			return nil, &HeaderFormatError{Offset: o, Reason: fmt.Sprintf("header %d: value of %d bytes runs past the end (%d left)", i, valueLen, len(blob)-o)}
		}
		end := o + int(valueLen)
		headers = append(headers, Header{Key: key, Value: blob[o:end:end]})
		o = end
	}
	return headers, nil
}

func readLength(blob []byte, o, i int, what string) (int32, error) {
	if len(blob)-o < 4 {
		return 0, &HeaderFormatError{Offset: o, Reason: fmt.Sprintf("header %d: %s length runs past the end (%d bytes left)", i, what, len(blob)-o)}
	}
	return int32(binary.LittleEndian.Uint32(blob[o:])), nil
}
