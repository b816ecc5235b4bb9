package outboxlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Table statuses DynamoDB reports.
const (
	statusCreating = "CREATING"
	statusActive   = "ACTIVE"
	statusDeleting = "DELETING"
)

// tableOperation runs a table-level request exclusively (minidyn creates
// and deletes tables without its own lock) and completes the description
// the server returns: it has no TableStatus, attribute definitions, billing
// mode, ARN or creation time, so a wait-for-ACTIVE loop would never end.
func (s *embeddedServer) tableOperation(ctx context.Context, op string, body []byte, req *wireRequest) wireResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if op == "UpdateTable" && given(req.GlobalSecondaryIndexUpdates) {
		if err := s.mergePartitions(ctx, req.TableName); err != nil {
			return apiError(http.StatusInternalServerError, typeInternalServer, err.Error())
		}
	}
	resp := s.call(ctx, op, body)
	if resp.status != http.StatusOK {
		return resp
	}
	field, status := "Table", statusActive
	switch op {
	case "CreateTable":
		info := &tableInfo{
			attributeDefinitions: req.AttributeDefinitions,
			billingMode:          req.BillingMode,
			createdAt:            time.Now(),
		}
		for _, k := range req.KeySchema {
			if k.KeyType == "HASH" {
				info.hashKey = k.AttributeName
			} else {
				info.rangeKey = k.AttributeName
			}
		}
		if !given(req.GlobalSecondaryIndexes) {
			if json.Unmarshal(body, &info.template) == nil {
				info.partitions = map[string]string{}
			}
		}
		s.tables[req.TableName] = info
		field, status = "TableDescription", statusCreating
	case "DeleteTable":
		field, status = "TableDescription", statusDeleting
	case "UpdateTable":
		field = "TableDescription"
	}
	info := s.tables[req.TableName]
	resp = s.countPartitions(ctx, resp, field, info, op == "DeleteTable")
	if op == "DeleteTable" {
		delete(s.tables, req.TableName)
	}
	return completeDescription(resp, field, status, req.TableName, info)
}

// countPartitions reports the items of a partitioned table's partitions in
// its description's ItemCount (the user's table itself holds none), and
// with drop deletes the partitions' tables. The caller holds mu
// exclusively.
func (s *embeddedServer) countPartitions(ctx context.Context, resp wireResponse, field string, info *tableInfo, drop bool) wireResponse {
	if info == nil || len(info.partitions) == 0 {
		return resp
	}
	op := "DescribeTable"
	if drop {
		op = "DeleteTable"
	}
	total := 0
	for _, name := range info.partitions {
		part := s.send(ctx, op, mustJSON(map[string]string{"TableName": name}))
		var out map[string]struct{ ItemCount int }
		if json.Unmarshal(part.body, &out) == nil {
			total += out["Table"].ItemCount + out["TableDescription"].ItemCount
		}
	}
	var outer map[string]json.RawMessage
	var desc map[string]json.RawMessage
	if json.Unmarshal(resp.body, &outer) != nil || json.Unmarshal(outer[field], &desc) != nil || desc == nil {
		return resp
	}
	desc["ItemCount"] = mustJSON(total)
	return remarshal(resp, outer, field, desc)
}

func completeDescription(resp wireResponse, field, status, table string, info *tableInfo) wireResponse {
	var outer map[string]json.RawMessage
	if json.Unmarshal(resp.body, &outer) != nil {
		return resp
	}
	var desc map[string]json.RawMessage
	if json.Unmarshal(outer[field], &desc) != nil || desc == nil {
		return resp
	}
	set := func(name string, v any) {
		if raw, err := json.Marshal(v); err == nil {
			desc[name] = raw
		}
	}
	if st, _ := unquote(desc["TableStatus"]); st == "" {
		set("TableStatus", status)
	}
	set("TableArn", "arn:aws:dynamodb:us-east-1:000000000000:table/"+table)
	if info != nil {
		if len(info.attributeDefinitions) > 0 {
			desc["AttributeDefinitions"] = info.attributeDefinitions
		}
		if info.billingMode != "" {
			set("BillingModeSummary", map[string]string{"BillingMode": info.billingMode})
		}
		set("CreationDateTime", float64(info.createdAt.UnixMilli())/1000)
	}
	return remarshal(resp, outer, field, desc)
}

// listTables answers from the tables created through this layer: the
// server does not implement ListTables.
func (s *embeddedServer) listTables(req *wireRequest) wireResponse {
	s.mu.RLock()
	names := make([]string, 0, len(s.tables))
	for name := range s.tables {
		names = append(names, name)
	}
	s.mu.RUnlock()
	sort.Strings(names)
	if req.ExclusiveStartTableName != "" {
		i := sort.SearchStrings(names, req.ExclusiveStartTableName)
		if i < len(names) && names[i] == req.ExclusiveStartTableName {
			i++
		}
		names = names[i:]
	}
	limit := 100
	if req.Limit != nil && *req.Limit > 0 && *req.Limit < limit {
		limit = *req.Limit
	}
	out := map[string]any{"TableNames": names}
	if len(names) > limit {
		out["TableNames"] = names[:limit]
		out["LastEvaluatedTableName"] = names[limit-1]
	}
	body, _ := json.Marshal(out)
	return wireResponse{status: http.StatusOK, body: body}
}

