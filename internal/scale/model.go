package scale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Key attribute names of the table the model holds (the store's defaults).
const (
	modelPartitionKey = "PK"
	modelSortKey      = "SK"
	// queryPageBytes is DynamoDB's page size: a Query stops once it has
	// read 1 MB of items.
	queryPageBytes = 1 << 20
	// Capacity unit sizes (see outboxlocal.Counter).
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

var errNotModelled = errors.New("scale: the model answers only the acquisition round's requests")

// model is an in-memory table answering the requests of acquisition
// rounds (Query of a partition, conditional PutItem, UpdateItem and
// DeleteItem with the lease protocol's expressions) and counting them with
// outboxlocal.Counter's rules. It exists because the embedded server spends
// most of a large fleet's run on HTTP and JSON; the package's tests run the
// same fleets on both and require the same counts.
type model struct {
	mu         sync.Mutex
	partitions map[string]map[string]stored // pk → sk → item
	counts     outboxlocal.Counts
}

// stored is an item with its size, computed once when it is written.
// Items are never changed in place: a write stores a new map (a shallow
// copy: attribute values are never changed in place either), so reads
// return them without copying.
type stored struct {
	item map[string]types.AttributeValue
	size int
}

func newModel() *model {
	return &model{partitions: map[string]map[string]stored{}, counts: outboxlocal.Counts{Requests: map[string]int{}}}
}

func (m *model) client() outboxddb.Client { return modelClient{m} }
func (m *model) table() string            { return "scale-model" }
func (m *model) close()                   {}

func (m *model) tally() outboxlocal.Counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts.Since(outboxlocal.Counts{})
}

// modelClient is the model seen through outboxddb.Client.
type modelClient struct{ m *model }

var _ outboxddb.Client = modelClient{}

func keyOf(item map[string]types.AttributeValue) (pk, sk string, err error) {
	p, ok1 := item[modelPartitionKey].(*types.AttributeValueMemberS)
	s, ok2 := item[modelSortKey].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return "", "", fmt.Errorf("scale: item without string keys %s and %s", modelPartitionKey, modelSortKey)
	}
	return p.Value, s.Value, nil
}

func (m *model) get(pk, sk string) map[string]types.AttributeValue { return m.partitions[pk][sk].item }

func (m *model) set(pk, sk string, item map[string]types.AttributeValue) {
	if m.partitions[pk] == nil {
		m.partitions[pk] = map[string]stored{}
	}
	m.partitions[pk][sk] = stored{item: item, size: outboxddb.ItemSize(item)}
}

// write charges and counts a write attempt on an item whose size was old
// and is now updated (zero when absent); refused writes are charged for
// the existing item, at least one unit.
func (m *model) write(op string, old, updated int, refused bool) {
	m.counts.Requests[op]++
	if refused {
		m.counts.Refused++
		updated = 0
	}
	m.counts.WriteUnits += float64(max(1, (max(old, updated)+writeUnitBytes-1)/writeUnitBytes))
}

// refusal is the answer to a write whose condition failed.
func refusal() error {
	return &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
}

// condWrite is one conditional write: its key, condition and the item it
// leaves (nil: the item is deleted).
type condWrite struct {
	op     string
	key    map[string]types.AttributeValue
	cond   *string
	names  map[string]string
	values map[string]types.AttributeValue
	after  func(old map[string]types.AttributeValue) (map[string]types.AttributeValue, error)
}

// apply runs w: it evaluates the condition on the stored item, charges the
// attempt and stores what w leaves, or refuses.
func (m *model) apply(w condWrite) error {
	pk, sk, err := keyOf(w.key)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.get(pk, sk)
	ok, err := conditionHolds(aws.ToString(w.cond), w.names, w.values, old)
	if err != nil {
		return err
	}
	if !ok {
		m.write(w.op, outboxddb.ItemSize(old), 0, true)
		return refusal()
	}
	updated, err := w.after(old)
	if err != nil {
		return err
	}
	m.write(w.op, outboxddb.ItemSize(old), outboxddb.ItemSize(updated), false)
	if updated == nil {
		delete(m.partitions[pk], sk)
		return nil
	}
	m.set(pk, sk, updated)
	return nil
}

