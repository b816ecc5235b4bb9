package outboxlocal

import (
	"errors"
	"maps"
	"sync"

	"github.com/spillway-dev/spillway/outbox/internal/ddblimits"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Counts is a copy of what a Counter has seen. Every field counts request
// attempts, so an SDK retry counts again, as DynamoDB bills it.
type Counts struct {
	// Requests is the number of attempts per operation name ("PutItem").
	Requests map[string]int
	// Failed counts, per operation name, the attempts in Requests that
	// failed without being charged (a transport error, a server or
	// validation error), which the SDK may retry: Requests less Failed is
	// the attempts the endpoint carried out.
	Failed map[string]int
	// Refused counts refused conditional writes: each
	// ConditionalCheckFailedException, and each ConditionalCheckFailed
	// reason of a TransactionCanceledException.
	Refused int
	// Throttles counts attempts refused for throughput
	// (ProvisionedThroughputExceeded, Throttling, RequestLimitExceeded, and
	// cancelled transactions with a ThrottlingError reason).
	Throttles int
	// ReadUnits and WriteUnits are the capacity units computed with
	// DynamoDB's published sizing rules (see Counter).
	ReadUnits, WriteUnits float64
	// OpReadUnits and OpWriteUnits split the units by operation name.
	OpReadUnits, OpWriteUnits map[string]float64
	// ReportedReadUnits and ReportedWriteUnits sum the ConsumedCapacity
	// the endpoint returned, for responses that carried it (requests with
	// ReturnConsumedCapacity; see WithReportedCapacity). The embedded
	// server reports none.
	ReportedReadUnits, ReportedWriteUnits float64
}

// TotalRequests is the number of attempts of every operation.
func (c Counts) TotalRequests() int {
	n := 0
	for _, v := range c.Requests {
		n += v
	}
	return n
}

// Since returns c minus prev: what happened between two snapshots.
func (c Counts) Since(prev Counts) Counts {
	out := c.clone()
	for op, n := range prev.Requests {
		out.Requests[op] -= n
		if out.Requests[op] == 0 {
			delete(out.Requests, op)
		}
	}
	for op, u := range prev.OpReadUnits {
		out.OpReadUnits[op] -= u
		if out.OpReadUnits[op] == 0 {
			delete(out.OpReadUnits, op)
		}
	}
	for op, n := range prev.Failed {
		out.Failed[op] -= n
		if out.Failed[op] == 0 {
			delete(out.Failed, op)
		}
	}
	for op, u := range prev.OpWriteUnits {
		out.OpWriteUnits[op] -= u
		if out.OpWriteUnits[op] == 0 {
			delete(out.OpWriteUnits, op)
		}
	}
	out.Refused -= prev.Refused
	out.Throttles -= prev.Throttles
	out.ReadUnits -= prev.ReadUnits
	out.WriteUnits -= prev.WriteUnits
	out.ReportedReadUnits -= prev.ReportedReadUnits
	out.ReportedWriteUnits -= prev.ReportedWriteUnits
	return out
}

func (c Counts) clone() Counts {
	out := c
	out.Requests = maps.Clone(c.Requests)
	out.Failed = maps.Clone(c.Failed)
	out.OpReadUnits = maps.Clone(c.OpReadUnits)
	out.OpWriteUnits = maps.Clone(c.OpWriteUnits)
	if out.Requests == nil {
		out.Requests = map[string]int{}
	}
	if out.Failed == nil {
		out.Failed = map[string]int{}
	}
	if out.OpReadUnits == nil {
		out.OpReadUnits = map[string]float64{}
	}
	if out.OpWriteUnits == nil {
		out.OpWriteUnits = map[string]float64{}
	}
	return out
}

// Counter is SDK middleware that counts DynamoDB requests, refused
// conditional writes, throttles and capacity units. It sees every attempt of
// the clients it is attached to, against the embedded server or any
// endpoint, and is safe for concurrent use.
//
// Capacity follows DynamoDB's published rules, computed from request and
// response items (see ItemSize): a write costs one unit per started KB of
// the larger of the old and the new item, twice that inside a transaction;
// a refused conditional write is charged for the existing item (at least
// one unit); a delete for the deleted item; a strongly consistent read one
// unit per started 4 KB of the items read (a Query or Scan sums its items
// before rounding), an eventually consistent read half; at least one unit
// per request (half for an eventually consistent read). The old item's size
// is what the Counter last saw under that key (writes and full reads), so a
// delete or update of an item it never saw is charged as if the item were
// new; README.md lists the remaining approximations.
type Counter struct {
	book *schemaBook

	mu     sync.Mutex
	counts Counts
	items  map[string]map[string]attrSizes // table → item id → sizes
}

func newCounter(book *schemaBook) *Counter {
	c := &Counter{book: book, items: map[string]map[string]attrSizes{}}
	c.counts = Counts{}.clone()
	return c
}

// Snapshot returns a copy of the counts so far.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts.clone()
}

