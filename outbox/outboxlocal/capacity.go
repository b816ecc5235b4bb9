package outboxlocal

import (
	"maps"
	"regexp"
	"strings"

	"github.com/spillway-dev/spillway/outbox/internal/ddblimits"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Capacity unit sizes: one write unit per started 1 KB, one strongly
// consistent read unit per started 4 KB.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

// writeUnits charges a write of an item of size bytes: one unit per started
// KB, at least one.
func writeUnits(size int) float64 {
	return float64(max(1, (size+writeUnitBytes-1)/writeUnitBytes))
}

// readUnits charges reading size bytes (one item, or the sum of a query's
// items): one unit per started 4 KB, at least one, halved for an eventually
// consistent read.
func readUnits(size int, consistent bool) float64 {
	units := float64(max(1, (size+readUnitBytes-1)/readUnitBytes))
	if !consistent {
		units /= 2
	}
	return units
}

// attrSizes is an item as the Counter remembers it: each attribute's value
// size. The item's size is the sum of names and values.
type attrSizes map[string]int

func sizesOf(item map[string]types.AttributeValue) attrSizes {
	out := make(attrSizes, len(item))
	for name, v := range item {
		out[name] = ddblimits.ValueSize(v)
	}
	return out
}

func (a attrSizes) total() int {
	n := 0
	for name, size := range a {
		n += len(name) + size
	}
	return n
}

// Update expressions: clauses start with these keywords; actions are
// separated by commas outside parentheses.
var (
	updateClause = regexp.MustCompile(`(?i)\b(SET|REMOVE|ADD|DELETE)\b`)
	placeholder  = regexp.MustCompile(`:[A-Za-z0-9_]+`)
)

// estimateUpdate applies an update expression to the remembered sizes of
// an item. Values are known exactly (they are in the request), so a SET of
// a top-level attribute to a value is exact; arithmetic, list_append,
// nested paths and set ADD/DELETE are approximated as documented in
// README.md.
func estimateUpdate(old attrSizes, expr string, names map[string]string, values map[string]types.AttributeValue) attrSizes {
	item := maps.Clone(old)
	if item == nil {
		item = attrSizes{}
	}
	bounds := updateClause.FindAllStringSubmatchIndex(expr, -1)
	for i, b := range bounds {
		end := len(expr)
		if i+1 < len(bounds) {
			end = bounds[i+1][0]
		}
		keyword := strings.ToUpper(expr[b[2]:b[3]])
		for _, action := range splitTopLevel(expr[b[1]:end]) {
			applyAction(item, keyword, action, names, values)
		}
	}
	return item
}

func applyAction(item attrSizes, keyword, action string, names map[string]string, values map[string]types.AttributeValue) {
	action = strings.TrimSpace(action)
	if action == "" {
		return
	}
	var path, operand string
	switch keyword {
	case "SET":
		eq := strings.IndexByte(action, '=')
		if eq < 0 {
			return
		}
		path, operand = action[:eq], action[eq+1:]
	case "REMOVE":
		path = action
	default: // ADD, DELETE: "path :value"
		fields := strings.Fields(action)
		if len(fields) != 2 {
			return
		}
		path, operand = fields[0], fields[1]
	}
	attr, nested := topAttribute(path, names)
	existing, exists := item[attr]
	valueSum := 0
	for _, p := range placeholder.FindAllString(operand, -1) {
		if v, ok := values[p]; ok {
			valueSum += ddblimits.ValueSize(v)
		}
	}
	switch {
	case keyword == "REMOVE":
		if !nested {
			delete(item, attr)
		}
	case nested:
		// A nested write grows the top-level attribute by what it writes.
		if !exists {
			existing = ddblimits.CollectionOverhead
		}
		item[attr] = existing + ddblimits.ElementOverhead + valueSum
	case keyword == "DELETE":
		item[attr] = max(0, existing-valueSum)
	case keyword == "ADD":
		if v, ok := values[strings.TrimSpace(operand)].(*types.AttributeValueMemberN); ok && exists {
			item[attr] = max(existing, ddblimits.NumberSize(v.Value))
		} else {
			item[attr] = existing + valueSum
		}
	default: // SET
		item[attr] = setSize(item, operand, existing, exists, valueSum, names)
	}
}

// setSize estimates the value a SET action writes.
func setSize(item attrSizes, operand string, existing int, exists bool, valueSum int, names map[string]string) int {
	op := strings.TrimSpace(operand)
	lower := strings.ToLower(op)
	switch {
	case strings.ContainsAny(op, "+-"):
		// Arithmetic on numbers (names with these characters must be
		// placeholders): the result has about as many digits as the
		// larger operand.
		return max(existing, valueSum)
	case strings.HasPrefix(lower, "if_not_exists"):
		if exists {
			return existing
		}
		return valueSum
	case strings.HasPrefix(lower, "list_append"):
		return existing + valueSum
	case valueSum == 0 && !strings.HasPrefix(op, ":"):
		// SET a = b copies another attribute.
		src, _ := topAttribute(op, names)
		return item[src]
	default:
		return valueSum
	}
}

// topAttribute resolves the first element of a document path and reports
// whether the path goes deeper.
func topAttribute(path string, names map[string]string) (string, bool) {
	path = strings.TrimSpace(path)
	end := strings.IndexAny(path, ".[")
	nested := end >= 0
	if nested {
		path = path[:end]
	}
	if alias, ok := names[path]; ok {
		path = alias
	}
	return path, nested
}

// splitTopLevel splits s at commas outside parentheses.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}
