// Package sqlfilter parses and evaluates RocketMQ's SQL92 message filters (a consumer subscribes
// with expressionType SQL92 and an expression such as "a BETWEEN 0 AND 3 AND region = 'eu'"),
// which the broker applies to each message's properties when enablePropertyFilter is on.
//
// The grammar is RocketMQ's (itself the JMS selector subset): OR, AND, NOT; comparisons =, <>,
// !=, >, >=, <, <=; [NOT] BETWEEN x AND y; [NOT] IN ('a', 'b'); IS [NOT] NULL; [NOT] CONTAINS,
// [NOT] STARTSWITH, [NOT] ENDSWITH with a string; parentheses; string literals in single quotes
// (two single quotes stand for one), integer and decimal numbers, TRUE, FALSE, NULL; identifiers
// name message properties (letters, digits, '_', '$', '.'), and a bare property is a condition
// when its value is "true" or "false". Keywords are case-insensitive.
//
// Evaluation follows SQL's three-valued logic the way RocketMQ does: a missing property is NULL,
// and a comparison with NULL is unknown, which never selects a message (NOT unknown is unknown).
// Property values are strings; compared with a number they are read as numbers (a value that is
// not a number makes the comparison unknown), compared with a string they are compared as
// strings (ordering comparisons between strings are unknown, as in RocketMQ).
package sqlfilter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// ErrSyntax wraps every parse error.
var ErrSyntax = errors.New("sql92 filter syntax error")

// Expr is a parsed filter. It is immutable and safe for concurrent use.
type Expr struct {
	root node
	src  string
}

// String returns the expression as written.
func (e *Expr) String() string { return e.src }

// Match reports whether a message with these properties is selected. props may be nil.
func (e *Expr) Match(props map[string]string) bool {
	return e.root.eval(props) == vTrue
}

// Parse parses expr. An empty expression is an error: a SQL92 subscription must say something.
func Parse(expr string) (*Expr, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if p.peek().kind == tEOF {
		return nil, fmt.Errorf("%w: empty expression", ErrSyntax)
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, fmt.Errorf("%w: unexpected %q at %d", ErrSyntax, t.text, t.pos)
	}
	if _, ok := n.(boolNode); !ok {
		return nil, fmt.Errorf("%w: %q is not a condition", ErrSyntax, expr)
	}
	return &Expr{root: n, src: expr}, nil
}

// ---- three-valued logic ----

type tri int8

const (
	vUnknown tri = iota
	vFalse
	vTrue
)

func triOf(b bool) tri {
	if b {
		return vTrue
	}
	return vFalse
}

// ---- values ----

// value is an operand: a string, a number, a boolean or NULL.
type value struct {
	kind byte // 's', 'n', 'b', 0 = NULL
	s    string
	n    float64
	b    bool
}

// node is a parsed sub-expression.
type node interface {
	eval(props map[string]string) tri
}

// boolNode marks nodes that yield a condition (not an operand).
type boolNode interface {
	node
	isBool()
}

// operand yields a value.
type operand interface {
	value(props map[string]string) value
}

type literal struct{ v value }

func (l literal) value(map[string]string) value { return l.v }

// eval of a literal TRUE/FALSE used as a condition.
func (l literal) eval(map[string]string) tri {
	if l.v.kind == 'b' {
		return triOf(l.v.b)
	}
	return vUnknown
}
func (l literal) isBool() {}

type property struct{ name string }

func (p property) value(props map[string]string) value {
	v, ok := props[p.name]
	if !ok {
		return value{}
	}
	return value{kind: 's', s: v}
}

// eval of a bare property used as a condition: "true"/"false" properties.
func (p property) eval(props map[string]string) tri {
	v, ok := props[p.name]
	if !ok {
		return vUnknown
	}
	switch strings.ToLower(v) {
	case "true":
		return vTrue
	case "false":
		return vFalse
	}
	return vUnknown
}
func (p property) isBool() {}

type andNode struct{ l, r node }

