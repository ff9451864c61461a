// Package expr evaluates GitHub Actions `${{ }}` expressions with GitHub's semantics: its
// literals (hex, octal, exponent, NaN, Infinity), operators, loose equality, case-insensitive
// strings and property names, `.*` / `[*]` filters, the functions contains, startsWith,
// endsWith, format, join, toJSON, fromJSON and case, and the status functions success,
// failure, cancelled and always. GitHub's cross-implementation conformance cases
// (`make conformance`) are the reference; docs/workflows.md describes the language.
package expr

import (
	"fmt"
	"strings"
)

// Error kinds.
const (
	// KindParsing: the expression cannot be read (a bad token, a bad call, an unknown
	// context or function). Found without evaluating anything.
	KindParsing = "parsing"
	// KindEvaluation: the expression failed while being evaluated (bad JSON for fromJSON, a
	// bad format string, a non-boolean case predicate, the memory limit).
	KindEvaluation = "evaluation"
)

// Error is a parsing or evaluation error. Message is GitHub's wording; a parsing error's
// names the symbol and its position within the expression.
type Error struct {
	Kind    string // KindParsing or KindEvaluation
	Message string
	// Pos is the 1-based character position in the expression of a parsing error; 0 when
	// not known.
	Pos int
	// Lexical marks a parsing error found while reading tokens (GitHub's "lexing" kind):
	// an unknown symbol, an unterminated string, a number JavaScript cannot read.
	Lexical bool
}

func (e *Error) Error() string { return e.Message }

// Context is what an expression can see.
type Context struct {
	// Named holds the contexts by name (inputs, env, needs, steps, …). Names and object
	// keys match case-insensitively. Values are what encoding/json decodes into: nil, bool,
	// float64, string, []any, map[string]any (ints, []string and string-keyed maps are read
	// too). toJSON prints a map's keys sorted.
	Named map[string]any
	// Status answers a status function: "success", "failure", "cancelled" or "always".
	// nil: calling one is an evaluation error.
	Status func(name string) bool
}

// Expr is a parsed expression.
type Expr struct {
	src    string
	root   node // nil: the empty expression, whose value is null
	status bool
}

// Parse parses src (an expression without its ${{ }}). contexts are the named values it may
// use (case-insensitive); any other name is a parsing error, as on GitHub.
func Parse(src string, contexts []string) (*Expr, error) {
	root, status, err := parse(src, contexts)
	if err != nil {
		return nil, err
	}
	return &Expr{src: src, root: root, status: status}, nil
}

// Check parses src and reports what is wrong with it, for validation.
func Check(src string, contexts []string) error {
	_, err := Parse(src, contexts)
	return err
}

// String returns the expression's source.
func (e *Expr) String() string { return e.src }

// UsesStatusFunction reports whether success(), failure(), cancelled() or always() appears
// anywhere in the expression.
func (e *Expr) UsesStatusFunction() bool { return e.status }

// Eval evaluates the expression. Its value is nil, bool, float64, string, []any or
// map[string]any.
func (e *Expr) Eval(ctx Context) (any, error) {
	v, err := e.eval(ctx)
	if err != nil {
		return nil, err
	}
	return external(v), nil
}

