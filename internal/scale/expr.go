package scale

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The expressions the model evaluates are the lease protocol's: OR of AND
// terms, each a parenthesised expression, attribute_exists(#a),
// attribute_not_exists(#a) or a comparison of two operands (#name or
// :value). A missing attribute fails every comparison, as in DynamoDB.

// conditionHolds evaluates expr against item (nil when absent); an empty
// expression holds.
func conditionHolds(expr string, names map[string]string, values map[string]types.AttributeValue, item map[string]types.AttributeValue) (bool, error) {
	if expr == "" {
		return true, nil
	}
	p := &condParser{tokens: tokenize(expr), names: names, values: values, item: item}
	ok, err := p.or()
	if err == nil && p.pos != len(p.tokens) {
		err = fmt.Errorf("unexpected %q", p.tokens[p.pos])
	}
	if err != nil {
		return false, fmt.Errorf("scale: condition %q: %w", expr, err)
	}
	return ok, nil
}

// tokenize splits on spaces and around parentheses and commas.
func tokenize(expr string) []string {
	r := strings.NewReplacer("(", " ( ", ")", " ) ", ",", " , ")
	return strings.Fields(r.Replace(expr))
}

type condParser struct {
	tokens []string
	pos    int
	names  map[string]string
	values map[string]types.AttributeValue
	item   map[string]types.AttributeValue
}

func (p *condParser) peek() string {
	if p.pos < len(p.tokens) {
		return p.tokens[p.pos]
	}
	return ""
}

func (p *condParser) expect(tok string) error {
	if p.peek() != tok {
		return fmt.Errorf("want %q at token %d, got %q", tok, p.pos, p.peek())
	}
	p.pos++
	return nil
}

func (p *condParser) or() (bool, error) {
	result := false
	for {
		ok, err := p.and()
		if err != nil {
			return false, err
		}
		result = result || ok
		if p.peek() != "OR" {
			return result, nil
		}
		p.pos++
	}
}

func (p *condParser) and() (bool, error) {
	result := true
	for {
		ok, err := p.term()
		if err != nil {
			return false, err
		}
		result = result && ok
		if p.peek() != "AND" {
			return result, nil
		}
		p.pos++
	}
}

func (p *condParser) term() (bool, error) {
	switch tok := p.peek(); tok {
	case "(":
		p.pos++
		ok, err := p.or()
		if err != nil {
			return false, err
		}
		return ok, p.expect(")")
	case "attribute_exists", "attribute_not_exists":
		p.pos++
		if err := p.expect("("); err != nil {
			return false, err
		}
		v, err := p.operand()
		if err != nil {
			return false, err
		}
		return (v != nil) == (tok == "attribute_exists"), p.expect(")")
	}
	left, err := p.operand()
	if err != nil {
		return false, err
	}
	op := p.peek()
	p.pos++
	right, err := p.operand()
	if err != nil {
		return false, err
	}
	return compare(left, op, right)
}

// operand resolves #name to the item's attribute (nil when absent) and
// :value to the expression value.
func (p *condParser) operand() (types.AttributeValue, error) {
	tok := p.peek()
	p.pos++
	switch {
	case strings.HasPrefix(tok, "#"):
		name, ok := p.names[tok]
		if !ok {
			return nil, fmt.Errorf("undefined name %s", tok)
		}
		return p.item[name], nil
	case strings.HasPrefix(tok, ":"):
		v, ok := p.values[tok]
		if !ok {
			return nil, fmt.Errorf("undefined value %s", tok)
		}
		return v, nil
	}
	return nil, fmt.Errorf("not an operand: %q", tok)
}

// compare applies op to two numbers (compared as integers: the protocol's
// numbers are ticks) or two strings; anything else is false.
func compare(a types.AttributeValue, op string, b types.AttributeValue) (bool, error) {
	var c int
	switch x := a.(type) {
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return false, nil
		}
		xi, err1 := strconv.ParseInt(x.Value, 10, 64)
		yi, err2 := strconv.ParseInt(y.Value, 10, 64)
		if err1 != nil || err2 != nil {
			return false, fmt.Errorf("non-integer number %q or %q", x.Value, y.Value)
		}
		c = cmp.Compare(xi, yi)
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return false, nil
		}
		c = strings.Compare(x.Value, y.Value)
	default:
		return false, nil
	}
	switch op {
	case "=":
		return c == 0, nil
	case "<>":
		return c != 0, nil
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	case ">=":
		return c >= 0, nil
	}
	return false, fmt.Errorf("unknown comparison %q", op)
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