// expressionToken splits a key condition expression into attribute names,
// #name and :value placeholders, and operators.
var expressionToken = regexp.MustCompile(`[#:]?[A-Za-z_][A-Za-z0-9_]*|<>|<=|>=|[=<>(),]`)

// read runs a Query or Scan and fixes its answer: Select=COUNT returns only
// the counts, ScannedCount is present, and a Query on the base table must
// name the partition key (the server otherwise returns every partition).
func (s *embeddedServer) read(ctx context.Context, op string, body []byte, req *wireRequest) wireResponse {
	s.mu.RLock()
	defer s.mu.RUnlock()
	info := s.tables[req.TableName]
	if op == "Query" && info != nil && (req.IndexName == "" || info.partitions != nil) {
		switch {
		case !namesAttribute(req.KeyConditionExpression, req.ExpressionAttributeNames, info.hashKey):
			return apiError(http.StatusBadRequest, typeValidation, "Query condition missed key schema element: "+info.hashKey)
		case info.partitions != nil && partitionPlaceholder(req.KeyConditionExpression, req.ExpressionAttributeNames, info.hashKey) == "":
			// Routing needs the one partition DynamoDB requires.
			return apiError(http.StatusBadRequest, typeValidation, "Query key condition not supported")
		}
	}
	var resp wireResponse
	if op == "Scan" && info != nil && info.partitions != nil {
		resp = s.scanPartitions(ctx, body, req, info)
	} else {
		resp = s.call(ctx, op, body)
	}
	if resp.status != http.StatusOK {
		return resp
	}
	if s.commits != nil && (op == "Scan" || info != nil) {
		partition := ""
		if op == "Query" {
			partition = s.readPartition(req)
		}
		s.commits.read(partition, req.Select == "COUNT")
	}
	if req.Select == "COUNT" {
		return countOnly(resp)
	}
	if req.IndexName == "" && req.FilterExpression == "" {
		resp = s.capPage(req.TableName, resp)
	}
	// Pages can be large: add the missing counts without decoding them.
	// A count is the only member followed by a bare number (attribute
	// values are objects), so the first match is the top-level one.
	if !bytes.HasPrefix(resp.body, []byte("{")) {
		return resp
	}
	count, hasCount := []byte("0"), false
	if m := countMember.FindSubmatch(resp.body); m != nil {
		count, hasCount = m[1], true
	}
	var extra []byte
	if !hasCount {
		extra = fmt.Appendf(extra, `"Count":%s,`, count)
	}
	// The server does not count filtered-out items; ScannedCount equals
	// Count here (README.md).
	if !scannedCountMember.Match(resp.body) {
		extra = fmt.Appendf(extra, `"ScannedCount":%s,`, count)
	}
	rest := bytes.TrimSpace(resp.body[1:])
	if bytes.Equal(rest, []byte("}")) {
		extra = bytes.TrimSuffix(extra, []byte(","))
	}
	patched := append(append([]byte("{"), extra...), rest...)
	return wireResponse{status: resp.status, body: patched}
}

// countOnly turns a page into the answer to Select=COUNT: the counts and
// the paging key, no items.
func countOnly(resp wireResponse) wireResponse {
	var out map[string]json.RawMessage
	if json.Unmarshal(resp.body, &out) != nil {
		return resp
	}
	if len(out["Count"]) == 0 {
		out["Count"] = json.RawMessage("0")
	}
	if len(out["ScannedCount"]) == 0 {
		out["ScannedCount"] = out["Count"]
	}
	delete(out, "Items")
	return wireResponse{status: resp.status, body: mustJSON(out)}
}

var (
	countMember        = regexp.MustCompile(`"Count":([0-9]+)`)
	scannedCountMember = regexp.MustCompile(`"ScannedCount":[0-9]`)
)

// namesAttribute reports whether expr refers to attribute name, directly
// or through an expression attribute name.
func namesAttribute(expr string, names map[string]string, name string) bool {
	return slices.ContainsFunc(expressionToken.FindAllString(expr, -1), func(tok string) bool {
		if strings.HasPrefix(tok, ":") {
			return false
		}
		if alias, ok := names[tok]; ok {
			tok = alias
		}
		return tok == name
	})
}

func unquote(raw json.RawMessage) (string, bool) {
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err == nil
}

// remarshal writes inner back under field of outer and re-encodes the
// response; on failure the original response stands.
func remarshal(resp wireResponse, outer map[string]json.RawMessage, field string, inner any) wireResponse {
	raw, err := json.Marshal(inner)
	if err != nil {
		return resp
	}
	outer[field] = raw
	body, err := json.Marshal(outer)
	if err != nil {
		return resp
	}
	return wireResponse{status: resp.status, body: body}
}
