package expr

import (
	"fmt"
	"math"
	"strings"
)

// The lexer and parser follow GitHub's own (actions/languageservices, the reference its
// conformance cases are written against) token for token: which characters end a token,
// when a '.' starts a number, how deep an expression may nest. Where they report an error
// the message has GitHub's text and position, so what an author reads here is what GitHub
// would tell them.

type tokType int

const (
	tLParen tokType = iota
	tRParen
	tLBracket
	tRBracket
	tComma
	tDot
	tBang
	tBangEq
	tEqEq
	tGt
	tGte
	tLt
	tLte
	tAnd
	tOr
	tStar
	tNumber
	tString
	tIdent
	tTrue
	tFalse
	tNull
	tEOF
)

type token struct {
	typ    tokType
	lexeme string
	num    float64 // tNumber
	str    string  // tString: the value, quotes removed and '' unescaped
	pos    int     // rune offset of the token's first character
}

// display is how an error message names the token.
func (t token) display() string {
	switch t.typ {
	case tEOF:
		return "EOF"
	case tString:
		return t.str
	}
	return t.lexeme
}

const (
	maxDepth  = 50
	maxLength = 21000
)

type lexer struct {
	src    string
	in     []rune
	start  int
	off    int
	tokens []token
}

func lex(src string) ([]token, *Error) {
	if len(src) > maxLength {
		return nil, &Error{Kind: KindParsing, Message: fmt.Sprintf("Exceeded max expression length %d", maxLength), Pos: 1}
	}
	l := &lexer{src: src, in: []rune(src)}
	for l.off < len(l.in) {
		l.start = l.off
		c := l.in[l.off]
		l.off++
		var err *Error
		switch c {
		case '(':
			l.add(tLParen)
		case ')':
			l.add(tRParen)
		case '[':
			l.add(tLBracket)
		case ']':
			l.add(tRBracket)
		case ',':
			l.add(tComma)
		case '.':
			// A '.' after something that has properties is a dereference; anywhere else it
			// starts a number (.5).
			switch l.previous() {
			case tIdent, tRBracket, tRParen, tStar:
				l.add(tDot)
			default:
				err = l.number()
			}
		case '-', '+':
			err = l.number()
		case '!':
			if l.match('=') {
				l.add(tBangEq)
			} else {
				l.add(tBang)
			}
		case '=':
			if l.match('=') {
				l.add(tEqEq)
			} else {
				err = l.identifier() // an error naming the whole bad symbol
			}
		case '<':
			if l.match('=') {
				l.add(tLte)
			} else {
				l.add(tLt)
			}
		case '>':
			if l.match('=') {
				l.add(tGte)
			} else {
				l.add(tGt)
			}
		case '&':
			if l.match('&') {
				l.add(tAnd)
			} else {
				err = l.identifier()
			}
		case '|':
			if l.match('|') {
				l.add(tOr)
			} else {
				err = l.identifier()
			}
		case '*':
			l.add(tStar)
		case ' ', '\r', '\t', '\n':
		case '\'':
			err = l.string()
		default:
			if c >= '0' && c <= '9' {
				err = l.number()
			} else {
				err = l.identifier()
			}
		}
		if err != nil {
			return nil, err
		}
	}
	l.tokens = append(l.tokens, token{typ: tEOF, pos: len(l.in)})
	return l.tokens, nil
}

func (l *lexer) previous() tokType {
	if len(l.tokens) == 0 {
		return tEOF
	}
	return l.tokens[len(l.tokens)-1].typ
}

func (l *lexer) match(r rune) bool {
	if l.off < len(l.in) && l.in[l.off] == r {
		l.off++
		return true
	}
	return false
}

func (l *lexer) lexeme() string { return string(l.in[l.start:l.off]) }

func (l *lexer) add(typ tokType) {
	l.tokens = append(l.tokens, token{typ: typ, lexeme: l.lexeme(), pos: l.start})
}

func (l *lexer) unexpected(symbol string) *Error {
	return &Error{Kind: KindParsing, Lexical: true, Pos: l.start + 1,
		Message: fmt.Sprintf("Unexpected symbol: '%s'. Located at position %d within expression: %s", symbol, l.start+1, l.src)}
}

// number reads up to the next boundary (dots included) and takes it as JavaScript's
// Number() would: 1, .5, -2.0, 1e3, 0xff, 0o17, Infinity. What reads as NaN is an error.
func (l *lexer) number() *Error {
	for l.off < len(l.in) && (!boundary(l.in[l.off]) || l.in[l.off] == '.') {
		l.off++
	}
	lx := l.lexeme()
	v := jsToNumber(lx)
	if math.IsNaN(v) {
		return l.unexpected(lx)
	}
	l.tokens = append(l.tokens, token{typ: tNumber, lexeme: lx, num: v, pos: l.start})
	return nil
}

// string reads a '…' literal; a doubled quote inside it is a quote.
func (l *lexer) string() *Error {
	for l.off < len(l.in) && (l.in[l.off] != '\'' || (l.off+1 < len(l.in) && l.in[l.off+1] == '\'')) {
		if l.in[l.off] == '\'' {
			l.off++
		}
		l.off++
	}
	if l.off >= len(l.in) {
		return l.unexpected(string(l.in[l.start:]))
	}
	l.off++
	inner := string(l.in[l.start+1 : l.off-1])
	l.tokens = append(l.tokens, token{typ: tString, lexeme: l.lexeme(), str: strings.ReplaceAll(inner, "''", "'"), pos: l.start})
	return nil
}

// identifier reads a name or keyword. After a '.', keywords are property names (foo.true).
func (l *lexer) identifier() *Error {
	for l.off < len(l.in) && !boundary(l.in[l.off]) {
		l.off++
	}
	lx := l.lexeme()
	t := token{typ: tIdent, lexeme: lx, pos: l.start}
	if l.previous() != tDot {
		switch lx {
		case "true":
			t.typ = tTrue
		case "false":
			t.typ = tFalse
		case "null":
			t.typ = tNull
		case "NaN":
			t.typ, t.num = tNumber, math.NaN()
		case "Infinity":
			t.typ, t.num = tNumber, math.Inf(1)
		}
	}
	if !legalIdentifier(lx) {
		return l.unexpected(lx)
	}
	l.tokens = append(l.tokens, t)
	return nil
}

func boundary(r rune) bool {
	switch r {
	case '(', '[', ')', ']', ',', '.', '!', '>', '<', '=', '&', '|':
		return true
	}
	return jsSpace(r)
}

// legalIdentifier: a letter or _ then letters, digits, _ and -.
func legalIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
		if i == 0 && !letter {
			return false
		}
		if !letter && !(c >= '0' && c <= '9') && c != '-' {
			return false
		}
	}
	return true
}
