package dispatch

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// shapeErrors is the second look at a body encoding/json refused: encoding/json stops at
// its first wrong value and names an unknown member without its path, so this walks the
// body against the type Decode fills and reports every value of the wrong JSON type and
// every member the type does not have, each by its full path ("metadata.foo"). Members
// match fields as encoding/json matches them: by exact name, else ignoring case.
func shapeErrors(b []byte, t reflect.Type) []FieldError {
	var out []FieldError
	walkShape("", b, t, &out)
	return out
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func walkShape(path string, raw []byte, t reflect.Type, out *[]FieldError) {
	k := firstByte(raw)
	if k == 'n' { // null leaves any field as it is
		return
	}
	wrong := func(what string) {
		field := path
		if field == "" {
			field = "$"
		}
		*out = append(*out, FieldError{Field: field, Rule: "type", Message: "must be " + what})
	}
	if pt := reflect.PointerTo(t); pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler) {
		if json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
			wrong(jsonKind(t))
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		walkShape(path, raw, t.Elem(), out)
	case reflect.Interface:
	case reflect.Struct:
		if k != '{' {
			wrong("an object")
			return
		}
		fields := fieldsOf(t)
		eachMember(raw, func(name string, value []byte) {
			f, ok := fields.lookup(name)
			if !ok {
				*out = append(*out, FieldError{Field: joinPath(path, name), Rule: "unknown_field",
					Message: "is not a known field; the fields here are " + strings.Join(fields.names, ", ")})
				return
			}
			walkShape(joinPath(path, f.name), value, f.typ, out)
		})
	case reflect.Map:
		if k != '{' {
			wrong("an object")
			return
		}
		eachMember(raw, func(name string, value []byte) { walkShape(joinPath(path, name), value, t.Elem(), out) })
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			if json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
				wrong("a base64 string")
			}
			return
		}
		if k != '[' {
			wrong("an array")
			return
		}
		i := 0
		eachElement(raw, func(value []byte) { walkShape(indexPath(path, i), value, t.Elem(), out); i++ })
	default:
		if json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
			wrong(jsonKind(t))
		}
	}
}

// jsonKind names the JSON value a Go type takes, in the caller's terms.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		if t.String() == "time.Time" {
			return "a time (RFC 3339, e.g. 2026-01-02T15:04:05Z)"
		}
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a JSON value"
		}
		return "an array"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if t.Bits() == 64 {
			return "a whole number"
		}
		lo := -int64(1) << (t.Bits() - 1)
		return fmt.Sprintf("a whole number from %d to %d", lo, -(lo + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a value of another type"
}

// eachMember calls fn with each member of the JSON object raw, in order.
func eachMember(raw []byte, fn func(name string, value []byte)) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if _, err := dec.ReadToken(); err != nil {
		return
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return
		}
		n := name.String()
		value, err := dec.ReadValue()
		if err != nil {
			return
		}
		fn(n, value)
	}
}

// eachElement calls fn with each element of the JSON array raw, in order.
func eachElement(raw []byte, fn func(value []byte)) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if _, err := dec.ReadToken(); err != nil {
		return
	}
	for dec.PeekKind() != ']' && dec.PeekKind() != 0 {
		value, err := dec.ReadValue()
		if err != nil {
			return
		}
		fn(value)
	}
}

func firstByte(raw []byte) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

type field struct {
	name string
	typ  reflect.Type
}

// structFields are the JSON members of a struct type as encoding/json sees them.
type structFields struct {
	byName map[string]field
	names  []string // sorted, for messages
}

func (s structFields) lookup(name string) (field, bool) {
	if f, ok := s.byName[name]; ok {
		return f, true
	}
	for n, f := range s.byName {
		if strings.EqualFold(n, name) {
			return f, true
		}
	}
	return field{}, false
}

var fieldCache sync.Map // reflect.Type -> structFields

func fieldsOf(t reflect.Type) structFields {
	if v, ok := fieldCache.Load(t); ok {
		return v.(structFields)
	}
	s := structFields{byName: map[string]field{}}
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		var embedded []reflect.Type
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			ft := f.Type
			if f.Anonymous && name == "" {
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					embedded = append(embedded, ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			s.byName[name] = field{name: name, typ: ft}
		}
		// An outer field hides an embedded struct's field of the same name.
		for _, et := range embedded {
			before := maps.Clone(s.byName)
			collect(et)
			maps.Copy(s.byName, before)
		}
	}
	collect(t)
	for n := range s.byName {
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	fieldCache.Store(t, s)
	return s
}
