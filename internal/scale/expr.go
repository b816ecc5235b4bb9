package scale

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/truora/minidyn/interpreter"
	mtypes "github.com/truora/minidyn/types"
)

// conditions evaluates the conditions of the model's writes: minidyn's
// interpreter, the embedded server's own, so that the model and the server
// cannot differ on a condition.
var conditions interpreter.Language

// conditionHolds evaluates expr against item (nil when absent); an empty
// expression holds.
func conditionHolds(expr string, names map[string]string, values, item map[string]types.AttributeValue) (bool, error) {
	if expr == "" {
		return true, nil
	}
	attrs, err := minidynItem(values)
	if err != nil {
		return false, err
	}
	stored, err := minidynItem(item)
	if err != nil {
		return false, err
	}
	ok, err := conditions.Match(interpreter.MatchInput{
		Expression: expr, ExpressionType: interpreter.ExpressionTypeConditional,
		Item: stored, Attributes: attrs, Aliases: names,
	})
	if err != nil {
		return false, fmt.Errorf("scale: condition %q: %w", expr, err)
	}
	return ok, nil
}

// minidynItem converts the attribute types of the lease protocol's items
// and values to minidyn's; any other type is not modelled.
func minidynItem(m map[string]types.AttributeValue) (map[string]*mtypes.Item, error) {
	out := make(map[string]*mtypes.Item, len(m))
	for name, v := range m {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[name] = &mtypes.Item{S: &v.Value}
		case *types.AttributeValueMemberN:
			out[name] = &mtypes.Item{N: &v.Value}
		case *types.AttributeValueMemberB:
			out[name] = &mtypes.Item{B: v.Value}
		case *types.AttributeValueMemberBOOL:
			out[name] = &mtypes.Item{BOOL: &v.Value}
		case *types.AttributeValueMemberNULL:
			out[name] = &mtypes.Item{NULL: &v.Value}
		default:
			return nil, fmt.Errorf("%w: attribute %s of type %T", errNotModelled, name, v)
		}
	}
	return out, nil
}

// tokenize splits on spaces and around parentheses and commas.
func tokenize(expr string) []string {
	r := strings.NewReplacer("(", " ( ", ")", " ) ", ",", " , ")
	return strings.Fields(r.Replace(expr))
}

// applyUpdate applies "SET #a = :v, ... REMOVE #b, ..." to item.
func applyUpdate(expr string, names map[string]string, values map[string]types.AttributeValue, item map[string]types.AttributeValue) error {
	tokens := tokenize(expr)
	clause := ""
	for i := 0; i < len(tokens); i++ {
		switch tok := tokens[i]; {
		case tok == "SET" || tok == "REMOVE":
			clause = tok
		case tok == ",":
		case clause == "SET" && i+2 < len(tokens) && tokens[i+1] == "=":
			name, ok1 := names[tok]
			v, ok2 := values[tokens[i+2]]
			if !ok1 || !ok2 {
				return fmt.Errorf("scale: update %q: undefined %s or %s", expr, tok, tokens[i+2])
			}
			item[name] = v
			i += 2
		case clause == "REMOVE":
			name, ok := names[tok]
			if !ok {
				return fmt.Errorf("scale: update %q: undefined %s", expr, tok)
			}
			delete(item, name)
		default:
			return fmt.Errorf("scale: update %q: %w at %q", expr, errNotModelled, tok)
		}
	}
	return nil
}