func (c modelClient) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	err := c.m.apply(condWrite{op: "PutItem", key: in.Item, cond: in.ConditionExpression,
		names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues,
		after: func(map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
			return maps.Clone(in.Item), nil
		}})
	if err != nil {
		return nil, err
	}
	return &dynamodb.PutItemOutput{}, nil
}

func (c modelClient) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	err := c.m.apply(condWrite{op: "UpdateItem", key: in.Key, cond: in.ConditionExpression,
		names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues,
		after: func(old map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
			updated := maps.Clone(old)
			if updated == nil {
				updated = maps.Clone(in.Key)
			}
			return updated, applyUpdate(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues, updated)
		}})
	if err != nil {
		return nil, err
	}
	return &dynamodb.UpdateItemOutput{}, nil
}

func (c modelClient) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	err := c.m.apply(condWrite{op: "DeleteItem", key: in.Key, cond: in.ConditionExpression,
		names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues,
		after: func(map[string]types.AttributeValue) (map[string]types.AttributeValue, error) { return nil, nil }})
	if err != nil {
		return nil, err
	}
	return &dynamodb.DeleteItemOutput{}, nil
}

// Query answers "#pk = :pk", optionally "AND begins_with(#sk, :prefix)",
// in sort-key order, 1 MB pages.
func (c modelClient) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	m := c.m
	expr := aws.ToString(in.KeyConditionExpression)
	pkv, ok := in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS)
	if !ok || in.ExpressionAttributeNames["#pk"] != modelPartitionKey {
		return nil, fmt.Errorf("%w: key condition %q", errNotModelled, expr)
	}
	prefix := ""
	switch expr {
	case "#pk = :pk":
	case "#pk = :pk AND begins_with(#sk, :prefix)":
		p, ok := in.ExpressionAttributeValues[":prefix"].(*types.AttributeValueMemberS)
		if !ok || in.ExpressionAttributeNames["#sk"] != modelSortKey {
			return nil, fmt.Errorf("%w: key condition %q", errNotModelled, expr)
		}
		prefix = p.Value
	default:
		return nil, fmt.Errorf("%w: key condition %q", errNotModelled, expr)
	}
	after := ""
	if in.ExclusiveStartKey != nil {
		_, sk, err := keyOf(in.ExclusiveStartKey)
		if err != nil {
			return nil, err
		}
		after = sk
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	part := m.partitions[pkv.Value]
	keys := make([]string, 0, len(part))
	for sk := range part {
		if strings.HasPrefix(sk, prefix) && (in.ExclusiveStartKey == nil || sk > after) {
			keys = append(keys, sk)
		}
	}
	slices.Sort(keys)
	out := &dynamodb.QueryOutput{}
	size := 0
	for _, sk := range keys {
		size += part[sk].size
		out.Items = append(out.Items, part[sk].item)
		if size >= queryPageBytes {
			out.LastEvaluatedKey = map[string]types.AttributeValue{modelPartitionKey: pkv, modelSortKey: &types.AttributeValueMemberS{Value: sk}}
			break
		}
	}
	out.Count = int32(len(out.Items))
	out.ScannedCount = out.Count
	m.counts.Requests["Query"]++
	units := float64(max(1, (size+readUnitBytes-1)/readUnitBytes))
	if !aws.ToBool(in.ConsistentRead) {
		units /= 2
	}
	m.counts.ReadUnits += units
	return out, nil
}

func (modelClient) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return nil, fmt.Errorf("%w: BatchWriteItem", errNotModelled)
}

func (modelClient) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, fmt.Errorf("%w: TransactWriteItems", errNotModelled)
}

func (modelClient) TransactGetItems(context.Context, *dynamodb.TransactGetItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return nil, fmt.Errorf("%w: TransactGetItems", errNotModelled)
}

func (modelClient) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return nil, fmt.Errorf("%w: CreateTable", errNotModelled)
}

func (modelClient) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, fmt.Errorf("%w: DescribeTable", errNotModelled)
}
