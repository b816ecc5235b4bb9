package outboxlocal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
)

// The server evaluates the REMOVE action of an update expression but never
// applies it to a top-level attribute: the update succeeds and the item
// keeps the attribute (nested paths, a.b and a[0], are applied). The layer
// runs the update through the server, then deletes the removed top-level
// attributes itself, under the exclusive lock, so no request sees the item
// in between.

const (
	returnAllNew     = "ALL_NEW"
	returnUpdatedNew = "UPDATED_NEW"
	returnUpdatedOld = "UPDATED_OLD"
)

// updateWithRemovals runs an UpdateItem whose expression removes the
// top-level attributes removed, and answers with the ReturnValues the
// client asked for as DynamoDB computes them. The caller holds mu
// exclusively.
func (s *embeddedServer) updateWithRemovals(ctx context.Context, body []byte, req *wireRequest, removed []string) wireResponse {
	resp := s.call(ctx, "UpdateItem", body)
	if resp.status != http.StatusOK {
		return resp
	}
	item, old, err := s.removeAttributes(ctx, req.TableName, req.Key, removed)
	if err != nil {
		return apiError(http.StatusInternalServerError, typeInternalServer, "apply REMOVE: "+err.Error())
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(resp.body, &out) != nil {
		return resp
	}
	var attrs map[string]json.RawMessage
	if raw, ok := out["Attributes"]; ok && json.Unmarshal(raw, &attrs) != nil {
		return resp
	}
	switch req.ReturnValues {
	case returnAllNew:
		attrs = item
	case returnUpdatedNew:
		// A removed attribute has no new value.
		for _, name := range removed {
			delete(attrs, name)
		}
	case returnUpdatedOld:
		// The server compares the item before and after its update, in
		// which the removed attributes did not change.
		if attrs == nil && len(old) > 0 {
			attrs = map[string]json.RawMessage{}
		}
		for name, v := range old {
			attrs[name] = v
		}
	default:
		// NONE and ALL_OLD do not depend on the removal.
		return resp
	}
	out["Attributes"] = mustJSON(attrs)
	return wireResponse{status: resp.status, body: mustJSON(out)}
}

// removeAttributes deletes the named top-level attributes from the item
// under key by writing the item back without them. It returns the item as
// stored afterwards (nil when there is none) and the removed attributes'
// values. The caller holds mu exclusively, so the item read is the one the
// update left.
func (s *embeddedServer) removeAttributes(ctx context.Context, table string, key map[string]json.RawMessage, removed []string) (item, old map[string]json.RawMessage, err error) {
	raw := s.getItem(ctx, table, key)
	if raw == nil {
		return nil, nil, nil
	}
	if err := json.Unmarshal(raw, &item); err != nil {
		return nil, nil, err
	}
	for _, name := range removed {
		if v, ok := item[name]; ok {
			if old == nil {
				old = map[string]json.RawMessage{}
			}
			old[name] = v
			delete(item, name)
		}
	}
	if len(old) == 0 {
		return item, nil, nil
	}
	resp := s.call(ctx, "PutItem", mustJSON(map[string]any{"TableName": table, "Item": item}))
	if resp.status != http.StatusOK {
		return nil, nil, &serverError{resp}
	}
	return item, old, nil
}

// transactRemovals parses the REMOVE clause of every Update action of a
// transaction; nil when none removes a top-level attribute.
func transactRemovals(items []wireTransactItem) (map[int][]string, error) {
	var out map[int][]string
	for i, t := range items {
		if t.Update == nil {
			continue
		}
		removed, err := parseRemovals(t.Update.UpdateExpression, t.Update.ExpressionAttributeNames)
		if err != nil {
			return nil, err
		}
		if len(removed) > 0 {
			if out == nil {
				out = map[int][]string{}
			}
			out[i] = removed
		}
	}
	return out, nil
}

// applyTransactRemovals completes a committed transaction's Update actions.
// The caller holds mu exclusively since before the transaction ran, so the
// transaction and its removals are one step to every other request.
func (s *embeddedServer) applyTransactRemovals(ctx context.Context, items []wireTransactItem, removals map[int][]string) error {
	for _, i := range slices.Sorted(maps.Keys(removals)) {
		u := items[i].Update
		if _, _, err := s.removeAttributes(ctx, u.TableName, u.Key, removals[i]); err != nil {
			return fmt.Errorf("apply REMOVE of transaction action %d: %w", i, err)
		}
	}
	return nil
}

// serverError is an unexpected failure of an internal server call.
type serverError struct{ resp wireResponse }

func (e *serverError) Error() string {
	return fmt.Sprintf("embedded server answered %d: %s", e.resp.status, e.resp.body)
}
