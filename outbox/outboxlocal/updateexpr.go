package outboxlocal

import (
	"fmt"
	"regexp"
	"strings"
)

// Update expressions are parsed here only as far as the REMOVE
// compensation needs: which document paths each action targets. Values,
// functions and arithmetic on the right of SET are skipped over.

// removeKeyword finds a REMOVE clause keyword: reserved words cannot name
// attributes, so the word outside a #name or :value placeholder is the
// keyword.
var removeKeyword = regexp.MustCompile(`(?i)(^|[^#:A-Za-z0-9_])REMOVE($|[^A-Za-z0-9_])`)

// docPath is a resolved document path: attribute names (placeholders
// replaced) and list indexes written "[n]".
type docPath []string

func (p docPath) String() string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 && !strings.HasPrefix(e, "[") {
			b.WriteByte('.')
		}
		b.WriteString(e)
	}
	return b.String()
}

// overlaps reports whether one path is a prefix of the other, which
// DynamoDB refuses between two actions of one update expression.
func (p docPath) overlaps(q docPath) bool {
	n := min(len(p), len(q))
	for i := range n {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// updateTargets is what an update expression writes.
type updateTargets struct {
	// removed are the top-level attributes of the REMOVE clause.
	removed []string
	// all are the target paths of every action, REMOVE included.
	all []docPath
}

// errUpdateExpression is a ValidationException message for an update
// expression the layer refuses, spelled as DynamoDB spells it.
type errUpdateExpression string

func (e errUpdateExpression) Error() string { return string(e) }

// parseRemovals returns the top-level attributes an update expression
// removes; nil when it has no REMOVE clause. Nested REMOVE paths (a.b,
// a[0]) are left out: the server applies those itself. An undefined
// #name, a syntax it cannot follow and overlapping paths are refused as
// DynamoDB refuses them, since applying the removal after the server ran
// the rest of the update would otherwise produce an item DynamoDB never
// writes.
func parseRemovals(expr string, names map[string]string) ([]string, error) {
	if !removeKeyword.MatchString(expr) {
		return nil, nil
	}
	toks, err := tokenizeUpdate(expr)
	if err != nil {
		return nil, err
	}
	targets, err := collectTargets(toks, names)
	if err != nil {
		return nil, err
	}
	for i, p := range targets.all {
		for _, q := range targets.all[i+1:] {
			if p.overlaps(q) {
				return nil, errUpdateExpression(fmt.Sprintf(
					"Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [%s], path two: [%s]",
					strings.Join(p, ", "), strings.Join(q, ", ")))
			}
		}
	}
	return targets.removed, nil
}

type tokenKind int

const (
	tokWord        tokenKind = iota + 1 // name, keyword or function
	tokName                             // #placeholder
	tokValue                            // :placeholder
	tokNumber                           // list index
	tokPunctuation                      // , . [ ] ( ) = + -
)

type token struct {
	kind tokenKind
	text string
}

func tokenizeUpdate(expr string) ([]token, error) {
	var toks []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.IndexByte(",.[]()=+-", c) >= 0:
			toks = append(toks, token{tokPunctuation, string(c)})
			i++
		case c == '#' || c == ':' || isWordByte(c):
			j := i + 1
			for j < len(expr) && isWordByte(expr[j]) {
				j++
			}
			kind := tokWord
			switch {
			case c == '#':
				kind = tokName
			case c == ':':
				kind = tokValue
			case c >= '0' && c <= '9':
				kind = tokNumber
			}
			if (kind == tokName || kind == tokValue) && j == i+1 {
				return nil, syntaxError(expr, i)
			}
			toks = append(toks, token{kind, expr[i:j]})
			i = j
		default:
			return nil, syntaxError(expr, i)
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func syntaxError(expr string, at int) error {
	return errUpdateExpression(fmt.Sprintf("Invalid UpdateExpression: Syntax error; token: %q, near: %q", expr[at:at+1], expr[max(at-8, 0):min(at+8, len(expr))]))
}

// collectTargets splits the tokens into clauses and actions (commas
// outside parentheses) and reads each action's target path.
func collectTargets(toks []token, names map[string]string) (updateTargets, error) {
	var out updateTargets
	clause := ""
	var action []token
	depth := 0
	flush := func() error {
		if len(action) == 0 {
			return nil
		}
		if clause == "" {
			return errUpdateExpression("Invalid UpdateExpression: Syntax error; the expression does not start with SET, REMOVE, ADD or DELETE")
		}
		path, rest, err := readPath(action, names)
		if err != nil {
			return err
		}
		if clause == "REMOVE" && len(rest) > 0 {
			return errUpdateExpression(fmt.Sprintf("Invalid UpdateExpression: Syntax error; token: %q, near REMOVE %s", rest[0].text, path))
		}
		out.all = append(out.all, path)
		if clause == "REMOVE" && len(path) == 1 {
			out.removed = append(out.removed, path[0])
		}
		action = action[:0]
		return nil
	}
	for _, t := range toks {
		if depth == 0 && t.kind == tokWord {
			switch kw := strings.ToUpper(t.text); kw {
			case "SET", "REMOVE", "ADD", "DELETE":
				if err := flush(); err != nil {
					return out, err
				}
				clause = kw
				continue
			}
		}
		switch t.text {
		case "(":
			depth++
		case ")":
			depth--
		}
		if depth == 0 && t.kind == tokPunctuation && t.text == "," {
			if err := flush(); err != nil {
				return out, err
			}
			continue
		}
		action = append(action, t)
	}
	return out, flush()
}

// readPath reads the document path at the start of toks (an attribute
// name or #name, then .name, .#name or [n] elements) and returns the rest.
func readPath(toks []token, names map[string]string) (docPath, []token, error) {
	var path docPath
	element := func(t token) (string, error) {
		switch t.kind {
		case tokWord:
			return t.text, nil
		case tokName:
			name, ok := names[t.text]
			if !ok {
				return "", errUpdateExpression("Invalid UpdateExpression: An expression attribute name used in the document path is not defined; attribute name: " + t.text)
			}
			return name, nil
		default:
			return "", errUpdateExpression(fmt.Sprintf("Invalid UpdateExpression: Syntax error; token: %q", t.text))
		}
	}
	first, err := element(toks[0])
	if err != nil {
		return nil, nil, err
	}
	path = append(path, first)
	i := 1
	for i < len(toks) {
		switch {
		case toks[i].text == "." && i+1 < len(toks):
			e, err := element(toks[i+1])
			if err != nil {
				return nil, nil, err
			}
			path = append(path, e)
			i += 2
		case toks[i].text == "[" && i+2 < len(toks) && toks[i+1].kind == tokNumber && toks[i+2].text == "]":
			path = append(path, "["+toks[i+1].text+"]")
			i += 3
		default:
			return path, toks[i:], nil
		}
	}
	return path, nil, nil
}
