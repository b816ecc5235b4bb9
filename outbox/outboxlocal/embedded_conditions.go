package outboxlocal

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
)

// The server runs a transaction's actions in order and stops at the first
// failed condition: the actions after it report None whether their own
// condition holds or not. DynamoDB evaluates every condition and reports
// each failure, which a writer needs to recognise a retry refused by all of
// its own items. The layer evaluates the conditions the server skipped, one
// ConditionCheck each, against the rolled-back items.

var (
	namePlaceholder  = regexp.MustCompile(`#[A-Za-z0-9_]+`)
	valuePlaceholder = regexp.MustCompile(`:[A-Za-z0-9_]+`)
)

// completeFailedConditions marks ConditionalCheckFailed every action after
// the first failed one whose condition does not hold either. The caller
// holds mu exclusively and the transaction was rolled back, so the
// conditions see the items the transaction saw.
func (s *embeddedServer) completeFailedConditions(ctx context.Context, req *wireRequest, reasons []map[string]json.RawMessage) {
	first := -1
	for i, reason := range reasons {
		if code, _ := unquote(reason["Code"]); code == codeConditionFailed {
			first = i
			break
		}
	}
	if first < 0 {
		return
	}
	for i := first + 1; i < len(reasons) && i < len(req.TransactItems); i++ {
		if code, _ := unquote(reasons[i]["Code"]); code != "None" {
			continue
		}
		if s.conditionFails(ctx, req.TransactItems[i]) {
			reasons[i] = map[string]json.RawMessage{"Code": mustJSON(codeConditionFailed)}
			if msg := reasons[first]["Message"]; len(msg) > 0 {
				reasons[i]["Message"] = msg
			}
		}
	}
}

// conditionFails evaluates one action's condition alone, as a
// ConditionCheck on the action's item, carrying only the placeholders the
// condition uses (the server refuses unused ones). An action without a
// condition, or whose check the server cannot run, does not fail.
func (s *embeddedServer) conditionFails(ctx context.Context, t wireTransactItem) bool {
	a := t.action()
	if a == nil || a.ConditionExpression == "" {
		return false
	}
	key := a.Key
	if t.Put != nil {
		var known bool
		if key, known = s.keyOf(a.TableName, a.Item); !known {
			return false
		}
	}
	check := map[string]any{"TableName": a.TableName, "Key": key, "ConditionExpression": a.ConditionExpression}
	if names := usedNames(a.ConditionExpression, a.ExpressionAttributeNames); len(names) > 0 {
		check["ExpressionAttributeNames"] = names
	}
	if values := usedValues(a.ConditionExpression, a.ExpressionAttributeValues); len(values) > 0 {
		check["ExpressionAttributeValues"] = values
	}
	body := mustJSON(map[string]any{"TransactItems": []any{map[string]any{"ConditionCheck": check}}})
	resp := s.call(ctx, "TransactWriteItems", body)
	return resp.status != http.StatusOK && errorType(resp) == typeTransactCanceled
}

func usedNames(expr string, names map[string]string) map[string]string {
	out := map[string]string{}
	for _, p := range namePlaceholder.FindAllString(expr, -1) {
		if v, ok := names[p]; ok {
			out[p] = v
		}
	}
	return out
}

func usedValues(expr string, values map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, p := range valuePlaceholder.FindAllString(expr, -1) {
		if v, ok := values[p]; ok {
			out[p] = v
		}
	}
	return out
}
