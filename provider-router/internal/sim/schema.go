package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxSchemaDepth bounds recursion through nested or self-referencing ($ref) schemas.
const maxSchemaDepth = 8

// value generates a deterministic JSON value valid against the JSON Schema s, for tool
// arguments and json_schema answers. It understands what function-calling schemas use in
// practice: type (also as a list), enum, const, properties and required, items with
// minItems/maxItems, minimum/maximum, minLength/maxLength, string formats, anyOf/oneOf/
// allOf (first branch) and local $ref. An object fills its required properties, or every
// property when it lists none. root resolves $ref. Unknown keywords are ignored.
func (g *generator) value(s, root any, depth int) any {
	sm := asSchemaMap(s)
	if sm == nil || depth > maxSchemaDepth {
		if depth == 0 {
			return map[string]any{} // tool without parameters: {}
		}
		return nil
	}
	if ref, ok := sm["$ref"].(string); ok {
		return g.value(resolveRef(ref, root), root, depth+1)
	}
	if c, ok := sm["const"]; ok {
		return c
	}
	if e, ok := sm["enum"].([]any); ok && len(e) > 0 {
		return e[g.rng.IntN(len(e))]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := sm[k].([]any); ok && len(alts) > 0 {
			return g.value(alts[0], root, depth+1)
		}
	}
	switch schemaType(sm) {
	case "object":
		props, _ := sm["properties"].(map[string]any)
		keys := requiredKeys(sm, props)
		out := make(map[string]any, len(keys))
		for _, k := range keys {
			out[k] = g.value(props[k], root, depth+1)
		}
		return out
	case "array":
		n := 1 + g.rng.IntN(3)
		if v, ok := number(sm["minItems"]); ok {
			n = max(n, int(v))
		}
		if v, ok := number(sm["maxItems"]); ok {
			n = min(n, int(v))
		}
		out := make([]any, 0, n)
		for range n {
			out = append(out, g.value(sm["items"], root, depth+1))
		}
		return out
	case "integer":
		lo, hi := bounds(sm, 1, 100, 1)
		lo, hi = math.Ceil(lo), math.Floor(hi)
		if hi < lo {
			return int64(lo)
		}
		return int64(lo) + g.rng.Int64N(int64(hi-lo)+1)
	case "number":
		lo, hi := bounds(sm, 0, 100, 0.01)
		return math.Round((lo+g.rng.Float64()*(hi-lo))*100) / 100
	case "boolean":
		return g.rng.IntN(2) == 0
	case "null":
		return nil
	default: // "string", and schemas that name no type
		return g.str(sm)
	}
}

// str generates a string: a date, email or URL for those formats, else a short phrase
// from the last user message (vocabulary words when there is none), fitted to
// minLength/maxLength.
func (g *generator) str(sm map[string]any) string {
	word := func() string { return vocabulary[g.rng.IntN(len(vocabulary))] }
	var s string
	switch sm["format"] {
	case "date":
		s = fmt.Sprintf("2025-%02d-%02d", 1+g.rng.IntN(12), 1+g.rng.IntN(28))
	case "date-time":
		s = fmt.Sprintf("2025-%02d-%02dT%02d:%02d:00Z", 1+g.rng.IntN(12), 1+g.rng.IntN(28), g.rng.IntN(24), g.rng.IntN(60))
	case "time":
		s = fmt.Sprintf("%02d:%02d:00", g.rng.IntN(24), g.rng.IntN(60))
	case "email":
		s = word() + "@example.com"
	case "uri", "url":
		s = "https://example.com/" + word()
	case "uuid":
		b := make([]byte, 16)
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
		s = fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	default:
		if len(g.userWords) > 0 {
			s = strings.Join(g.userWords, " ")
		} else {
			s = word() + " " + word()
		}
	}
	// JSON Schema lengths count characters, not bytes.
	if v, ok := number(sm["maxLength"]); ok && utf8.RuneCountInString(s) > int(v) {
		s = string([]rune(s)[:max(0, int(v))])
	}
	if v, ok := number(sm["minLength"]); ok {
		if n := int(v) - utf8.RuneCountInString(s); n > 0 {
			s += strings.Repeat("x", n)
		}
	}
	return s
}

// asSchemaMap accepts the shapes a schema arrives in: a decoded JSON object, raw JSON,
// or any Go value that encodes to a JSON object (jsonschema.Definition in tests).
func asSchemaMap(s any) map[string]any {
	switch v := s.(type) {
	case nil:
		return nil
	case map[string]any:
		return v
	case json.RawMessage:
		var m map[string]any
		if json.Unmarshal(v, &m) != nil {
			return nil
		}
		return m
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			return nil
		}
		return m
	}
}

// resolveRef follows a local JSON pointer such as "#/$defs/Address".
func resolveRef(ref string, root any) any {
	if !strings.HasPrefix(ref, "#") {
		return nil
	}
	cur := any(asSchemaMap(root))
	for part := range strings.SplitSeq(strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// schemaType is the schema's type; for a list of types the first that is not "null",
// since a nullable field is better exercised with a value.
func schemaType(sm map[string]any) string {
	switch t := sm["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
		return "null"
	}
	if _, ok := sm["properties"]; ok {
		return "object"
	}
	if _, ok := sm["items"]; ok {
		return "array"
	}
	return "string"
}

// requiredKeys lists the properties to fill, sorted so that PRNG draws happen in the same
// order every time.
func requiredKeys(sm, props map[string]any) []string {
	var keys []string
	if req, ok := sm["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				keys = append(keys, s)
			}
		}
	} else {
		for k := range props {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// bounds reads minimum/maximum (exclusive ones moved inwards by step) around the default
// range [lo, hi].
func bounds(sm map[string]any, lo, hi, step float64) (float64, float64) {
	minSet, maxSet := false, false
	if v, ok := number(sm["minimum"]); ok {
		lo, minSet = v, true
	}
	if v, ok := number(sm["exclusiveMinimum"]); ok {
		lo, minSet = v+step, true
	}
	if v, ok := number(sm["maximum"]); ok {
		hi, maxSet = v, true
	}
	if v, ok := number(sm["exclusiveMaximum"]); ok {
		hi, maxSet = v-step, true
	}
	// Keep a one-sided bound's default range on the right side of it.
	if minSet && !maxSet && hi < lo {
		hi = lo + 100
	}
	if maxSet && !minSet && lo > hi {
		lo = hi - 100
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
