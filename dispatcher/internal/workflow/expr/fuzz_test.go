package expr

import "testing"

// FuzzExpr checks that no input makes Parse, Eval, Condition or Interpolate panic.
func FuzzExpr(f *testing.F) {
	for _, s := range []string{
		"a.b[1].*.c", "format('{0}{{}}', a)", "case(a == 1, 'x', fromJSON('[1]'))",
		"!(a || b) && c['x'] >= 0x1F", "toJSON(a.*)", "join(a.*.b, ', ')", "'it''s' == a",
		"success() || contains(a, 'x')", "-.5e3 < Infinity", "${{ a }} x",
	} {
		f.Add(s)
	}
	ctx := Context{
		Named:  map[string]any{"a": map[string]any{"b": []any{1.0, map[string]any{"c": "x"}}}, "b": "", "c": []any{}},
		Status: func(string) bool { return true },
	}
	names := []string{"a", "b", "c"}
	f.Fuzz(func(t *testing.T, src string) {
		if e, err := Parse(src, names); err == nil {
			_, _ = e.Eval(ctx)
		}
		_, _ = Condition(src, names, ctx)
		_, _ = Interpolate(src, names, ctx)
	})
}
