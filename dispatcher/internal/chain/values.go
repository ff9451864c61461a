package chain

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Values: reading a path out of a step's output, writing one into a payload, filling in
// a payload's {{ }} references and evaluating a condition. Outputs are JSON as the step's
// run stored it; a path may descend into a string that holds JSON (an LLM's answer is text,
// and a plan answered as JSON is still text): "plan.output.content.topics".

// decode turns JSON into Go values, numbers as json.Number so that they survive unchanged.
func decode(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// lookup returns the value at a dot path ("a.b.0.c") of v and whether it exists. A string
// met on the way is read as JSON when it holds an object or an array.
func lookup(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for seg := range strings.SplitSeq(path, ".") {
		if s, ok := v.(string); ok {
			if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
				if parsed, err := decode(json.RawMessage(t)); err == nil {
					v = parsed
				}
			}
		}
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[seg]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// assign sets the value at a dot path of an object, making the objects on the way.
func assign(obj map[string]any, path string, val any) {
	segs := strings.Split(path, ".")
	for _, seg := range segs[:len(segs)-1] {
		next, ok := obj[seg].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[seg] = next
		}
		obj = next
	}
	obj[segs[len(segs)-1]] = val
}

// refPattern finds the {{ input.x }}, {{ item.y }} and {{ index }} references of a payload.
var refPattern = regexp.MustCompile(`\{\{\s*(input|item|index)((?:\.[A-Za-z0-9_-]+)*)\s*\}\}`)

// scope is what a payload's references read: the chain's input and, in a for_each
// instance, its item and index.
type scope struct {
	input any
	item  any
	index *int
}

func (s scope) resolve(root, path string) (any, bool) {
	path = strings.TrimPrefix(path, ".")
	switch root {
	case "input":
		return lookup(s.input, path)
	case "item":
		if s.index == nil {
			return nil, false
		}
		return lookup(s.item, path)
	case "index":
		if s.index == nil || path != "" {
			return nil, false
		}
		return json.Number(strconv.Itoa(*s.index)), true
	}
	return nil, false
}

// fill replaces the references in every string of v: a string that is one reference
// becomes the value itself (any JSON type); a reference inside a longer string becomes its
// text. A reference to nothing becomes null (or empty text).
func (s scope) fill(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = s.fill(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = s.fill(e)
		}
		return x
	case string:
		if m := refPattern.FindStringSubmatchIndex(x); m != nil && m[0] == 0 && m[1] == len(x) {
			val, _ := s.resolve(x[m[2]:m[3]], x[m[4]:m[5]])
			return val
		}
		return refPattern.ReplaceAllStringFunc(x, func(ref string) string {
			sub := refPattern.FindStringSubmatch(ref)
			val, ok := s.resolve(sub[1], sub[2])
			if !ok || val == nil {
				return ""
			}
			return text(val)
		})
	}
	return v
}

// text is a value as it reads inside a string: strings as themselves, the rest as JSON.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// holds evaluates a condition's operator on the value found (ok: the field exists).
func holds(op string, found any, ok bool, want json.RawMessage) bool {
	if op == "exists" {
		return ok && found != nil
	}
	if !ok {
		return op == "neq"
	}
	w, err := decode(want)
	if err != nil {
		return false
	}
	switch op {
	case "eq":
		return equal(found, w)
	case "neq":
		return !equal(found, w)
	case "gt", "lt":
		a, aok := number(found)
		b, bok := number(w)
		if !aok || !bok {
			return false
		}
		if op == "gt" {
			return a > b
		}
		return a < b
	case "contains":
		switch f := found.(type) {
		case string:
			return strings.Contains(f, text(w))
		case []any:
			for _, e := range f {
				if equal(e, w) {
					return true
				}
			}
		case map[string]any:
			if k, isStr := w.(string); isStr {
				_, has := f[k]
				return has
			}
		}
	}
	return false
}

// equal compares two decoded JSON values; numbers by value (1 equals 1.0).
func equal(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsInf(f, 0)
}

// field splits "<step>.output.<path>" (checked by Parse) into the step and the path.
func field(ref string) (step, path string) {
	step, path, _ = strings.Cut(ref, ".output.")
	return step, path
}
