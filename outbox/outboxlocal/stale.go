package outboxlocal

import (
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// StaleReads makes eventually consistent reads lag behind writes, as a
// DynamoDB replica that has not caught up yet: until it is set to zero, a
// Query, Scan or GetItem without ConsistentRead leaves out every item that a
// client with these Faults wrote less than lag ago (PutItem, UpdateItem, a
// BatchWriteItem put, a TransactWriteItems Put or Update), on the time
// package's clock: a bubble's in a simulation. Strongly consistent reads see
// everything.
//
// It is an approximation, the same for every request: a lagging item is
// left out whole (a replica would still show its previous version), a
// delete is not delayed (a replica would still show the item), and only
// writes through clients with these Faults attached are known. A query
// page that loses items keeps its LastEvaluatedKey; a query's items are
// identified by its partition (from the `name = :value` clause of its key
// condition) and their sort key, so a projection must keep the sort key;
// Select=COUNT answers are not adjusted.
func (f *Faults) StaleReads(lag time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.staleLag = max(lag, 0)
	if f.staleLag == 0 {
		clear(f.written)
	}
}

// noteWrites remembers when the items a successful write request touched
// were written, while StaleReads is on.
func (f *Faults) noteWrites(params any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.staleLag == 0 {
		return
	}
	now := time.Now()
	note := func(table *string, item map[string]types.AttributeValue) {
		if id := f.book.itemID(aws.ToString(table), item); id != "" {
			f.written[aws.ToString(table)+"\x00"+id] = now
		}
	}
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		note(in.TableName, in.Item)
	case *dynamodb.UpdateItemInput:
		note(in.TableName, in.Key)
	case *dynamodb.BatchWriteItemInput:
		for table, writes := range in.RequestItems {
			for _, w := range writes {
				if w.PutRequest != nil {
					note(aws.String(table), w.PutRequest.Item)
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				note(it.Put.TableName, it.Put.Item)
			case it.Update != nil:
				note(it.Update.TableName, it.Update.Key)
			}
		}
	}
}

// lagging reports whether item of table was written less than the lag ago.
// The caller holds f.mu.
func (f *Faults) laggingLocked(table string, item map[string]types.AttributeValue) bool {
	id := f.book.itemID(table, item)
	at, ok := f.written[table+"\x00"+id]
	return ok && id != "" && time.Since(at) < f.staleLag
}

// staleRead removes the lagging items from the answer of an eventually
// consistent read.
func (f *Faults) staleRead(params, result any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.staleLag == 0 {
		return
	}
	drop := func(table *string, items []map[string]types.AttributeValue, partition types.AttributeValue) ([]map[string]types.AttributeValue, int32) {
		hash := f.book.names(aws.ToString(table)).hash
		kept := slices.DeleteFunc(items, func(item map[string]types.AttributeValue) bool {
			if _, ok := item[hash]; !ok && partition != nil {
				item = maps.Clone(item)
				item[hash] = partition
			}
			return f.laggingLocked(aws.ToString(table), item)
		})
		return kept, int32(len(items) - len(kept))
	}
	switch in := params.(type) {
	case *dynamodb.QueryInput:
		if out, ok := result.(*dynamodb.QueryOutput); ok && !aws.ToBool(in.ConsistentRead) {
			var n int32
			hash := f.book.names(aws.ToString(in.TableName)).hash
			out.Items, n = drop(in.TableName, out.Items, queryPartition(in, hash))
			out.Count -= n
			out.ScannedCount = max(out.ScannedCount-n, 0)
		}
	case *dynamodb.ScanInput:
		if out, ok := result.(*dynamodb.ScanOutput); ok && !aws.ToBool(in.ConsistentRead) {
			var n int32
			out.Items, n = drop(in.TableName, out.Items, nil)
			out.Count -= n
			out.ScannedCount = max(out.ScannedCount-n, 0)
		}
	case *dynamodb.GetItemInput:
		if out, ok := result.(*dynamodb.GetItemOutput); ok && !aws.ToBool(in.ConsistentRead) &&
			out.Item != nil && f.laggingLocked(aws.ToString(in.TableName), in.Key) {
			out.Item = nil
		}
	}
}

// queryPartition returns the partition key value of a query; nil when its
// key condition requires none.
func queryPartition(in *dynamodb.QueryInput, hash string) types.AttributeValue {
	placeholder := partitionPlaceholder(aws.ToString(in.KeyConditionExpression), in.ExpressionAttributeNames, hash)
	return in.ExpressionAttributeValues[placeholder]
}