// Reset zeroes the counts. The remembered item sizes stay: they describe
// the table, not the traffic.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = Counts{}.clone()
}

// record counts one attempt of op with its input, its deserialized output
// (nil on error) and its error.
func (c *Counter) record(op string, input, output any, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.Requests[op]++
	c.learn(input, output)
	c.addReported(output)
	if isThrottle(err) {
		c.counts.Throttles++
		return
	}
	var ccf *types.ConditionalCheckFailedException
	refused := errors.As(err, &ccf)
	if refused {
		c.counts.Refused++
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case codeConditionFailed:
				c.counts.Refused++
				refused = true
			case "ThrottlingError":
				c.counts.Throttles++
				return
			}
		}
	}
	if err != nil && !refused {
		// Validation errors, server errors and the like are not charged.
		c.counts.Failed[op]++
		return
	}
	var read, write float64
	switch in := input.(type) {
	case *dynamodb.PutItemInput:
		write = c.putItem(in, ccf)
	case *dynamodb.UpdateItemInput:
		out, _ := output.(*dynamodb.UpdateItemOutput)
		write = c.updateItem(in, out, ccf)
	case *dynamodb.DeleteItemInput:
		out, _ := output.(*dynamodb.DeleteItemOutput)
		write = c.deleteItem(in, out, ccf)
	case *dynamodb.TransactWriteItemsInput:
		write = c.transactWriteItems(in, tce == nil)
	case *dynamodb.BatchWriteItemInput:
		out, _ := output.(*dynamodb.BatchWriteItemOutput)
		write = c.batchWriteItem(in, out)
	case *dynamodb.GetItemInput:
		out, _ := output.(*dynamodb.GetItemOutput)
		read = c.getItem(in, out)
	case *dynamodb.QueryInput:
		out, _ := output.(*dynamodb.QueryOutput)
		if out != nil {
			read = c.readItems(aws.ToString(in.TableName), out.Items, out.Count, in.Select, fullItems(in.ProjectionExpression, in.AttributesToGet, in.Select), aws.ToBool(in.ConsistentRead))
		}
	case *dynamodb.ScanInput:
		out, _ := output.(*dynamodb.ScanOutput)
		if out != nil {
			read = c.readItems(aws.ToString(in.TableName), out.Items, out.Count, in.Select, fullItems(in.ProjectionExpression, in.AttributesToGet, in.Select), aws.ToBool(in.ConsistentRead))
		}
	case *dynamodb.BatchGetItemInput:
		out, _ := output.(*dynamodb.BatchGetItemOutput)
		read = c.batchGetItem(in, out)
	case *dynamodb.TransactGetItemsInput:
		out, _ := output.(*dynamodb.TransactGetItemsOutput)
		read = c.transactGetItems(in, out)
	}
	c.counts.ReadUnits += read
	c.counts.WriteUnits += write
	if read > 0 {
		c.counts.OpReadUnits[op] += read
	}
	if write > 0 {
		c.counts.OpWriteUnits[op] += write
	}
}

