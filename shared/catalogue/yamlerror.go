package catalogue

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// FieldError is one field of a definition file that does not fit: its line, its path
// ("chain.steps[0].id") and what is wrong, in the file's own terms — field names and YAML
// values, never the Go types behind them.
type FieldError struct {
	Line    int
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Message)
	}
	return fmt.Sprintf("line %d: %s %s", e.Line, e.Field, e.Message)
}

// explain turns the error yaml.v3 gave for b decoded into dst into errors in the file's
// terms. yaml.v3 names Go types ("cannot unmarshal !!str `lots` into int", "field colour
// not found in type skill.yamlSkill") and no field; walking the document against dst's type
// finds every misfit with its field and line. What the walk cannot explain (a syntax error,
// a key defined twice) is yaml.v3's own message, which is in YAML's terms already.
func explain(b []byte, dst any, err error) error {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) == nil && len(doc.Content) > 0 {
		var errs []error
		walkYAML("", doc.Content[0], reflect.TypeOf(dst).Elem(), &errs)
		switch len(errs) {
		case 0:
		case 1:
			return errs[0]
		default:
			return problems(errs)
		}
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

// problems are several FieldErrors, one a line.
type problems []error

func (p problems) Error() string {
	lines := make([]string, len(p))
	for i, e := range p {
		lines[i] = "\n  " + e.Error()
	}
	return fmt.Sprintf("%d problems:%s", len(p), strings.Join(lines, ""))
}

func (p problems) Unwrap() []error { return p }

func walkYAML(path string, n *yaml.Node, t reflect.Type, errs *[]error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // null leaves the field as it is
	}
	wrong := func(want string) {
		msg := "must be " + want + ", not " + describe(n)
		if path == "" {
			msg = "the file must be " + want + ", not " + describe(n)
		}
		*errs = append(*errs, &FieldError{Line: n.Line, Field: path, Message: msg})
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Interface:
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			wrong("a mapping of fields (name: value)")
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			ft, ok := fields[key.Value]
			if !ok {
				*errs = append(*errs, &FieldError{Line: key.Line, Field: join(path, key.Value),
					Message: "is not a known field; the fields are " + strings.Join(slices.Sorted(mapKeys(fields)), ", ")})
				continue
			}
			walkYAML(join(path, key.Value), value, ft, errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			wrong("a mapping (key: value)")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkYAML(join(path, n.Content[i].Value), n.Content[i+1], t.Elem(), errs)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			wrong("a list" + of(t.Elem()))
			return
		}
		for i, item := range n.Content {
			walkYAML(fmt.Sprintf("%s[%d]", path, i), item, t.Elem(), errs)
		}
	default:
		if n.Kind != yaml.ScalarNode || n.Decode(reflect.New(t).Interface()) != nil {
			wrong(kindOf(t))
		}
	}
}

// yamlFields are the keys of a struct type as yaml.v3 reads them: the yaml tag's name, else
// the field name in lower case; inline structs contribute their keys; outer keys win.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var inline []reflect.Type
	for f := range t.Fields() {
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case strings.Contains(opts, "inline"):
			inline = append(inline, f.Type)
		default:
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			out[name] = f.Type
		}
	}
	for _, it := range inline {
		for k, v := range yamlFields(it) {
			if _, taken := out[k]; !taken {
				out[k] = v
			}
		}
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// kindOf names the YAML value a Go type takes.
func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list" + of(t.Elem())
	case reflect.Struct, reflect.Map:
		return "a mapping (key: value)"
	case reflect.Pointer:
		return kindOf(t.Elem())
	}
	return "another kind of value"
}

// of is " of strings" for a list's element type, when the element is a plain value.
func of(elem reflect.Type) string {
	switch k := kindOf(elem); {
	case strings.HasPrefix(k, "a whole number"):
		return " of whole numbers"
	case k == "a string":
		return " of strings"
	case k == "a number":
		return " of numbers"
	}
	return ""
}

// describe names a YAML node as its author wrote it: the string "lots", the number 5, a list.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "the number " + v
	case "!!bool":
		return v
	}
	return fmt.Sprintf("the string %q", v)
}
