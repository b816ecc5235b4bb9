package outboxlocal

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
)

// scanPartitions answers a Scan of a partitioned table: it scans the
// partitions' tables in the order of their partition-key values, each
// from the start, until Limit items are evaluated. The page's
// LastEvaluatedKey is the server's for the partition where the limit ran
// out, so an ExclusiveStartKey names both the partition to resume in and
// the key to resume after. The caller holds mu.
func (s *embeddedServer) scanPartitions(ctx context.Context, body []byte, req *wireRequest, info *tableInfo) wireResponse {
	var in map[string]json.RawMessage
	if json.Unmarshal(body, &in) != nil {
		return s.call(ctx, "Scan", body)
	}
	ids := sortedKeys(info.partitions)
	start, resume := 0, false
	if req.ExclusiveStartKey != nil {
		start, resume = slices.BinarySearch(ids, valueIdentity(req.ExclusiveStartKey[info.hashKey]))
	}
	if start == len(ids) {
		// Nothing left to scan: the empty user's table gives the server's
		// answer, or its refusal of the request.
		delete(in, "ExclusiveStartKey")
		return s.call(ctx, "Scan", mustJSON(in))
	}
	limit := 0
	if req.Limit != nil {
		limit = *req.Limit
	}
	items := []json.RawMessage{}
	var last map[string]json.RawMessage
	for i, evaluated := start, 0; i < len(ids); i++ {
		page := maps.Clone(in)
		page["TableName"] = mustJSON(info.partitions[ids[i]])
		if i != start || !resume {
			delete(page, "ExclusiveStartKey")
		}
		if limit > 0 {
			page["Limit"] = mustJSON(limit - evaluated)
		}
		resp := s.send(ctx, "Scan", mustJSON(page))
		if resp.status != http.StatusOK {
			return s.unroute("Scan", resp)
		}
		var out struct {
			Items            []json.RawMessage
			LastEvaluatedKey map[string]json.RawMessage
		}
		if err := json.Unmarshal(resp.body, &out); err != nil {
			return apiError(http.StatusInternalServerError, typeInternalServer, "decode partition scan: "+err.Error())
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) > 0 {
			last = out.LastEvaluatedKey
			break
		}
		if limit > 0 {
			evaluated += s.evaluatedItems(ctx, page, len(out.Items))
		}
	}
	page := map[string]any{"Items": items, "Count": len(items)}
	if last != nil {
		page["LastEvaluatedKey"] = last
	}
	return wireResponse{status: http.StatusOK, body: mustJSON(page)}
}

// evaluatedItems is how many items a Scan page that reached the end of its
// partition evaluated: the server counts every item it read against Limit,
// so with a filter that is every item after the start key, not the n it
// returned.
func (s *embeddedServer) evaluatedItems(ctx context.Context, page map[string]json.RawMessage, n int) int {
	if len(page["FilterExpression"]) == 0 {
		return n
	}
	all := map[string]json.RawMessage{"TableName": page["TableName"], "ConsistentRead": json.RawMessage("true")}
	if len(page["ExclusiveStartKey"]) > 0 {
		all["ExclusiveStartKey"] = page["ExclusiveStartKey"]
	}
	var out struct{ Count int }
	_ = json.Unmarshal(s.send(ctx, "Scan", mustJSON(all)).body, &out)
	return out.Count
}
