package outboxlocal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// The server answers a Query by evaluating the key condition on every item
// of the table, inserts a key by sorting all of the table's keys, and
// snapshots every table a transaction touches: each costs the whole table.
// The layer therefore keeps one server table per (table, partition-key
// value), created from the table's CreateTable request on the first write
// to the partition, and routes every item operation to it. The user's table
// stays in the server, empty: table operations go to it, and requests for
// a partition never written (or that name no partition) go to it too, so
// they get the server's own answer for an empty partition or its error.
// A table with a global secondary index stays whole: an index query spans
// partitions.

// partitionSuffix ends the name of a partition's table: "#" never occurs
// in a DynamoDB table name, so the suffix names no user table and is
// stripped from error messages.
var partitionSuffix = regexp.MustCompile(`#p[0-9]+#`)

// partitionRef is a partition a write may create.
type partitionRef struct {
	table string
	value json.RawMessage
}

// valueIdentity is a partition-key value as the server tells values apart:
// by type and string form. "" when raw is not one typed value.
func valueIdentity(raw json.RawMessage) string {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil || len(v) != 1 {
		return ""
	}
	for typ, val := range v {
		if s, ok := unquote(val); ok {
			return typ + "\x00" + s
		}
		return typ + "\x00" + string(val)
	}
	return ""
}

// partitionOf names the server table holding table's items whose partition
// key is value: the table itself when it is kept whole or the partition
// has no table yet. The caller holds mu.
func (s *embeddedServer) partitionOf(table string, value json.RawMessage) string {
	info := s.tables[table]
	if info == nil || info.partitions == nil || value == nil {
		return table
	}
	if name, ok := info.partitions[valueIdentity(value)]; ok {
		return name
	}
	return table
}

// itemPartition is partitionOf for an item or a key.
func (s *embeddedServer) itemPartition(table string, attrs map[string]json.RawMessage) string {
	return s.partitionOf(table, s.hashValue(table, attrs))
}

// ensurePartitions creates the partition tables that the writes of req
// may put items into. Creating a server table needs the exclusive lock
// (README.md, gap 12), so it is taken only when a partition is new.
func (s *embeddedServer) ensurePartitions(ctx context.Context, op string, req *wireRequest) {
	switch op {
	case "PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems":
	default:
		return
	}
	var refs []partitionRef
	add := func(table string, attrs map[string]json.RawMessage) {
		if attrs != nil {
			refs = append(refs, partitionRef{table: table, value: s.hashValue(table, attrs)})
		}
	}
	s.mu.RLock()
	switch op {
	case "PutItem":
		add(req.TableName, req.Item)
	case "UpdateItem":
		add(req.TableName, req.Key)
	case "BatchWriteItem":
		for table, writes := range req.writeRequests() {
			for _, w := range writes {
				if w.PutRequest != nil {
					add(table, w.PutRequest.Item)
				}
			}
		}
	case "TransactWriteItems":
		for _, t := range req.TransactItems {
			switch {
			case t.Put != nil:
				add(t.Put.TableName, t.Put.Item)
			case t.Update != nil:
				add(t.Update.TableName, t.Update.Key)
			}
		}
	}
	refs = slices.DeleteFunc(refs, func(r partitionRef) bool { return !s.missingPartition(r) })
	s.mu.RUnlock()
	if len(refs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range refs {
		if !s.missingPartition(r) {
			continue
		}
		info := s.tables[r.table]
		s.partitionCount++
		name := fmt.Sprintf("%s#p%d#", r.table, s.partitionCount)
		create := maps.Clone(info.template)
		create["TableName"] = mustJSON(name)
		if resp := s.send(ctx, "CreateTable", mustJSON(create)); resp.status == http.StatusOK {
			info.partitions[valueIdentity(r.value)] = name
		}
	}
}

// hashValue is the partition-key value of attrs, nil when table is
// unknown or attrs lack it. The caller holds mu.
func (s *embeddedServer) hashValue(table string, attrs map[string]json.RawMessage) json.RawMessage {
	info := s.tables[table]
	if info == nil {
		return nil
	}
	return attrs[info.hashKey]
}

// missingPartition reports whether r names a partition of a partitioned
// table that has no server table yet. The caller holds mu.
func (s *embeddedServer) missingPartition(r partitionRef) bool {
	info := s.tables[r.table]
	if info == nil || info.partitions == nil || r.value == nil {
		return false
	}
	id := valueIdentity(r.value)
	_, ok := info.partitions[id]
	return id != "" && !ok
}

// partitionPlaceholder returns the :value a key condition requires the
// partition key to equal ("pk = :v" on either side, pk directly or through a
// #name); "" when it requires none.
func partitionPlaceholder(expr string, names map[string]string, hashKey string) string {
	toks := expressionToken.FindAllString(expr, -1)
	isKey := func(tok string) bool {
		if alias, ok := names[tok]; ok {
			tok = alias
		}
		return tok == hashKey && !strings.HasPrefix(tok, ":")
	}
	for i := 0; i+2 < len(toks); i++ {
		a, b := toks[i], toks[i+2]
		switch {
		case toks[i+1] != "=":
		case isKey(a) && strings.HasPrefix(b, ":"):
			return b
		case isKey(b) && strings.HasPrefix(a, ":"):
			return a
		}
	}
	return ""
}

// mergePartitions moves a partitioned table's items back into the user's
// table and deletes the partitions' tables, before an UpdateTable that may
// add a global secondary index: an index query spans partitions. The server
// indexes only items written after the index is created, so moving the
// items first changes nothing it answers. The caller holds mu exclusively.
func (s *embeddedServer) mergePartitions(ctx context.Context, table string) error {
	info := s.tables[table]
	if info == nil || info.partitions == nil {
		return nil
	}
	for _, id := range sortedKeys(info.partitions) {
		name := mustJSON(info.partitions[id])
		resp := s.send(ctx, "Scan", mustJSON(map[string]json.RawMessage{"TableName": name}))
		var page struct{ Items []json.RawMessage }
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &page) != nil {
			return fmt.Errorf("read a partition of %s to merge it: %s", table, partitionSuffix.ReplaceAll(resp.body, nil))
		}
		for _, item := range page.Items {
			put := map[string]json.RawMessage{"TableName": mustJSON(table), "Item": item}
			if resp := s.send(ctx, "PutItem", mustJSON(put)); resp.status != http.StatusOK {
				return fmt.Errorf("merge an item of a partition into %s: %s", table, resp.body)
			}
		}
		s.send(ctx, "DeleteTable", mustJSON(map[string]json.RawMessage{"TableName": name}))
		delete(info.partitions, id)
	}
	info.partitions = nil
	return nil
}

// given reports whether a request member is present and not null.
func given(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}
