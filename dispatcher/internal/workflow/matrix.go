package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/rhysd/actionlint"
)

// MaxMatrix is how many instances one job's matrix may expand to (GitHub's limit).
const MaxMatrix = 256

// ErrMatrixTooLarge is returned by Expand for a matrix of more than MaxMatrix instances.
var ErrMatrixTooLarge = errors.New("matrix expands to more than 256 instances")

// errNeedsEval: Expand met an expression and was given no evaluator (Parse's static check).
var errNeedsEval = errors.New("matrix holds an expression")

// Expand returns the matrix's instances as GitHub computes them: the cartesian product of
// the dimensions in file order (the first dimension varies slowest), then `exclude` (a
// combination is removed when it matches every key of an exclude entry), then `include`
// (an entry is merged into every combination of the product whose dimension values it
// does not overwrite — values added by an earlier include may be overwritten — and is
// appended as an instance of its own when it merges into none). More than MaxMatrix
// instances is ErrMatrixTooLarge.
//
// eval is called with every value given as an expression, as written ("${{ … }}", or a
// string with ${{ }} inside): a whole matrix must evaluate to an object, a dimension, an
// include or an exclude to a list (of objects for include/exclude). Its results are read
// as JSON values. A whole matrix given as one expression has its dimensions in key order.
func (m *Matrix) Expand(eval func(expr string) (any, error)) ([]map[string]any, error) {
	ev := func(s string) (any, error) {
		if eval == nil {
			return nil, errNeedsEval
		}
		v, err := eval(s)
		if err != nil {
			return nil, fmt.Errorf("evaluating %s: %w", s, err)
		}
		return normalize(v)
	}
	var (
		dims             []Dimension
		include, exclude []map[string]any
		err              error
	)
	if m.Expr != "" {
		if dims, include, exclude, err = wholeMatrix(m.Expr, ev); err != nil {
			return nil, err
		}
	} else {
		dims = m.Dimensions
	}

	names := make([]string, 0, len(dims))
	values := make([][]any, 0, len(dims))
	size := 1
	for _, d := range dims {
		vs, err := dimension(d, ev)
		if err != nil {
			return nil, err
		}
		if len(vs) == 0 {
			return nil, fmt.Errorf("matrix dimension %q has no values", d.Name)
		}
		names = append(names, d.Name)
		values = append(values, vs)
		if size *= len(vs); size > MaxMatrix*MaxMatrix { // bound the memory before exclude
			return nil, fmt.Errorf("%w: the product of the dimensions is %d or more", ErrMatrixTooLarge, size)
		}
	}

	if m.Expr == "" {
		if include, err = combinations("include", m.Include, m.IncludeExpr, ev); err != nil {
			return nil, err
		}
		if exclude, err = combinations("exclude", m.Exclude, m.ExcludeExpr, ev); err != nil {
			return nil, err
		}
	}

	var combos []map[string]any
	if len(dims) > 0 {
		combos = product(names, values)
	}
	combos = slices.DeleteFunc(combos, func(c map[string]any) bool {
		return slices.ContainsFunc(exclude, func(e map[string]any) bool { return matches(c, e) })
	})
	base := len(combos)
	for _, in := range include {
		merged := false
		for _, c := range combos[:base] {
			if canMerge(c, in, names) {
				for k, v := range in {
					c[k] = v
				}
				merged = true
			}
		}
		if !merged {
			combos = append(combos, clone(in))
		}
	}
	if len(combos) > MaxMatrix {
		return nil, fmt.Errorf("%w: it has %d; split the job or narrow the matrix with exclude", ErrMatrixTooLarge, len(combos))
	}
	return combos, nil
}

// product is the cartesian product, the first dimension varying slowest.
func product(names []string, values [][]any) []map[string]any {
	out := []map[string]any{{}}
	for i, name := range names {
		next := make([]map[string]any, 0, len(out)*len(values[i]))
		for _, c := range out {
			for _, v := range values[i] {
				n := clone(c)
				n[name] = v
				next = append(next, n)
			}
		}
		out = next
	}
	return out
}

// matches: a combination is excluded when it has every key of the entry with an equal value.
func matches(c, exclude map[string]any) bool {
	for k, v := range exclude {
		if have, ok := c[k]; !ok || !reflect.DeepEqual(have, v) {
			return false
		}
	}
	return true
}

// canMerge: an include entry may not overwrite a combination's original dimension values.
func canMerge(c, in map[string]any, dims []string) bool {
	for k, v := range in {
		if slices.Contains(dims, k) && !reflect.DeepEqual(c[k], v) {
			return false
		}
	}
	return true
}

func clone(m map[string]any) map[string]any {
	n := make(map[string]any, len(m)+1)
	for k, v := range m {
		n[k] = v
	}
	return n
}

