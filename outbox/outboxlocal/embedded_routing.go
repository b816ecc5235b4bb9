package outboxlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
)

// call sends one request to the server, each item routed to its
// partition's table (embedded_partitions.go), and maps the answer back to
// the user's table names. The caller holds mu.
func (s *embeddedServer) call(ctx context.Context, op string, body []byte) wireResponse {
	return s.unroute(op, s.send(ctx, op, s.route(op, body)))
}

// route rewrites the table names of body's items to their partitions'
// tables; batches are regrouped by partition. Bodies it cannot read are
// sent as they are, for the server to refuse.
func (s *embeddedServer) route(op string, body []byte) []byte {
	switch op {
	case "PutItem", "GetItem", "DeleteItem", "UpdateItem", "Query",
		"TransactWriteItems", "TransactGetItems", "BatchWriteItem", "BatchGetItem":
	default:
		return body
	}
	var in map[string]json.RawMessage
	if json.Unmarshal(body, &in) != nil {
		return body
	}
	var ok bool
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		ok = s.routeTransaction(in)
	case "BatchWriteItem":
		ok = s.routeBatchWrite(in)
	case "BatchGetItem":
		ok = s.routeBatchGet(in)
	default:
		ok = s.routeAction(in, op)
	}
	if !ok {
		return body
	}
	return mustJSON(in)
}

// routeAction points one item request (or a transaction's action) at its
// partition's table; it reports whether it changed in.
func (s *embeddedServer) routeAction(in map[string]json.RawMessage, op string) bool {
	table, _ := unquote(in["TableName"])
	info := s.tables[table]
	if info == nil || info.partitions == nil {
		return false
	}
	var value json.RawMessage
	if op == "Query" {
		var names map[string]string
		var values map[string]json.RawMessage
		var expr string
		_ = json.Unmarshal(in["ExpressionAttributeNames"], &names)
		_ = json.Unmarshal(in["ExpressionAttributeValues"], &values)
		_ = json.Unmarshal(in["KeyConditionExpression"], &expr)
		value = values[partitionPlaceholder(expr, names, info.hashKey)]
	} else {
		var attrs map[string]json.RawMessage
		field := "Key"
		if op == "PutItem" || len(in["Item"]) > 0 {
			field = "Item"
		}
		_ = json.Unmarshal(in[field], &attrs)
		value = attrs[info.hashKey]
	}
	target := s.partitionOf(table, value)
	if target == table {
		return false
	}
	in["TableName"] = mustJSON(target)
	return true
}

// routeTransaction routes every action of a transaction; the server
// transacts across tables, so the transaction stays atomic.
func (s *embeddedServer) routeTransaction(in map[string]json.RawMessage) bool {
	var items []map[string]map[string]json.RawMessage
	if json.Unmarshal(in["TransactItems"], &items) != nil {
		return false
	}
	changed := false
	for _, item := range items {
		for kind, action := range item {
			if s.routeAction(action, kind) {
				changed = true
			}
		}
	}
	if changed {
		in["TransactItems"] = mustJSON(items)
	}
	return changed
}

// routeBatchWrite regroups a BatchWriteItem's requests by partition.
func (s *embeddedServer) routeBatchWrite(in map[string]json.RawMessage) bool {
	var tables map[string][]json.RawMessage
	if json.Unmarshal(in["RequestItems"], &tables) != nil {
		return false
	}
	out := map[string][]json.RawMessage{}
	for table, writes := range tables {
		if len(writes) == 0 {
			out[table] = writes // for the server to refuse
		}
		for _, raw := range writes {
			var w wireWriteRequest
			_ = json.Unmarshal(raw, &w)
			var attrs map[string]json.RawMessage
			switch {
			case w.PutRequest != nil:
				attrs = w.PutRequest.Item
			case w.DeleteRequest != nil:
				attrs = w.DeleteRequest.Key
			}
			target := s.itemPartition(table, attrs)
			out[target] = append(out[target], raw)
		}
	}
	in["RequestItems"] = mustJSON(out)
	return true
}

// routeBatchGet regroups a BatchGetItem's keys by partition; each group
// keeps its table's projection and consistency.
func (s *embeddedServer) routeBatchGet(in map[string]json.RawMessage) bool {
	var tables map[string]map[string]json.RawMessage
	if json.Unmarshal(in["RequestItems"], &tables) != nil {
		return false
	}
	out := map[string]map[string]json.RawMessage{}
	for table, spec := range tables {
		var keys []map[string]json.RawMessage
		if json.Unmarshal(spec["Keys"], &keys) != nil {
			return false
		}
		if len(keys) == 0 {
			out[table] = spec // for the server to refuse
		}
		groups := map[string][]map[string]json.RawMessage{}
		for _, key := range keys {
			target := s.itemPartition(table, key)
			groups[target] = append(groups[target], key)
		}
		for target, keys := range groups {
			out[target] = maps.Clone(spec)
			out[target]["Keys"] = mustJSON(keys)
		}
	}
	in["RequestItems"] = mustJSON(out)
	return true
}

// unroute names the user's tables in an answer: error messages lose the
// partition suffix, and the per-table members of batch answers are merged
// back under their table.
func (s *embeddedServer) unroute(op string, resp wireResponse) wireResponse {
	if !bytes.Contains(resp.body, []byte("#p")) {
		return resp
	}
	if resp.status != http.StatusOK {
		return wireResponse{status: resp.status, body: partitionSuffix.ReplaceAll(resp.body, nil)}
	}
	var fields []string
	switch op {
	case "BatchWriteItem":
		fields = []string{"UnprocessedItems"}
	case "BatchGetItem":
		fields = []string{"Responses", "UnprocessedKeys"}
	default:
		return resp
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(resp.body, &out) != nil {
		return resp
	}
	for _, field := range fields {
		if merged, ok := mergeTables(out[field], field == "UnprocessedKeys"); ok {
			out[field] = merged
		}
	}
	return wireResponse{status: resp.status, body: mustJSON(out)}
}

// mergeTables merges a map from server table to list (or, with keys, to
// {Keys: list, ...}) under the user's table names.
func mergeTables(raw json.RawMessage, keys bool) (json.RawMessage, bool) {
	var byTable map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &byTable) != nil {
		return nil, false
	}
	lists := map[string][]json.RawMessage{}
	specs := map[string]map[string]json.RawMessage{}
	for _, name := range sortedKeys(byTable) {
		user := string(partitionSuffix.ReplaceAllString(name, ""))
		list := byTable[name]
		if keys {
			var spec map[string]json.RawMessage
			if json.Unmarshal(list, &spec) != nil {
				return nil, false
			}
			if specs[user] == nil {
				specs[user] = spec
			}
			list = spec["Keys"]
		}
		var items []json.RawMessage
		if json.Unmarshal(list, &items) != nil {
			return nil, false
		}
		lists[user] = append(lists[user], items...)
	}
	if !keys {
		return mustJSON(lists), true
	}
	for user, spec := range specs {
		spec["Keys"] = mustJSON(lists[user])
	}
	return mustJSON(specs), true
}
