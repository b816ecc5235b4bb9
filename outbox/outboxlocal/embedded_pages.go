package outboxlocal

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// maxPageBytes is DynamoDB's cap on the data one Query or Scan reads: 1 MB
// of item sizes (ItemSize), after which it returns the page with a
// LastEvaluatedKey.
const maxPageBytes = 1 << 20

// capPage cuts a Query or Scan answer of a base table at 1 MB of items, as
// DynamoDB does: the page ends with the item that brings the total to 1 MB
// or more (DynamoDB Local returns three 393 KB items and four 300 KB ones),
// and LastEvaluatedKey is that item's key. The server itself returns every
// matching item up to Limit, so a relay fetching 400 KB items would read
// one page of tens of MB where DynamoDB sends several of about 1 MB. The
// caller holds mu.
func (s *embeddedServer) capPage(table string, resp wireResponse) wireResponse {
	// An item costs at least its JSON length less quoting: a body under
	// 1 MB cannot hold 1 MB of items, and large pages are rare.
	if len(resp.body) < maxPageBytes {
		return resp
	}
	var page map[string]json.RawMessage
	if json.Unmarshal(resp.body, &page) != nil {
		return resp
	}
	// Decode items only up to the cut: minidyn's answer holds every match up
	// to Limit, tens of MB with large items, and decoding all of it cost
	// more than the query itself.
	raw := page["Items"]
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return resp
	}
	var last map[string]json.RawMessage
	size, n := 0, 0
	for dec.More() && size < maxPageBytes {
		last = nil
		if dec.Decode(&last) != nil {
			return resp
		}
		size += wireItemSize(last)
		n++
	}
	if !dec.More() {
		return resp
	}
	key, ok := s.keyOf(table, last)
	if !ok {
		return resp
	}
	cut := bytes.TrimSpace(raw[:dec.InputOffset()])
	page["Items"] = append(slices.Clip(cut), ']')
	page["Count"] = json.RawMessage(strconv.Itoa(n))
	page["ScannedCount"] = page["Count"]
	page["LastEvaluatedKey"] = mustJSON(key)
	return wireResponse{status: resp.status, body: mustJSON(page)}
}