// recordUnsent counts a request that a fault answered without sending it,
// charging nothing.
func (c *Counter) recordUnsent(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.Requests[op]++
}

// learn feeds key schemas and key maps to the schema book.
func (c *Counter) learn(input, output any) {
	switch in := input.(type) {
	case *dynamodb.CreateTableInput:
		c.book.learnSchema(aws.ToString(in.TableName), in.KeySchema)
	case *dynamodb.DescribeTableInput:
		if out, ok := output.(*dynamodb.DescribeTableOutput); ok && out.Table != nil {
			c.book.learnSchema(aws.ToString(in.TableName), out.Table.KeySchema)
		}
	case *dynamodb.DeleteTableInput:
		delete(c.items, aws.ToString(in.TableName))
	case *dynamodb.GetItemInput:
		c.book.learnKey(aws.ToString(in.TableName), in.Key)
	case *dynamodb.UpdateItemInput:
		c.book.learnKey(aws.ToString(in.TableName), in.Key)
	case *dynamodb.DeleteItemInput:
		c.book.learnKey(aws.ToString(in.TableName), in.Key)
	}
}

// old returns the remembered sizes of the item under key (nil if unknown).
func (c *Counter) old(table, id string) attrSizes {
	if id == "" {
		return nil
	}
	return c.items[table][id]
}

func (c *Counter) remember(table, id string, item attrSizes) {
	if id == "" {
		return
	}
	if c.items[table] == nil {
		c.items[table] = map[string]attrSizes{}
	}
	c.items[table][id] = item
}

func (c *Counter) forget(table, id string) {
	delete(c.items[table], id)
}

func (c *Counter) putItem(in *dynamodb.PutItemInput, ccf *types.ConditionalCheckFailedException) float64 {
	table := aws.ToString(in.TableName)
	id := c.book.itemID(table, in.Item)
	old := c.old(table, id).total()
	if ccf != nil {
		return writeUnits(max(old, ddblimits.ItemSize(ccf.Item)))
	}
	c.remember(table, id, sizesOf(in.Item))
	return writeUnits(max(old, ddblimits.ItemSize(in.Item)))
}

