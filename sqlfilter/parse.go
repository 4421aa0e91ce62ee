package sqlfilter

import (
	"fmt"
	"strconv"
)

// parser is a recursive-descent parser over the token list, one level per precedence:
// OR < AND < NOT < comparison < operand.
type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// keyword consumes the keyword kw if it is next.
func (p *parser) keyword(kw string) bool {
	if t := p.peek(); t.kind == tKeyword && t.text == kw {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectKeyword(kw string) error {
	if !p.keyword(kw) {
		t := p.peek()
		return fmt.Errorf("%w: expected %s, found %q at %d", ErrSyntax, kw, t.text, t.pos)
	}
	return nil
}

func (p *parser) or() (node, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.keyword("OR") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = orNode{l, r}
	}
	return l, nil
}

func (p *parser) and() (node, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.keyword("AND") {
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = andNode{l, r}
	}
	return l, nil
}

func (p *parser) not() (node, error) {
	if p.keyword("NOT") {
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return notNode{x}, nil
	}
	return p.comparison()
}

// comparison parses an operand followed by an optional comparison; a parenthesised condition
// is handled here too.
func (p *parser) comparison() (node, error) {
	if p.peek().kind == tLParen {
		// Either a parenthesised condition or a parenthesised operand; operands in parentheses
		// are not part of RocketMQ's grammar, so it is a condition.
		p.next()
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if t := p.next(); t.kind != tRParen {
			return nil, fmt.Errorf("%w: expected ')', found %q at %d", ErrSyntax, t.text, t.pos)
		}
		return n, nil
	}
	x, err := p.operand()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	switch {
	case t.kind == tOp:
		p.next()
		y, err := p.operand()
		if err != nil {
			return nil, err
		}
		return cmpNode{op: t.text, l: x, r: y}, nil
	case t.kind == tKeyword && t.text == "IS":
		p.next()
		not := p.keyword("NOT")
		if err := p.expectKeyword("NULL"); err != nil {
			return nil, err
		}
		return nullNode{x: x, not: not}, nil
	case t.kind == tKeyword:
		not := p.keyword("NOT")
		switch {
		case p.keyword("BETWEEN"):
			lo, err := p.operand()
			if err != nil {
				return nil, err
			}
			if err := p.expectKeyword("AND"); err != nil {
				return nil, err
			}
			hi, err := p.operand()
			if err != nil {
				return nil, err
			}
			return betweenNode{x: x, lo: lo, hi: hi, not: not}, nil
		case p.keyword("IN"):
			set, err := p.stringList()
			if err != nil {
				return nil, err
			}
			seen := make(map[string]bool, len(set))
			for _, s := range set {
				seen[s] = true
			}
			return inNode{x: x, set: set, not: not, seen: seen}, nil
		}
		for _, op := range []string{"CONTAINS", "STARTSWITH", "ENDSWITH"} {
			if p.keyword(op) {
				a := p.next()
				if a.kind != tString {
					return nil, fmt.Errorf("%w: %s needs a string, found %q at %d", ErrSyntax, op, a.text, a.pos)
				}
				return strNode{op: op, x: x, arg: a.text, not: not}, nil
			}
		}
		if not {
			n := p.peek()
			return nil, fmt.Errorf("%w: expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT, found %q at %d", ErrSyntax, n.text, n.pos)
		}
	}
	// A bare operand used as a condition: a property or TRUE/FALSE.
	if b, ok := x.(boolNode); ok {
		return b, nil
	}
	return nil, fmt.Errorf("%w: %q at %d is not a condition", ErrSyntax, t.text, t.pos)
}

// stringList parses ('a', 'b', ...).
func (p *parser) stringList() ([]string, error) {
	if t := p.next(); t.kind != tLParen {
		return nil, fmt.Errorf("%w: IN needs '(', found %q at %d", ErrSyntax, t.text, t.pos)
	}
	var out []string
	for {
		t := p.next()
		if t.kind != tString {
			return nil, fmt.Errorf("%w: IN lists strings, found %q at %d", ErrSyntax, t.text, t.pos)
		}
		out = append(out, t.text)
		switch t := p.next(); t.kind {
		case tComma:
		case tRParen:
			return out, nil
		default:
			return nil, fmt.Errorf("%w: expected ',' or ')', found %q at %d", ErrSyntax, t.text, t.pos)
		}
	}
}

// operand parses a literal or a property name.
func (p *parser) operand() (operand, error) {
	t := p.next()
	switch t.kind {
	case tString:
		return literal{value{kind: 's', s: t.text}}, nil
	case tNumber:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad number %q at %d", ErrSyntax, t.text, t.pos)
		}
		return literal{value{kind: 'n', n: f}}, nil
	case tIdent:
		return property{name: t.text}, nil
	case tKeyword:
		switch t.text {
		case "TRUE":
			return literal{value{kind: 'b', b: true}}, nil
		case "FALSE":
			return literal{value{kind: 'b', b: false}}, nil
		case "NULL":
			return literal{value{}}, nil
		}
	}
	if t.kind == tEOF {
		return nil, fmt.Errorf("%w: unexpected end of expression", ErrSyntax)
	}
	return nil, fmt.Errorf("%w: unexpected %q at %d", ErrSyntax, t.text, t.pos)
}
