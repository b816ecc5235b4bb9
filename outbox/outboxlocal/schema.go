package outboxlocal

import (
	"encoding/hex"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Default key attribute names of an outbox table (facts §9), assumed for a
// table whose schema the middleware has not seen.
const (
	DefaultPartitionKey = "PK"
	DefaultSortKey      = "SK"
)

// schemaBook remembers the key attributes of the tables the middleware has
// seen, from CreateTable requests, DescribeTable answers and key maps, so
// the Counter can remember item sizes by key and Faults can find an item.
type schemaBook struct {
	mu     sync.Mutex
	tables map[string]keyNames
}

// keyNames are a table's key attributes; ordered is false when they were
// learnt from a key map, which does not say which one is the partition key.
type keyNames struct {
	hash, rng string
	ordered   bool
}

func newSchemaBook() *schemaBook { return &schemaBook{tables: map[string]keyNames{}} }

func (b *schemaBook) learnSchema(table string, schema []types.KeySchemaElement) {
	var k keyNames
	for _, e := range schema {
		if e.AttributeName == nil {
			continue
		}
		if e.KeyType == types.KeyTypeHash {
			k.hash = *e.AttributeName
		} else {
			k.rng = *e.AttributeName
		}
	}
	if k.hash == "" {
		return
	}
	k.ordered = true
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tables[table] = k
}

func (b *schemaBook) learnKey(table string, key map[string]types.AttributeValue) {
	if table == "" || len(key) == 0 || len(key) > 2 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.tables[table]; ok {
		return
	}
	names := sortedKeys(key)
	k := keyNames{hash: names[0]}
	if len(names) == 2 {
		k.rng = names[1]
	}
	b.tables[table] = k
}

func (b *schemaBook) names(table string) keyNames {
	b.mu.Lock()
	defer b.mu.Unlock()
	if k, ok := b.tables[table]; ok {
		return k
	}
	return keyNames{hash: DefaultPartitionKey, rng: DefaultSortKey, ordered: true}
}

// itemID identifies the item holding item's key in table, or "" when item
// lacks a key attribute.
func (b *schemaBook) itemID(table string, item map[string]types.AttributeValue) string {
	k := b.names(table)
	var sb strings.Builder
	for _, name := range []string{k.hash, k.rng} {
		if name == "" {
			continue
		}
		v, ok := item[name]
		if !ok {
			return ""
		}
		sb.WriteString(name)
		sb.WriteByte('=')
		sb.WriteString(scalarID(v))
		sb.WriteByte(0)
	}
	return sb.String()
}

// matches reports whether item's key is (pk, sk) in table.
func (b *schemaBook) matches(table string, item map[string]types.AttributeValue, pk, sk string) bool {
	k := b.names(table)
	if scalarText(item[k.hash]) == pk && scalarText(item[k.rng]) == sk {
		return true
	}
	return !k.ordered && scalarText(item[k.rng]) == pk && scalarText(item[k.hash]) == sk
}

// scalarID is a typed text form of a key value.
func scalarID(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *types.AttributeValueMemberB:
		return "B:" + hex.EncodeToString(v.Value)
	default:
		return "?"
	}
}

// scalarText is the text of an S or N value ("" otherwise, or when absent).
func scalarText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	default:
		return ""
	}
}
