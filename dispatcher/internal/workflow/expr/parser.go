package expr

import (
	"fmt"
	"strings"
)

// The syntax tree.
type (
	node interface{}

	literal struct{ v any }
	// contextRef is a named value (a context): name lower-cased.
	contextRef struct{ name string }
	// group is a parenthesised expression; only groups, calls and contexts take . and [ ].
	group struct{ x node }
	// index is x.name, x[i], x.* or x[*] (star, idx nil).
	index struct {
		x, idx node
		star   bool
	}
	not    struct{ x node }
	binary struct {
		op   tokType
		l, r node
	}
	logical struct {
		and  bool
		args []node
	}
	call struct {
		name string // lower-cased
		args []node
	}
)

// function is a function's arity; max -1 is unbounded.
type function struct{ min, max int }

var functions = map[string]function{
	"case":       {3, -1},
	"contains":   {2, 2},
	"endswith":   {2, 2},
	"format":     {1, 255},
	"fromjson":   {1, 1},
	"join":       {1, 2},
	"startswith": {2, 2},
	"tojson":     {1, 1},
	"success":    {0, 0},
	"failure":    {0, 0},
	"cancelled":  {0, 0},
	"always":     {0, 0},
}

func statusFunction(name string) bool {
	switch name {
	case "success", "failure", "cancelled", "always":
		return true
	}
	return false
}

type parser struct {
	src      string
	tokens   []token
	off      int
	depth    int
	contexts map[string]bool
	status   bool // a status function was seen
}

// perr is a parse error carried by panic inside the parser and recovered in parse.
type perr struct{ e *Error }

func parse(src string, contexts []string) (n node, status bool, err *Error) {
	tokens, lerr := lex(src)
	if lerr != nil {
		return nil, false, lerr
	}
	p := &parser{src: src, tokens: tokens, contexts: make(map[string]bool, len(contexts))}
	for _, c := range contexts {
		p.contexts[strings.ToLower(c)] = true
	}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(perr)
			if !ok {
				panic(r)
			}
			n, status, err = nil, false, pe.e
		}
	}()
	if p.atEnd() {
		return nil, false, nil
	}
	n = p.expression()
	if !p.atEnd() {
		p.fail("Unexpected symbol", p.peek())
	}
	return n, p.status, nil
}

func (p *parser) fail(what string, t token) {
	panic(perr{&Error{Kind: KindParsing, Pos: t.pos + 1,
		Message: fmt.Sprintf("%s: '%s'. Located at position %d within expression: %s", what, t.display(), t.pos+1, p.src)}})
}

func (p *parser) incrDepth() {
	p.depth++
	if p.depth > maxDepth {
		p.fail(fmt.Sprintf("Exceeded max expression depth %d", maxDepth), p.peek())
	}
}

func (p *parser) expression() node {
	p.incrDepth()
	defer func() { p.depth-- }()
	return p.logicalOr()
}

func (p *parser) logicalOr() node {
	return p.logicalChain(tOr, p.logicalAnd)
}

func (p *parser) logicalAnd() node {
	return p.logicalChain(tAnd, p.equality)
}

// logicalChain reads a && b && c (or ||) as one node with all operands: one level deep
// however long the chain.
func (p *parser) logicalChain(op tokType, operand func() node) node {
	x := operand()
	if !p.check(op) {
		return x
	}
	p.incrDepth()
	defer func() { p.depth-- }()
	l := &logical{and: op == tAnd, args: []node{x}}
	for p.match(op) {
		l.args = append(l.args, operand())
	}
	return l
}

func (p *parser) equality() node {
	x := p.comparison()
	for p.match(tBangEq, tEqEq) {
		op := p.previous().typ
		x = &binary{op: op, l: x, r: p.comparison()}
	}
	return x
}

func (p *parser) comparison() node {
	x := p.unary()
	for p.match(tGt, tGte, tLt, tLte) {
		op := p.previous().typ
		x = &binary{op: op, l: x, r: p.unary()}
	}
	return x
}

func (p *parser) unary() node {
	if p.match(tBang) {
		p.incrDepth()
		x := p.unary()
		p.depth--
		return &not{x: x}
	}
	return p.index()
}

func (p *parser) index() node {
	x := p.call()
	switch x.(type) {
	case *group, *call, *contextRef:
	default:
		return x
	}
	deeper := 0
	defer func() { p.depth -= deeper }()
	for {
		switch {
		case p.match(tLBracket):
			ix := &index{x: x}
			if p.match(tStar) {
				ix.star = true
			} else {
				ix.idx = p.expression()
			}
			p.consume(tRBracket)
			p.incrDepth()
			deeper++
			x = ix
		case p.match(tDot):
			p.incrDepth()
			deeper++
			switch {
			case p.match(tIdent):
				x = &index{x: x, idx: &literal{v: p.previous().lexeme}}
			case p.match(tStar):
				x = &index{x: x, star: true}
			default:
				p.fail("Unexpected symbol", p.peek())
			}
		default:
			return x
		}
	}
}

func (p *parser) call() node {
	if !p.check(tIdent) {
		return p.primary()
	}
	id := p.next()
	name := strings.ToLower(id.lexeme)
	if !p.match(tLParen) {
		if !p.contexts[name] {
			p.fail("Unrecognized named-value", id)
		}
		return &contextRef{name: name}
	}
	var args []node
	for !p.match(tRParen) {
		args = append(args, p.expression())
		if !p.check(tRParen) {
			p.consume(tComma)
		}
	}
	f, ok := functions[name]
	switch {
	case !ok:
		p.fail("Unrecognized function", id)
	case len(args) < f.min:
		p.fail("Too few parameters supplied", id)
	case f.max >= 0 && len(args) > f.max:
		p.fail("Too many parameters supplied", id)
	case name == "case" && len(args)%2 == 0:
		p.fail("Even number of parameters supplied, requires an odd number of parameters", id)
	}
	if statusFunction(name) {
		p.status = true
	}
	return &call{name: name, args: args}
}

func (p *parser) primary() node {
	switch {
	case p.match(tFalse):
		return &literal{v: false}
	case p.match(tTrue):
		return &literal{v: true}
	case p.match(tNull):
		return &literal{v: nil}
	case p.match(tNumber):
		return &literal{v: p.previous().num}
	case p.match(tString):
		return &literal{v: p.previous().str}
	case p.match(tLParen):
		x := p.expression()
		if p.atEnd() {
			p.fail("Unexpected end of expression", p.previous())
		}
		p.consume(tRParen)
		return &group{x: x}
	case p.atEnd():
		p.fail("Unexpected end of expression", p.previous())
	}
	p.fail("Unexpected symbol", p.peek())
	return nil
}

func (p *parser) match(types ...tokType) bool {
	for _, t := range types {
		if p.check(t) {
			p.next()
			return true
		}
	}
	return false
}

func (p *parser) check(t tokType) bool { return !p.atEnd() && p.peek().typ == t }
func (p *parser) atEnd() bool          { return p.peek().typ == tEOF }
func (p *parser) peek() token          { return p.tokens[p.off] }
func (p *parser) previous() token      { return p.tokens[p.off-1] }

func (p *parser) next() token {
	if !p.atEnd() {
		p.off++
	}
	return p.previous()
}

func (p *parser) consume(t tokType) {
	if !p.check(t) {
		p.fail("Unexpected symbol", p.peek())
	}
	p.next()
}
