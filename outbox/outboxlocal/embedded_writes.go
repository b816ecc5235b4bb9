package outboxlocal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/outbox/internal/ddblimits"
)

// TokenWindow is how long DynamoDB remembers a TransactWriteItems
// ClientRequestToken.
const TokenWindow = 10 * time.Minute

const (
	returnAllOld         = "ALL_OLD"
	codeConditionFailed  = "ConditionalCheckFailed"
	typeConditionFailed  = "ConditionalCheckFailedException"
	typeTransactCanceled = "TransactionCanceledException"
)

// tokenRecord is what the layer remembers of a transaction sent with a
// ClientRequestToken.
type tokenRecord struct {
	hash      [sha256.Size]byte
	at        time.Time
	succeeded bool
}

// putItem enforces the item size limit and returns what DynamoDB returns:
// the server answers every successful PutItem with the new item, and a
// refused one without the old item even when ALL_OLD was asked for. When
// the request asks for the old item, the layer reads it under the exclusive
// lock, so the answer is the item the write saw.
func (s *embeddedServer) putItem(ctx context.Context, body []byte, req *wireRequest) wireResponse {
	if wireItemSize(req.Item) > ddblimits.MaxItemSize {
		return apiError(http.StatusBadRequest, typeValidation, messageItemTooLarge)
	}
	wantOld := req.ReturnValues == returnAllOld
	wantOldOnRefusal := req.ReturnValuesOnConditionCheckFailure == returnAllOld
	if !wantOld && !wantOldOnRefusal {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if resp, refused := s.conflict("PutItem", req); refused {
			return resp
		}
		return withoutAttributes(s.call(ctx, "PutItem", body))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp, refused := s.conflict("PutItem", req); refused {
		return resp
	}
	key, known := s.keyOf(req.TableName, req.Item)
	var old json.RawMessage
	if wantOld && known {
		old = s.getItem(ctx, req.TableName, key)
	}
	resp := s.call(ctx, "PutItem", body)
	switch {
	case resp.status == http.StatusOK && old != nil:
		return wireResponse{status: http.StatusOK, body: mustJSON(map[string]json.RawMessage{"Attributes": old})}
	case resp.status == http.StatusOK:
		return withoutAttributes(resp)
	case wantOldOnRefusal && known:
		return s.withOldItem(ctx, resp, req.TableName, key)
	default:
		return resp
	}
}

// writeItem runs DeleteItem and UpdateItem; a refusal carries the old item
// when the request asked for it (the server does so for UpdateItem only),
// and an update's REMOVE clause is applied (see embedded_remove.go).
func (s *embeddedServer) writeItem(ctx context.Context, op string, body []byte, req *wireRequest) wireResponse {
	var removed []string
	if op == "UpdateItem" {
		var err error
		if removed, err = parseRemovals(req.UpdateExpression, req.ExpressionAttributeNames); err != nil {
			return apiError(http.StatusBadRequest, typeValidation, err.Error())
		}
	}
	wantOldOnRefusal := req.ReturnValuesOnConditionCheckFailure == returnAllOld
	if !wantOldOnRefusal && len(removed) == 0 {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if resp, refused := s.conflict(op, req); refused {
			return resp
		}
		return s.call(ctx, op, body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp, refused := s.conflict(op, req); refused {
		return resp
	}
	var resp wireResponse
	if len(removed) > 0 {
		resp = s.updateWithRemovals(ctx, body, req, removed)
	} else {
		resp = s.call(ctx, op, body)
	}
	if wantOldOnRefusal {
		return s.withOldItem(ctx, resp, req.TableName, req.Key)
	}
	return resp
}

// withOldItem adds the current item to a ConditionalCheckFailedException
// that lacks it. The caller holds mu exclusively, so nothing changed the
// item since the refusal.
func (s *embeddedServer) withOldItem(ctx context.Context, resp wireResponse, table string, key map[string]json.RawMessage) wireResponse {
	if errorType(resp) != typeConditionFailed {
		return resp
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(resp.body, &out) != nil || len(out["Item"]) > 0 {
		return resp
	}
	item := s.getItem(ctx, table, key)
	if item == nil {
		return resp
	}
	out["Item"] = item
	return wireResponse{status: resp.status, body: mustJSON(out)}
}

// batchWriteItem enforces the item size limit and DynamoDB's refusal of
// two requests for one item in a batch, which the server accepts.
func (s *embeddedServer) batchWriteItem(ctx context.Context, body []byte, req *wireRequest) wireResponse {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for table, writes := range req.writeRequests() {
		seen := map[string]bool{}
		for _, w := range writes {
			var key map[string]json.RawMessage
			var known bool
			switch {
			case w.PutRequest != nil:
				if wireItemSize(w.PutRequest.Item) > ddblimits.MaxItemSize {
					return apiError(http.StatusBadRequest, typeValidation, messageItemTooLarge)
				}
				key, known = s.keyOf(table, w.PutRequest.Item)
			case w.DeleteRequest != nil:
				key, known = w.DeleteRequest.Key, true
			}
			if !known {
				continue
			}
			id := keyIdentity(key)
			if seen[id] {
				return apiError(http.StatusBadRequest, typeValidation, messageDuplicateKeys)
			}
			seen[id] = true
		}
	}
	if resp, refused := s.conflict("BatchWriteItem", req); refused {
		return resp
	}
	return s.call(ctx, "BatchWriteItem", body)
}

// transactWriteItems enforces the transaction limits, honours the
// ClientRequestToken (the server ignores it) and completes the
// cancellation reasons with the old items asked for.
//
// Token semantics, as DynamoDB documents them: within TokenWindow, a
// request with a known token and the same parameters succeeds without
// running again when the first one succeeded; with other parameters it is
// refused with IdempotentParameterMismatchException. A repeat of a request
// that failed runs again (approximation: DynamoDB does not document it).
func (s *embeddedServer) transactWriteItems(ctx context.Context, body []byte, req *wireRequest) wireResponse {
	if len(req.TransactItems) > ddblimits.MaxTransactionItems {
		return apiError(http.StatusBadRequest, typeValidation, messageTooManyActions)
	}
	total := 0
	for _, t := range req.TransactItems {
		a := t.action()
		if a == nil {
			continue
		}
		if t.Put != nil {
			size := wireItemSize(a.Item)
			if size > ddblimits.MaxItemSize {
				return apiError(http.StatusBadRequest, typeValidation, messageItemTooLarge)
			}
			total += size
		} else {
			total += wireItemSize(a.Key)
		}
	}
	if total > ddblimits.MaxTransactionSize {
		return apiError(http.StatusBadRequest, typeValidation, fmt.Sprintf(messageTxnTooLarge, total))
	}
	removals, err := transactRemovals(req.TransactItems)
	if err != nil {
		return apiError(http.StatusBadRequest, typeValidation, err.Error())
	}
	resp, c := s.commitTransaction(ctx, body, req, removals)
	if c != nil {
		if err := s.reveal(ctx, c.commit, c.later, c.start, c.end); err != nil {
			return apiError(http.StatusInternalServerError, typeInternalServer, err.Error())
		}
	}
	return resp
}

// committing is a transaction whose new items become visible one at a
// time (ReadCommitted).
type committing struct {
	commit *commit
	later  []newPut
	start  time.Time
	end    time.Duration
}

// commitTransaction applies a transaction under the exclusive lock; with
// the ReadCommitted model it also returns the commit still in progress.
func (s *embeddedServer) commitTransaction(ctx context.Context, body []byte, req *wireRequest, removals map[int][]string) (wireResponse, *committing) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp, refused := s.conflict("TransactWriteItems", req); refused {
		return resp, nil
	}
	now := time.Now()
	for token, rec := range s.tokens {
		if now.Sub(rec.at) >= TokenWindow {
			delete(s.tokens, token)
		}
	}
	var hash [sha256.Size]byte
	if req.ClientRequestToken != "" {
		hash = requestHash(body)
		if rec, ok := s.tokens[req.ClientRequestToken]; ok {
			if rec.hash != hash {
				return apiError(http.StatusBadRequest, typeIdempotencyClash, messageTokenReused), nil
			}
			if rec.succeeded {
				return wireResponse{status: http.StatusOK, body: []byte("{}")}, nil
			}
		}
	}
	var puts []newPut
	if s.commits != nil {
		puts = s.newItems(ctx, req)
	}
	resp := s.call(ctx, "TransactWriteItems", body)
	if req.ClientRequestToken != "" {
		prev, seen := s.tokens[req.ClientRequestToken]
		rec := tokenRecord{hash: hash, at: now, succeeded: resp.status == http.StatusOK}
		if seen {
			// The window runs from the first use of the token.
			rec.at = prev.at
		}
		s.tokens[req.ClientRequestToken] = rec
	}
	switch {
	case resp.status == http.StatusOK && len(removals) > 0:
		if err := s.applyTransactRemovals(ctx, req.TransactItems, removals); err != nil {
			return apiError(http.StatusInternalServerError, typeInternalServer, err.Error()), nil
		}
	case errorType(resp) == typeTransactCanceled:
		return s.completeCancellation(ctx, resp, req), nil
	}
	if resp.status != http.StatusOK || len(puts) == 0 {
		return resp, nil
	}
	c, later, end, err := s.hideNew(ctx, req, puts)
	if err != nil {
		return apiError(http.StatusInternalServerError, typeInternalServer, err.Error()), nil
	}
	if c == nil {
		return resp, nil
	}
	return resp, &committing{commit: c, later: later, start: now, end: end}
}

// completeCancellation reports every failed condition (the server stops at
// the first), adds the old item to every ConditionalCheckFailed reason
// whose action asked for ALL_OLD, and lists every reason code in the
// message as DynamoDB does. The transaction was rolled back and the
// caller holds mu exclusively, so the items read are the ones the
// conditions saw.
func (s *embeddedServer) completeCancellation(ctx context.Context, resp wireResponse, req *wireRequest) wireResponse {
	var out map[string]json.RawMessage
	var reasons []map[string]json.RawMessage
	if json.Unmarshal(resp.body, &out) != nil || json.Unmarshal(out["CancellationReasons"], &reasons) != nil {
		return resp
	}
	s.completeFailedConditions(ctx, req, reasons)
	codes := make([]string, len(reasons))
	for i, reason := range reasons {
		codes[i], _ = unquote(reason["Code"])
		if codes[i] != codeConditionFailed || len(reason["Item"]) > 0 || i >= len(req.TransactItems) {
			continue
		}
		a := req.TransactItems[i].action()
		if a == nil || a.ReturnValuesOnConditionCheckFailure != returnAllOld {
			continue
		}
		key, known := a.Key, len(a.Key) > 0
		if req.TransactItems[i].Put != nil {
			key, known = s.keyOf(a.TableName, a.Item)
		}
		if !known {
			continue
		}
		if item := s.getItem(ctx, a.TableName, key); item != nil {
			reason["Item"] = item
		}
	}
	out["message"] = mustJSON("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]")
	return remarshal(resp, out, "CancellationReasons", reasons)
}

// withoutAttributes drops the new item the server returns from a
// successful PutItem: DynamoDB returns attributes only for ALL_OLD.
func withoutAttributes(resp wireResponse) wireResponse {
	if resp.status != http.StatusOK {
		return resp
	}
	return wireResponse{status: resp.status, body: []byte("{}")}
}

// requestHash identifies a request's parameters apart from its token:
// re-encoding a decoded body sorts the object keys, so two encodings of the
// same input hash alike.
func requestHash(body []byte) [sha256.Size]byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if dec.Decode(&v) != nil {
		return sha256.Sum256(body)
	}
	delete(v, "ClientRequestToken")
	return sha256.Sum256(mustJSON(v))
}

// keyIdentity is a stable string for a key in wire form.
func keyIdentity(key map[string]json.RawMessage) string {
	var b strings.Builder
	for _, name := range sortedKeys(key) {
		var compact bytes.Buffer
		if json.Compact(&compact, key[name]) != nil {
			compact.Write(key[name])
		}
		b.WriteString(name)
		b.WriteByte(0)
		b.Write(compact.Bytes())
		b.WriteByte(0)
	}
	return b.String()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only values decoded from JSON or built from strings reach here.
		panic("outboxlocal: encode JSON: " + err.Error())
	}
	return b
}