func (n andNode) eval(p map[string]string) tri {
	l := n.l.eval(p)
	if l == vFalse {
		return vFalse
	}
	r := n.r.eval(p)
	switch {
	case r == vFalse:
		return vFalse
	case l == vTrue && r == vTrue:
		return vTrue
	}
	return vUnknown
}
func (andNode) isBool() {}

type orNode struct{ l, r node }

func (n orNode) eval(p map[string]string) tri {
	l := n.l.eval(p)
	if l == vTrue {
		return vTrue
	}
	r := n.r.eval(p)
	switch {
	case r == vTrue:
		return vTrue
	case l == vFalse && r == vFalse:
		return vFalse
	}
	return vUnknown
}
func (orNode) isBool() {}

type notNode struct{ x node }

func (n notNode) eval(p map[string]string) tri {
	switch n.x.eval(p) {
	case vTrue:
		return vFalse
	case vFalse:
		return vTrue
	}
	return vUnknown
}
func (notNode) isBool() {}

// cmpNode is a binary comparison.
type cmpNode struct {
	op   string
	l, r operand
}

func (n cmpNode) eval(p map[string]string) tri {
	return compare(n.op, n.l.value(p), n.r.value(p))
}
func (cmpNode) isBool() {}

// compare applies op to two values with the conversions described in the package doc.
func compare(op string, l, r value) tri {
	if l.kind == 0 || r.kind == 0 {
		return vUnknown
	}
	if l.kind == 'n' || r.kind == 'n' {
		a, ok1 := asNumber(l)
		b, ok2 := asNumber(r)
		if !ok1 || !ok2 {
			return vUnknown
		}
		switch op {
		case "=":
			return triOf(a == b)
		case "<>":
			return triOf(a != b)
		case ">":
			return triOf(a > b)
		case ">=":
			return triOf(a >= b)
		case "<":
			return triOf(a < b)
		case "<=":
			return triOf(a <= b)
		}
		return vUnknown
	}
	if l.kind == 'b' || r.kind == 'b' {
		a, ok1 := asBool(l)
		b, ok2 := asBool(r)
		if !ok1 || !ok2 {
			return vUnknown
		}
		switch op {
		case "=":
			return triOf(a == b)
		case "<>":
			return triOf(a != b)
		}
		return vUnknown
	}
	switch op {
	case "=":
		return triOf(l.s == r.s)
	case "<>":
		return triOf(l.s != r.s)
	}
	return vUnknown
}

func asNumber(v value) (float64, bool) {
	switch v.kind {
	case 'n':
		return v.n, true
	case 's':
		f, err := strconv.ParseFloat(strings.TrimSpace(v.s), 64)
		return f, err == nil
	}
	return 0, false
}

func asBool(v value) (bool, bool) {
	switch v.kind {
	case 'b':
		return v.b, true
	case 's':
		switch strings.ToLower(v.s) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return false, false
}

type betweenNode struct {
	x, lo, hi operand
	not       bool
}

func (n betweenNode) eval(p map[string]string) tri {
	x := n.x.value(p)
	r := andNode{constTri(compare(">=", x, n.lo.value(p))), constTri(compare("<=", x, n.hi.value(p)))}.eval(p)
	if n.not {
		return notNode{constTri(r)}.eval(p)
	}
	return r
}
func (betweenNode) isBool() {}

type constTri tri

func (c constTri) eval(map[string]string) tri { return tri(c) }

type inNode struct {
	x    operand
	set  []string
	not  bool
	seen map[string]bool
}

func (n inNode) eval(p map[string]string) tri {
	v := n.x.value(p)
	if v.kind != 's' {
		return vUnknown
	}
	return triOf(n.seen[v.s] != n.not)
}
func (inNode) isBool() {}

type nullNode struct {
	x   operand
	not bool
}

func (n nullNode) eval(p map[string]string) tri {
	return triOf((n.x.value(p).kind == 0) != n.not)
}
func (nullNode) isBool() {}

// strNode is CONTAINS / STARTSWITH / ENDSWITH.
type strNode struct {
	op  string
	x   operand
	arg string
	not bool
}

func (n strNode) eval(p map[string]string) tri {
	v := n.x.value(p)
	if v.kind != 's' {
		return vUnknown
	}
	var ok bool
	switch n.op {
	case "CONTAINS":
		ok = strings.Contains(v.s, n.arg)
	case "STARTSWITH":
		ok = strings.HasPrefix(v.s, n.arg)
	case "ENDSWITH":
		ok = strings.HasSuffix(v.s, n.arg)
	}
	return triOf(ok != n.not)
}
func (strNode) isBool() {}

// ---- lexer ----

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tKeyword
	tString
	tNumber
	tOp
	tLParen
	tRParen
	tComma
)

