package expr

import (
	"fmt"
	"math"
	"strings"
)

// maxMemory bounds the strings an evaluation holds at once (GitHub's limit: 1 MiB, a
// character counted as two bytes), so that format('{0}{0}…', toJSON(big)) cannot exhaust memory.
const maxMemory = 1 << 20

type evaluator struct {
	ctx   Context
	named map[string]any // lower-cased name → the caller's value
	conv  map[string]any // lower-cased name → converted once, so a context is identical to itself
	held  int            // bytes of string results held by the nodes being evaluated
}

// evalErr is an evaluation error carried by panic inside the evaluator.
type evalErr struct{ e *Error }

func (ev *evaluator) fail(format string, args ...any) {
	panic(evalErr{&Error{Kind: KindEvaluation, Message: fmt.Sprintf(format, args...)}})
}

func (ev *evaluator) run(n node) (v any, err *Error) {
	defer func() {
		if r := recover(); r != nil {
			ee, ok := r.(evalErr)
			if !ok {
				panic(r)
			}
			v, err = nil, ee.e
		}
	}()
	if n == nil {
		return nil, nil
	}
	return ev.eval(n), nil
}

// eval evaluates n; what n's operands held is released once n has its value, as GitHub counts.
func (ev *evaluator) eval(n node) any {
	base := ev.held
	v := ev.evalNode(n)
	ev.held = base
	if s, ok := v.(string); ok {
		ev.held += 2 * len(s)
		if ev.held > maxMemory {
			ev.fail("The maximum allowed memory size was exceeded")
		}
	}
	return v
}

func (ev *evaluator) evalNode(n node) any {
	switch t := n.(type) {
	case *literal:
		return t.v
	case *group:
		return ev.eval(t.x)
	case *contextRef:
		return ev.context(t.name)
	case *not:
		return falsy(ev.eval(t.x))
	case *binary:
		l := ev.eval(t.l)
		r := ev.eval(t.r)
		switch t.op {
		case tEqEq:
			return equals(l, r)
		case tBangEq:
			return !equals(l, r)
		case tGt:
			return compare(l, r, true)
		case tGte:
			return equals(l, r) || compare(l, r, true)
		case tLt:
			return compare(l, r, false)
		case tLte:
			return equals(l, r) || compare(l, r, false)
		}
	case *logical:
		// An operand, not a boolean: the first falsy one (&&) or truthy one (||), else the last.
		var v any
		for _, a := range t.args {
			v = ev.eval(a)
			if falsy(v) == t.and {
				break
			}
		}
		return v
	case *index:
		return ev.index(t)
	case *call:
		return ev.call(t)
	}
	panic(fmt.Sprintf("expr: unknown node %T", n))
}

func (ev *evaluator) context(name string) any {
	if v, ok := ev.conv[name]; ok {
		return v
	}
	raw, ok := ev.named[name]
	if !ok {
		return nil
	}
	v, err := internal(raw)
	if err != nil {
		ev.fail("%s: %v", name, err)
	}
	ev.conv[name] = v
	return v
}

// index is x.name, x[i], x.* and x[*]. A missing property or element is null; a filter
// on something that is neither array nor object is an empty array.
func (ev *evaluator) index(t *index) any {
	var key any
	if !t.star {
		key = ev.eval(t.idx)
	}
	x := ev.eval(t.x)
	k := makeKey(t.star, key)
	switch c := x.(type) {
	case *array:
		if c.filtered {
			return filteredAccess(c, k)
		}
		if k.star {
			return &array{items: append([]any(nil), c.items...), filtered: true}
		}
		if k.hasInt && k.i < len(c.items) {
			return c.items[k.i]
		}
		return nil
	case *object:
		if k.star {
			return &array{items: append([]any(nil), c.vals...), filtered: true}
		}
		if k.hasStr {
			if v, ok := c.get(k.s); ok {
				return v
			}
		}
		return nil
	}
	if k.star {
		return &array{items: []any{}, filtered: true}
	}
	return nil
}

// key is an index as each container reads it: objects by the index coerced to a string
// (primitives only), arrays by its number floored (finite, not negative).
type key struct {
	star           bool
	s              string
	hasStr, hasInt bool
	i              int
}

func makeKey(star bool, v any) key {
	if star {
		return key{star: true}
	}
	var k key
	if primitive(v) {
		k.s, k.hasStr = coerceString(v), true
	}
	f := toNumber(v)
	if !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 && f < math.MaxInt32 {
		k.i, k.hasInt = int(math.Floor(f)), true
	}
	return k
}