func wholeMatrix(expr string, ev func(string) (any, error)) ([]Dimension, []map[string]any, []map[string]any, error) {
	v, err := ev(expr)
	if err != nil {
		return nil, nil, nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, nil, fmt.Errorf("matrix %s must evaluate to an object, not %s", expr, kindOf(v))
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var dims []Dimension
	var include, exclude []map[string]any
	for _, k := range keys {
		switch k {
		case "include", "exclude":
			list, err := entries(k, obj[k])
			if err != nil {
				return nil, nil, nil, err
			}
			if k == "include" {
				include = list
			} else {
				exclude = list
			}
		default:
			dims = append(dims, Dimension{Name: k, Values: obj[k]})
		}
	}
	return dims, include, exclude, nil
}

// dimension resolves a dimension's values: an expression for the whole list, or strings
// with ${{ }} among them.
func dimension(d Dimension, ev func(string) (any, error)) ([]any, error) {
	v := d.Values
	if s, ok := v.(string); ok && strings.Contains(s, "${{") {
		var err error
		if v, err = ev(s); err != nil {
			return nil, err
		}
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("matrix dimension %q must be a list, not %s", d.Name, kindOf(v))
	}
	out := make([]any, len(list))
	for i, e := range list {
		r, err := resolve(e, ev)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

func combinations(what string, list []map[string]any, expr string, ev func(string) (any, error)) ([]map[string]any, error) {
	if expr != "" {
		v, err := ev(expr)
		if err != nil {
			return nil, err
		}
		return entries(what, v)
	}
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		r, err := resolve(e, ev)
		if err != nil {
			return nil, err
		}
		out = append(out, r.(map[string]any))
	}
	return out, nil
}

// entries reads an evaluated include or exclude: a list of objects.
func entries(what string, v any) ([]map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("matrix %s must be a list of objects, not %s", what, kindOf(v))
	}
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("matrix %s must be a list of objects, not a list holding %s", what, kindOf(e))
		}
		out = append(out, obj)
	}
	return out, nil
}

// resolve evaluates the strings holding ${{ }} inside a value written in the file.
func resolve(v any, ev func(string) (any, error)) (any, error) {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, "${{") {
			return ev(x)
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := resolve(e, ev)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := resolve(e, ev)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

// normalize reads an evaluator's result as JSON values ([]string becomes []any, ints
// become float64), so that equality in exclude and include is JSON equality.
func normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("reading an evaluated matrix value: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("reading an evaluated matrix value: %w", err)
	}
	return out, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// matrix reads a job's strategy into the model and refuses a matrix that is statically
// larger than MaxMatrix.
func (p *parser) matrix(s *actionlint.Strategy) *Matrix {
	mx := s.Matrix
	m := &Matrix{FailFast: p.staticBool(s.FailFast, "fail-fast", true), Pos: posOf(mx.Pos)}
	if s.MaxParallel != nil {
		if s.MaxParallel.Expression != nil {
			p.refuse(s.MaxParallel.Expression.Pos, RuleStaticValue, "max-parallel given as an expression is not supported",
				"write max-parallel as a whole number, e.g. `max-parallel: 4`")
		} else {
			m.MaxParallel = s.MaxParallel.Value
		}
	}
	if mx.Expression != nil {
		m.Expr = mx.Expression.Value
		return m
	}
	// actionlint keeps no name for a dimension given as an expression: its key is read
	// from the YAML (the map's key is lower-cased).
	for id, row := range mx.Rows {
		if row.Name == nil && row.Expression != nil {
			name, ok := p.values.keyOf(row.Expression)
			if !ok {
				name = id
			}
			row.Name = &actionlint.String{Value: name, Pos: row.Expression.Pos}
		}
	}
	for _, row := range byPos(mx.Rows, func(r *actionlint.MatrixRow) *actionlint.Pos { return r.Name.Pos }) {
		d := Dimension{Name: str(row.Name)}
		if row.Expression != nil {
			d.Values = row.Expression.Value
		} else {
			list := make([]any, 0, len(row.Values))
			for _, v := range row.Values {
				list = append(list, p.values.raw(v))
			}
			d.Values = list
		}
		m.Dimensions = append(m.Dimensions, d)
	}
	m.Include, m.IncludeExpr = p.combinations("include", mx.Include)
	m.Exclude, m.ExcludeExpr = p.combinations("exclude", mx.Exclude)
	if _, err := m.Expand(nil); errors.Is(err, ErrMatrixTooLarge) {
		p.refuse(mx.Pos, RuleMatrixSize, "the matrix "+strings.TrimPrefix(err.Error(), "matrix "),
			"use fewer values per dimension, or remove combinations with `exclude:`; one job's matrix runs at most 256 instances")
	}
	return m
}

func (p *parser) combinations(what string, cs *actionlint.MatrixCombinations) ([]map[string]any, string) {
	if cs == nil {
		return nil, ""
	}
	if cs.Expression != nil {
		return nil, cs.Expression.Value
	}
	var out []map[string]any
	for _, c := range cs.Combinations {
		if c.Expression != nil {
			p.refuse(c.Expression.Pos, RuleStaticValue, fmt.Sprintf("an entry of %s given as one expression is not supported", what),
				fmt.Sprintf("write the entry as a mapping, or the whole list as one expression: `%s: ${{ fromJSON(…) }}`", what))
			continue
		}
		entry := make(map[string]any, len(c.Assigns))
		for _, a := range c.Assigns {
			entry[str(a.Key)] = p.values.raw(a.Value)
		}
		out = append(out, entry)
	}
	return out, ""
}