type token struct {
	kind tokKind
	text string // keywords upper-cased
	pos  int
}

var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "BETWEEN": true, "IN": true, "IS": true, "NULL": true,
	"TRUE": true, "FALSE": true, "CONTAINS": true, "STARTSWITH": true, "ENDSWITH": true,
}

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			out = append(out, token{tLParen, "(", i})
			i++
		case c == ')':
			out = append(out, token{tRParen, ")", i})
			i++
		case c == ',':
			out = append(out, token{tComma, ",", i})
			i++
		case c == '\'':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(s) {
					return nil, fmt.Errorf("%w: unterminated string at %d", ErrSyntax, i)
				}
				if s[j] == '\'' {
					if j+1 < len(s) && s[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			out = append(out, token{tString, b.String(), i})
			i = j + 1
		case c == '=':
			out = append(out, token{tOp, "=", i})
			i++
		case c == '<' || c == '>' || c == '!':
			op, n := string(c), 1
			if i+1 < len(s) && (s[i+1] == '=' || (c == '<' && s[i+1] == '>')) {
				op, n = op+string(s[i+1]), 2
			}
			switch op {
			case "!":
				return nil, fmt.Errorf("%w: '!' at %d (use <> or !=)", ErrSyntax, i)
			case "!=":
				op = "<>"
			}
			out = append(out, token{tOp, op, i})
			i += n
		case c >= '0' && c <= '9' || (c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9') ||
			((c == '-' || c == '+') && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '.') && numberAllowed(out)):
			j := i + 1
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
				((s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E'))) {
				j++
			}
			text := strings.TrimSuffix(strings.TrimSuffix(s[i:j], "L"), "l")
			if j < len(s) && (s[j] == 'L' || s[j] == 'l' || s[j] == 'D' || s[j] == 'd' || s[j] == 'F' || s[j] == 'f') {
				j++
			}
			if _, err := strconv.ParseFloat(text, 64); err != nil {
				return nil, fmt.Errorf("%w: bad number %q at %d", ErrSyntax, s[i:j], i)
			}
			out = append(out, token{tNumber, text, i})
			i = j
		case isIdentStart(rune(c)):
			j := i + 1
			for j < len(s) && isIdentPart(rune(s[j])) {
				j++
			}
			w := s[i:j]
			if keywords[strings.ToUpper(w)] {
				out = append(out, token{tKeyword, strings.ToUpper(w), i})
			} else {
				out = append(out, token{tIdent, w, i})
			}
			i = j
		default:
			return nil, fmt.Errorf("%w: unexpected character %q at %d", ErrSyntax, c, i)
		}
	}
	return append(out, token{tEOF, "", len(s)}), nil
}

// numberAllowed reports whether a sign may start a number here (after an operator, a comma, an
// opening parenthesis or a keyword, not after an operand).
func numberAllowed(prev []token) bool {
	if len(prev) == 0 {
		return true
	}
	switch prev[len(prev)-1].kind {
	case tOp, tComma, tLParen, tKeyword:
		return true
	}
	return false
}

func isIdentStart(r rune) bool { return unicode.IsLetter(r) || r == '_' || r == '$' }
func isIdentPart(r rune) bool {
	return isIdentStart(r) || unicode.IsDigit(r) || r == '.'
}
