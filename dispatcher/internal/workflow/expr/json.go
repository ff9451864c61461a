package expr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// toJSON writes v as GitHub's toJSON does (JavaScript's JSON.stringify with a two-space
// indent): objects in their key order, only the characters JSON requires escaped, numbers in
// JavaScript's shortest form, NaN and ±Infinity as null.
func toJSON(v any) string {
	var b strings.Builder
	writeJSON(&b, v, "")
	return b.String()
}

func writeJSON(b *strings.Builder, v any, indent string) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			b.WriteString("null")
		} else {
			b.WriteString(jsNumber(t))
		}
	case string:
		writeJSONString(b, t)
	case *array:
		if len(t.items) == 0 {
			b.WriteString("[]")
			return
		}
		inner := indent + "  "
		b.WriteString("[\n")
		for i, e := range t.items {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(inner)
			writeJSON(b, e, inner)
		}
		b.WriteString("\n" + indent + "]")
	case *object:
		if len(t.keys) == 0 {
			b.WriteString("{}")
			return
		}
		inner := indent + "  "
		b.WriteString("{\n")
		for i, k := range t.keys {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(inner)
			writeJSONString(b, k)
			b.WriteString(": ")
			writeJSON(b, t.vals[i], inner)
		}
		b.WriteString("\n" + indent + "}")
	}
}

func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// fromJSON reads one JSON document into evaluator values, keeping object key order.
func fromJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := readJSON(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func readJSON(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			a := &array{items: []any{}}
			for dec.More() {
				e, err := readJSON(dec)
				if err != nil {
					return nil, err
				}
				a.items = append(a.items, e)
			}
			_, err := dec.Token() // ]
			return a, err
		case '{':
			o := newObject(0)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				e, err := readJSON(dec)
				if err != nil {
					return nil, err
				}
				o.set(k, e)
			}
			_, err := dec.Token() // }
			return o, err
		}
		return nil, fmt.Errorf("unexpected %q", t)
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, err
		}
		return f, nil
	default:
		return t, nil // nil, bool, string
	}
}