// filteredAccess applies a property or index to every element of a filter's result.
func filteredAccess(fa *array, k key) any {
	out := &array{items: []any{}, filtered: true}
	for _, item := range fa.items {
		switch c := item.(type) {
		case *object:
			switch {
			case k.star:
				out.items = append(out.items, c.vals...)
			case k.hasStr:
				if v, ok := c.get(k.s); ok {
					out.items = append(out.items, v)
				}
			}
		case *array:
			switch {
			case k.star:
				out.items = append(out.items, c.items...)
			case k.hasInt && k.i < len(c.items):
				out.items = append(out.items, c.items[k.i])
			}
		}
	}
	return out
}

func (ev *evaluator) call(t *call) any {
	switch t.name {
	case "success", "failure", "cancelled", "always":
		if ev.ctx.Status == nil {
			ev.fail("%s() is a status function: it can only be used in an if: condition", t.name)
		}
		return ev.ctx.Status(t.name)
	case "case":
		// Predicates in order, each a boolean; only the chosen value is evaluated.
		last := len(t.args) - 1
		for i := 0; i < last; i += 2 {
			b, ok := ev.eval(t.args[i]).(bool)
			if !ok {
				ev.fail("case predicate must evaluate to a boolean value")
			}
			if b {
				return ev.eval(t.args[i+1])
			}
		}
		return ev.eval(t.args[last])
	}
	args := make([]any, len(t.args))
	for i, a := range t.args {
		args[i] = ev.eval(a)
	}
	switch t.name {
	case "contains":
		return contains(args[0], args[1])
	case "startswith", "endswith":
		if !primitive(args[0]) || !primitive(args[1]) {
			return false
		}
		s, p := upper(coerceString(args[0])), upper(coerceString(args[1]))
		if t.name == "startswith" {
			return strings.HasPrefix(s, p)
		}
		return strings.HasSuffix(s, p)
	case "format":
		return ev.format(args)
	case "join":
		return join(args)
	case "tojson":
		return toJSON(args[0])
	case "fromjson":
		s := coerceString(args[0])
		if strings.TrimFunc(s, jsSpace) == "" {
			ev.fail("Error parsing JSON when evaluating fromJson: empty input")
		}
		v, err := fromJSON(s)
		if err != nil {
			ev.fail("Error parsing JSON when evaluating fromJson: %v", err)
		}
		return v
	}
	panic("expr: unknown function " + t.name)
}

// contains: a substring test (case-insensitive) for primitives, an element test with ==
// for arrays.
func contains(search, item any) bool {
	if primitive(search) {
		if !primitive(item) {
			return false
		}
		return strings.Contains(upper(coerceString(search)), upper(coerceString(item)))
	}
	if a, ok := search.(*array); ok {
		for _, v := range a.items {
			if equals(item, v) {
				return true
			}
		}
	}
	return false
}

func join(args []any) any {
	if primitive(args[0]) {
		return coerceString(args[0])
	}
	a, ok := args[0].(*array)
	if !ok {
		return ""
	}
	sep := ","
	if len(args) > 1 && primitive(args[1]) {
		sep = coerceString(args[1])
	}
	parts := make([]string, len(a.items))
	for i, v := range a.items {
		parts[i] = coerceString(v)
	}
	return strings.Join(parts, sep)
}

// format replaces {N} with argument N coerced to a string; {{ and }} are literal braces.
func (ev *evaluator) format(args []any) any {
	fs := coerceString(args[0])
	var b strings.Builder
	i := 0
	for i < len(fs) {
		lb := indexFrom(fs, '{', i)
		rb := indexFrom(fs, '}', i)
		switch {
		case lb >= 0 && (rb < 0 || rb > lb):
			if lb+1 < len(fs) && fs[lb+1] == '{' {
				b.WriteString(fs[i : lb+1])
				i = lb + 2
				continue
			}
			if rb > lb+1 {
				n, digits := 0, 0
				for lb+1+digits < len(fs) && fs[lb+1+digits] >= '0' && fs[lb+1+digits] <= '9' {
					if n < 1<<20 {
						n = n*10 + int(fs[lb+1+digits]-'0')
					}
					digits++
				}
				if digits > 0 {
					if n+1 > len(args)-1 {
						ev.fail("The following format string references more arguments than were supplied: %s", fs)
					}
					b.WriteString(fs[i:lb])
					b.WriteString(coerceString(args[n+1]))
					i = rb + 1
					if 2*b.Len()+ev.held > maxMemory {
						ev.fail("The maximum allowed memory size was exceeded")
					}
					continue
				}
			}
			ev.fail("The following format string is invalid: %s", fs)
		case rb >= 0:
			if rb+1 < len(fs) && fs[rb+1] == '}' {
				b.WriteString(fs[i : rb+1])
				i = rb + 2
				continue
			}
			ev.fail("The following format string is invalid: %s", fs)
		default:
			b.WriteString(fs[i:])
			i = len(fs)
		}
	}
	return b.String()
}

func indexFrom(s string, c byte, from int) int {
	j := strings.IndexByte(s[from:], c)
	if j < 0 {
		return -1
	}
	return from + j
}