func (c *Counter) updateItem(in *dynamodb.UpdateItemInput, out *dynamodb.UpdateItemOutput, ccf *types.ConditionalCheckFailedException) float64 {
	table := aws.ToString(in.TableName)
	id := c.book.itemID(table, in.Key)
	old := c.old(table, id)
	if ccf != nil {
		return writeUnits(max(old.total(), ddblimits.ItemSize(ccf.Item)))
	}
	base := old
	if base == nil {
		base = sizesOf(in.Key)
	}
	updated := estimateUpdate(base, aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if out != nil && len(out.Attributes) > 0 {
		switch in.ReturnValues {
		case types.ReturnValueAllNew:
			updated = sizesOf(out.Attributes)
		case types.ReturnValueUpdatedNew:
			for name, v := range out.Attributes {
				updated[name] = ddblimits.ValueSize(v)
			}
		}
	}
	c.remember(table, id, updated)
	return writeUnits(max(old.total(), updated.total()))
}

func (c *Counter) deleteItem(in *dynamodb.DeleteItemInput, out *dynamodb.DeleteItemOutput, ccf *types.ConditionalCheckFailedException) float64 {
	table := aws.ToString(in.TableName)
	id := c.book.itemID(table, in.Key)
	size := c.old(table, id).total()
	if ccf != nil {
		return writeUnits(max(size, ddblimits.ItemSize(ccf.Item)))
	}
	if out != nil {
		size = max(size, ddblimits.ItemSize(out.Attributes))
	}
	c.forget(table, id)
	return writeUnits(size)
}

// transactWriteItems charges every action twice the units of the same
// write outside a transaction. A cancelled transaction is charged the same
// (its conditions read every item) but changes nothing.
func (c *Counter) transactWriteItems(in *dynamodb.TransactWriteItemsInput, applied bool) float64 {
	units := 0.0
	for _, t := range in.TransactItems {
		switch {
		case t.Put != nil:
			table := aws.ToString(t.Put.TableName)
			id := c.book.itemID(table, t.Put.Item)
			units += 2 * writeUnits(max(c.old(table, id).total(), ddblimits.ItemSize(t.Put.Item)))
			if applied {
				c.remember(table, id, sizesOf(t.Put.Item))
			}
		case t.Update != nil:
			table := aws.ToString(t.Update.TableName)
			id := c.book.itemID(table, t.Update.Key)
			old := c.old(table, id)
			base := old
			if base == nil {
				base = sizesOf(t.Update.Key)
			}
			updated := estimateUpdate(base, aws.ToString(t.Update.UpdateExpression), t.Update.ExpressionAttributeNames, t.Update.ExpressionAttributeValues)
			units += 2 * writeUnits(max(old.total(), updated.total()))
			if applied {
				c.remember(table, id, updated)
			}
		case t.Delete != nil:
			table := aws.ToString(t.Delete.TableName)
			id := c.book.itemID(table, t.Delete.Key)
			units += 2 * writeUnits(c.old(table, id).total())
			if applied {
				c.forget(table, id)
			}
		case t.ConditionCheck != nil:
			table := aws.ToString(t.ConditionCheck.TableName)
			id := c.book.itemID(table, t.ConditionCheck.Key)
			units += 2 * writeUnits(c.old(table, id).total())
		}
	}
	return units
}

// batchWriteItem charges every processed request like a single write; the
// requests returned unprocessed cost nothing.
func (c *Counter) batchWriteItem(in *dynamodb.BatchWriteItemInput, out *dynamodb.BatchWriteItemOutput) float64 {
	units := 0.0
	for table, writes := range in.RequestItems {
		unprocessed := map[string]bool{}
		if out != nil {
			for _, w := range out.UnprocessedItems[table] {
				unprocessed[c.writeID(table, w)] = true
			}
		}
		for _, w := range writes {
			id := c.writeID(table, w)
			if id != "" && unprocessed[id] {
				continue
			}
			old := c.old(table, id).total()
			if w.PutRequest != nil {
				units += writeUnits(max(old, ddblimits.ItemSize(w.PutRequest.Item)))
				c.remember(table, id, sizesOf(w.PutRequest.Item))
			} else {
				units += writeUnits(old)
				c.forget(table, id)
			}
		}
	}
	return units
}

func (c *Counter) writeID(table string, w types.WriteRequest) string {
	switch {
	case w.PutRequest != nil:
		return c.book.itemID(table, w.PutRequest.Item)
	case w.DeleteRequest != nil:
		return c.book.itemID(table, w.DeleteRequest.Key)
	default:
		return ""
	}
}

func (c *Counter) getItem(in *dynamodb.GetItemInput, out *dynamodb.GetItemOutput) float64 {
	table := aws.ToString(in.TableName)
	id := c.book.itemID(table, in.Key)
	if out == nil || out.Item == nil {
		c.forget(table, id)
		return readUnits(0, aws.ToBool(in.ConsistentRead))
	}
	if in.ProjectionExpression == nil && len(in.AttributesToGet) == 0 {
		c.remember(table, id, sizesOf(out.Item))
	}
	// A projection does not reduce the charge: the whole item is read.
	size := max(c.old(table, id).total(), ddblimits.ItemSize(out.Item))
	return readUnits(size, aws.ToBool(in.ConsistentRead))
}

// readItems charges a Query or Scan page by the sum of its items' full
// sizes. A COUNT page returns no items: it is charged Count items of the
// table's average remembered size.
func (c *Counter) readItems(table string, items []map[string]types.AttributeValue, count int32, sel types.Select, full, consistent bool) float64 {
	total := 0
	if sel == types.SelectCount {
		total = int(count) * c.averageSize(table)
		return readUnits(total, consistent)
	}
	for _, item := range items {
		id := c.book.itemID(table, item)
		if full {
			c.remember(table, id, sizesOf(item))
		}
		total += max(c.old(table, id).total(), ddblimits.ItemSize(item))
	}
	return readUnits(total, consistent)
}

func (c *Counter) averageSize(table string) int {
	items := c.items[table]
	if len(items) == 0 {
		return 0
	}
	total := 0
	for _, item := range items {
		total += item.total()
	}
	return total / len(items)
}

// batchGetItem and transactGetItems round every item separately.
func (c *Counter) batchGetItem(in *dynamodb.BatchGetItemInput, out *dynamodb.BatchGetItemOutput) float64 {
	if out == nil {
		return 0
	}
	units := 0.0
	for table, items := range out.Responses {
		consistent := aws.ToBool(in.RequestItems[table].ConsistentRead)
		for _, item := range items {
			units += readUnits(max(c.old(table, c.book.itemID(table, item)).total(), ddblimits.ItemSize(item)), consistent)
		}
	}
	return units
}

func (c *Counter) transactGetItems(in *dynamodb.TransactGetItemsInput, out *dynamodb.TransactGetItemsOutput) float64 {
	units := 0.0
	for i, t := range in.TransactItems {
		if t.Get == nil {
			continue
		}
		table := aws.ToString(t.Get.TableName)
		size := c.old(table, c.book.itemID(table, t.Get.Key)).total()
		if out != nil && i < len(out.Responses) {
			size = max(size, ddblimits.ItemSize(out.Responses[i].Item))
		}
		units += 2 * readUnits(size, true)
	}
	return units
}

// fullItems reports whether a read returns whole items.
func fullItems(projection *string, attributes []string, sel types.Select) bool {
	return projection == nil && len(attributes) == 0 && (sel == "" || sel == types.SelectAllAttributes)
}

// addReported sums the ConsumedCapacity an endpoint returned.
func (c *Counter) addReported(output any) {
	var caps []types.ConsumedCapacity
	write := false
	switch out := output.(type) {
	case *dynamodb.PutItemOutput:
		caps, write = appendCapacity(caps, out.ConsumedCapacity), true
	case *dynamodb.UpdateItemOutput:
		caps, write = appendCapacity(caps, out.ConsumedCapacity), true
	case *dynamodb.DeleteItemOutput:
		caps, write = appendCapacity(caps, out.ConsumedCapacity), true
	case *dynamodb.BatchWriteItemOutput:
		caps, write = out.ConsumedCapacity, true
	case *dynamodb.TransactWriteItemsOutput:
		caps, write = out.ConsumedCapacity, true
	case *dynamodb.GetItemOutput:
		caps = appendCapacity(caps, out.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		caps = appendCapacity(caps, out.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		caps = appendCapacity(caps, out.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		caps = out.ConsumedCapacity
	case *dynamodb.TransactGetItemsOutput:
		caps = out.ConsumedCapacity
	}
	for _, cc := range caps {
		switch {
		case cc.ReadCapacityUnits != nil || cc.WriteCapacityUnits != nil:
			c.counts.ReportedReadUnits += aws.ToFloat64(cc.ReadCapacityUnits)
			c.counts.ReportedWriteUnits += aws.ToFloat64(cc.WriteCapacityUnits)
		case write:
			c.counts.ReportedWriteUnits += aws.ToFloat64(cc.CapacityUnits)
		default:
			c.counts.ReportedReadUnits += aws.ToFloat64(cc.CapacityUnits)
		}
	}
}

func appendCapacity(caps []types.ConsumedCapacity, cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return caps
	}
	return append(caps, *cc)
}

// throttleCodes are the error codes DynamoDB uses to refuse for throughput.
var throttleCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"ThrottlingException":                    true,
	"Throttling":                             true,
	"RequestLimitExceeded":                   true,
}

func isThrottle(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && throttleCodes[apiErr.ErrorCode()]
}