func (e *Expr) eval(ctx Context) (any, error) {
	ev := &evaluator{ctx: ctx, named: make(map[string]any, len(ctx.Named)), conv: map[string]any{}}
	for k, v := range ctx.Named {
		ev.named[strings.ToLower(k)] = v
	}
	v, err := ev.run(e.root)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Truthy is GitHub's coercion to a boolean: null, false, 0, NaN and "" are false; everything
// else, empty arrays and objects included, is true.
func Truthy(v any) bool {
	switch t := v.(type) {
	case nil, bool, float64, string:
		return !falsy(t)
	}
	iv, err := internal(v)
	if err != nil {
		return true
	}
	return !falsy(iv)
}

// String is how a value shows when interpolated into text: null as "", numbers as GitHub
// prints them (at most 15 decimals, 1e+21 beyond), arrays and objects as toJSON.
func String(v any) string {
	switch t := v.(type) {
	case nil, bool, float64, string:
		return coerceString(t)
	}
	iv, err := internal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if primitive(iv) {
		return coerceString(iv)
	}
	return toJSON(iv)
}

// Condition evaluates an `if:`. A ${{ }} around the whole condition is optional. Unless the
// condition calls a status function itself it means `success() && (condition)`, as on
// GitHub, so ctx.Status is then needed; an empty condition is success().
func Condition(src string, contexts []string, ctx Context) (bool, error) {
	return (*Cache)(nil).Condition(src, contexts, ctx)
}

// Condition is the package's Condition, with the parsed condition kept in c.
func (c *Cache) Condition(src string, contexts []string, ctx Context) (bool, error) {
	e, err := c.condition(src, contexts)
	if err != nil {
		return false, err
	}
	if !e.status {
		if ctx.Status == nil {
			return false, &Error{Kind: KindEvaluation, Message: "an if: condition without a status function means success() && (…), and no job status was given"}
		}
		if !ctx.Status("success") {
			return false, nil
		}
	}
	v, err := e.eval(ctx)
	if err != nil {
		return false, err
	}
	return !falsy(v), nil
}

// wrapped returns the inside of "${{ … }}" when s is exactly one such expression.
func wrapped(s string) (string, bool) {
	if !strings.HasPrefix(s, "${{") {
		return "", false
	}
	end, ok := closing(s, 3)
	if !ok || end+2 != len(s) {
		return "", false
	}
	return s[3:end], true
}

// closing finds the "}}" that ends an expression starting at from, skipping '…' strings
// (where a doubled quote is a quote). ok false: there is none.
func closing(s string, from int) (int, bool) {
	inString := false
	for i := from; i < len(s); i++ {
		switch {
		case s[i] == '\'':
			inString = !inString // '' toggles twice: still inside
		case !inString && s[i] == '}' && i+1 < len(s) && s[i+1] == '}':
			return i, true
		}
	}
	return 0, false
}

// Interpolate evaluates a string with ${{ }} parts. A string that is exactly one
// expression gives that expression's value as it is (a number stays a number, an object an
// object); otherwise each part is replaced by String(value). No ${{: the string itself.
func Interpolate(tmpl string, contexts []string, ctx Context) (any, error) {
	return (*Cache)(nil).Interpolate(tmpl, contexts, ctx)
}

// Interpolate is the package's Interpolate, with the parsed template kept in c.
func (c *Cache) Interpolate(tmpl string, contexts []string, ctx Context) (any, error) {
	parts, err := c.template(tmpl, contexts)
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 && parts[0].e != nil {
		return parts[0].e.Eval(ctx)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.e == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := p.e.Eval(ctx)
		if err != nil {
			return nil, err
		}
		b.WriteString(String(v))
	}
	return b.String(), nil
}

// CheckTemplate parses every ${{ }} part of a string and reports the first problem, for
// validation of what Interpolate will be given.
func CheckTemplate(tmpl string, contexts []string) error {
	_, err := parseTemplate(tmpl, contexts)
	return err
}

// part is a piece of a template: text, or an expression (e non-nil).
type part struct {
	text string
	e    *Expr
}

func parseTemplate(tmpl string, contexts []string) ([]part, error) {
	var parts []part
	i := 0
	for {
		j := strings.Index(tmpl[i:], "${{")
		if j < 0 {
			if i < len(tmpl) || len(parts) == 0 {
				parts = append(parts, part{text: tmpl[i:]})
			}
			return parts, nil
		}
		start := i + j
		end, ok := closing(tmpl, start+3)
		if !ok {
			pos := len([]rune(tmpl[:start])) + 1
			return nil, &Error{Kind: KindParsing, Pos: pos,
				Message: fmt.Sprintf("An expression was not closed: '${{' at position %d has no '}}': %s", pos, tmpl)}
		}
		e, err := Parse(tmpl[start+3:end], contexts)
		if err != nil {
			return nil, err
		}
		if start > i {
			parts = append(parts, part{text: tmpl[i:start]})
		}
		parts = append(parts, part{e: e})
		i = end + 2
	}
}
