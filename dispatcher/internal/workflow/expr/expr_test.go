package expr

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

var workflowContexts = []string{"inputs", "env", "vars", "job", "jobs", "needs", "steps", "matrix", "strategy"}

// status answers the status functions for a job whose earlier work ended as result.
func status(result string) func(string) bool {
	return func(name string) bool {
		switch name {
		case "always":
			return true
		case "success":
			return result == "success"
		case "failure":
			return result == "failure"
		case "cancelled":
			return result == "cancelled"
		}
		return false
	}
}

func eval(t *testing.T, src string, ctx Context) any {
	t.Helper()
	e, err := Parse(src, workflowContexts)
	require.NoError(t, err)
	v, err := e.Eval(ctx)
	require.NoError(t, err)
	return v
}

func TestStatusFunctions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src, result string
		want        bool
	}{
		{"success()", "success", true},
		{"success()", "failure", false},
		{"failure()", "failure", true},
		{"failure()", "success", false},
		{"cancelled()", "cancelled", true},
		{"always()", "failure", true},
		{"SUCCESS() || Failure()", "failure", true},
	} {
		require.Equal(t, tc.want, eval(t, tc.src, Context{Status: status(tc.result)}), "%s after %s", tc.src, tc.result)
	}

	e, err := Parse("always()", nil)
	require.NoError(t, err)
	_, err = e.Eval(Context{})
	var ee *Error
	require.ErrorAs(t, err, &ee, "a status function without Status is an evaluation error")
	require.Equal(t, KindEvaluation, ee.Kind)

	_, err = Parse("always(1)", nil)
	require.ErrorContains(t, err, "Too many parameters supplied: 'always'")
}

func TestUsesStatusFunction(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]bool{
		"needs.a.result == 'failure'":                     false,
		"failure() && needs.a.result == 'failure'":        true,
		"needs.a.outputs.x == 'y' || ALWAYS()":            true,
		"contains(format('{0}', cancelled()), 'true')":    true,
		"case(success(), 'a', 'b') == 'a'":                true,
		"inputs.success":                                  false,
		"format('success()')":                             false,
		"steps.build.outputs.failure == 'failure()' && 1": false,
	} {
		e, err := Parse(src, workflowContexts)
		require.NoError(t, err, src)
		require.Equal(t, want, e.UsesStatusFunction(), src)
	}
}

func TestConditionImplicitSuccess(t *testing.T) {
	t.Parallel()
	ctx := func(result string) Context {
		return Context{
			Named:  map[string]any{"needs": map[string]any{"build": map[string]any{"result": result, "outputs": map[string]any{"ok": "true"}}}},
			Status: status(result),
		}
	}
	for _, tc := range []struct {
		cond, result string
		want         bool
	}{
		// No status function: success() && (…), so a failed dependency skips the job.
		{"needs.build.outputs.ok == 'true'", "success", true},
		{"needs.build.outputs.ok == 'true'", "failure", false},
		{"${{ needs.build.outputs.ok == 'true' }}", "failure", false},
		{"true", "failure", false},
		{"", "success", true},
		{"", "failure", false},
		{"${{ }}", "failure", false},
		// A status function replaces the implicit success().
		{"failure()", "failure", true},
		{"${{ always() }}", "failure", true},
		{"always() && needs.build.result == 'failure'", "failure", true},
		{"failure() && needs.build.result == 'success'", "failure", false},
		{"!cancelled()", "failure", true},
		// Truthiness of what is left.
		{"needs.build.outputs.missing", "success", false},
		{"'false'", "success", true}, // a non-empty string is true, as on GitHub
		{"0", "success", false},
	} {
		got, err := Condition(tc.cond, workflowContexts, ctx(tc.result))
		require.NoError(t, err, tc.cond)
		require.Equal(t, tc.want, got, "if: %s after %s", tc.cond, tc.result)
	}

	// The implicit success() needs a status.
	_, err := Condition("true", nil, Context{})
	require.Error(t, err)

	// When success() is false the condition itself is not evaluated (GitHub short-circuits).
	got, err := Condition("fromJSON('')", nil, Context{Status: status("failure")})
	require.NoError(t, err)
	require.False(t, got)
	_, err = Condition("fromJSON('')", nil, Context{Status: status("success")})
	require.ErrorContains(t, err, "fromJson")
}

func TestInterpolate(t *testing.T) {
	t.Parallel()
	ctx := Context{Named: map[string]any{
		"inputs": map[string]any{"count": 3.0, "name": "world", "flag": false, "list": []any{"a", "b"}},
		"steps":  map[string]any{"s1": map[string]any{"outputs": map[string]any{"result": "x}}y"}}},
	}}
	for _, tc := range []struct {
		tmpl string
		want any
	}{
		// Exactly one expression: its value, type kept.
		{"${{ inputs.count }}", 3.0},
		{"${{ inputs.flag }}", false},
		{"${{inputs.list}}", []any{"a", "b"}},
		{"${{ fromJSON('{\"a\":1}') }}", map[string]any{"a": 1.0}},
		{"${{ inputs.missing }}", nil},
		// Anything more: a string, each part as String shows it.
		{" ${{ inputs.count }}", " 3"},
		{"hello ${{ inputs.name }}!", "hello world!"},
		{"${{ inputs.count }}${{ inputs.count }}", "33"},
		{"flag=${{ inputs.flag }} none=${{ inputs.missing }}.", "flag=false none=."},
		{"list=${{ inputs.list }}", "list=[\n  \"a\",\n  \"b\"\n]"},
		{"${{ '}}' }} and ${{ steps.s1.outputs.result }}", "}} and x}}y"},
		{"no expression {{ here }}", "no expression {{ here }}"},
		{"", ""},
	} {
		got, err := Interpolate(tc.tmpl, workflowContexts, ctx)
		require.NoError(t, err, tc.tmpl)
		require.Equal(t, tc.want, got, tc.tmpl)
	}

	_, err := Interpolate("n=${{ inputs.count * 2 }}", workflowContexts, ctx)
	require.ErrorContains(t, err, "Unexpected symbol: '*'", "there is no arithmetic")

	_, err = Interpolate("a ${{ inputs.name", workflowContexts, ctx)
	var ee *Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, KindParsing, ee.Kind)
	require.Equal(t, 3, ee.Pos)

	_, err = Interpolate("${{ secrets.token }}", workflowContexts, ctx)
	require.ErrorContains(t, err, "Unrecognized named-value: 'secrets'")

	require.NoError(t, CheckTemplate("a ${{ inputs.name }} b ${{ '}}' }}", workflowContexts))
	require.NoError(t, CheckTemplate("plain", workflowContexts))
	require.ErrorContains(t, CheckTemplate("${{ inputs.name }} ${{ github.sha }}", workflowContexts), "'github'",
		"every part is parsed, not only the first")
}

func TestContextsCaseInsensitive(t *testing.T) {
	t.Parallel()
	ctx := Context{Named: map[string]any{
		"Needs":  map[string]any{"Build-Job": map[string]any{"Outputs": map[string]any{"Artifact_URL": "s3://x"}}},
		"MATRIX": map[string]any{"os": "linux"},
	}}
	require.Equal(t, "s3://x", eval(t, "needs.build-job.outputs.artifact_url", ctx))
	require.Equal(t, "s3://x", eval(t, "NEEDS['BUILD-JOB'].OUTPUTS['artifact_url']", ctx))
	require.Equal(t, "linux", eval(t, "Matrix.OS", ctx))
	require.Equal(t, true, eval(t, "matrix.os == 'LINUX'", ctx))
	require.Nil(t, eval(t, "steps.none.outputs.x", ctx), "an allowed context the caller did not give is null")
}

func TestUnknownContext(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"secrets.token", "github.sha == 'x'", "format('{0}', runner.os)"} {
		_, err := Parse(src, workflowContexts)
		var ee *Error
		require.ErrorAs(t, err, &ee, src)
		require.Equal(t, KindParsing, ee.Kind, src)
		require.Contains(t, ee.Message, "Unrecognized named-value", src)
		require.Error(t, Check(src, workflowContexts), src)
	}
	require.NoError(t, Check("GITHUB.sha", []string{"github"}), "allowed names match case-insensitively")

	_, err := Parse("hashFiles('x')", workflowContexts)
	require.ErrorContains(t, err, "Unrecognized function: 'hashFiles'")
}

func TestPlainGoValues(t *testing.T) {
	t.Parallel()
	ctx := Context{Named: map[string]any{
		"inputs": map[string]any{"b": 2, "a": int64(1), "names": []string{"x", "y"}},
		"env":    map[string]string{"MODE": "fast"},
	}}
	// Plain maps have no order: toJSON prints their keys sorted.
	require.Equal(t, "{\n  \"a\": 1,\n  \"b\": 2,\n  \"names\": [\n    \"x\",\n    \"y\"\n  ]\n}", eval(t, "toJSON(inputs)", ctx))
	require.Equal(t, "x|y", eval(t, "join(inputs.names, '|')", ctx))
	require.Equal(t, true, eval(t, "env.mode == 'FAST' && inputs.b > inputs.a", ctx))
	require.Equal(t, true, eval(t, "inputs == inputs", ctx), "a context is identical to itself")

	_, err := (&Expr{root: &contextRef{name: "inputs"}}).Eval(Context{Named: map[string]any{"inputs": make(chan int)}})
	require.Error(t, err, "a value that is not JSON is refused")
}

func TestTruthyAndString(t *testing.T) {
	t.Parallel()
	for v, want := range map[any]bool{nil: false, false: false, true: true, 0.0: false, -1.0: true, "": false, "false": true, "0": true} {
		require.Equal(t, want, Truthy(v), "%#v", v)
	}
	require.False(t, Truthy(math.NaN()))
	require.True(t, Truthy([]any{}))
	require.True(t, Truthy(map[string]any{}))

	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, ""}, {true, "true"}, {3.0, "3"}, {-0.0, "0"}, {0.1 + 0.2, "0.3"}, {1e21, "1e+21"},
		{1e-7, "1e-7"}, {123456789012.5, "123456789012.5"}, {math.Inf(-1), "-Infinity"},
		{"s", "s"}, {[]any{1.0}, "[\n  1\n]"}, {map[string]any{}, "{}"},
	} {
		require.Equal(t, tc.want, String(tc.v), "%#v", tc.v)
	}
}

func TestToJSONKeepsFromJSONOrder(t *testing.T) {
	t.Parallel()
	got := eval(t, `toJSON(fromJSON('{"z": 1, "a": [true, null, "<&>\u2028"], "m": {}}'))`, Context{})
	require.Equal(t, "{\n  \"z\": 1,\n  \"a\": [\n    true,\n    null,\n    \"<&>\u2028\"\n  ]"+",\n  \"m\": {}\n}", got)
}

func TestFilters(t *testing.T) {
	t.Parallel()
	ctx := Context{Named: map[string]any{"needs": map[string]any{
		"a": map[string]any{"result": "success", "outputs": map[string]any{"n": "1"}},
		"b": map[string]any{"result": "failure", "outputs": map[string]any{"n": "2"}},
	}}}
	require.Equal(t, []any{"success", "failure"}, eval(t, "needs.*.result", ctx))
	require.Equal(t, true, eval(t, "contains(needs.*.result, 'FAILURE')", ctx))
	require.Equal(t, []any{"1", "2"}, eval(t, "needs[*].outputs.n", ctx))
	require.Equal(t, []any{}, eval(t, "needs.a.result.*", ctx))
}

func TestEvaluationErrors(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"fromJSON('{')":      "Error parsing JSON",
		"fromJSON('1 2')":    "Error parsing JSON",
		"format('{1}', 'a')": "references more arguments than were supplied",
		"format('{x}', 'a')": "format string is invalid",
		"format('}', 'a')":   "format string is invalid",
		"case(1, 'a', 'b')":  "case predicate must evaluate to a boolean value",
		"format('{0}{0}{0}{0}{0}{0}{0}{0}', format('{0}{0}{0}{0}{0}{0}{0}{0}', format('{0}{0}{0}{0}{0}{0}{0}{0}', format('{0}{0}{0}{0}{0}{0}{0}{0}', format('{0}{0}{0}{0}{0}{0}{0}{0}', format('{0}{0}{0}{0}{0}{0}{0}{0}', format('{0}{0}{0}{0}{0}{0}{0}{0}', 'abcd')))))))": "maximum allowed memory size",
	} {
		e, err := Parse(src, nil)
		require.NoError(t, err, src)
		_, err = e.Eval(Context{})
		var ee *Error
		require.True(t, errors.As(err, &ee), src)
		require.Equal(t, KindEvaluation, ee.Kind, src)
		require.Contains(t, ee.Message, want, src)
	}
	require.Equal(t, "{a} b", eval(t, "format('{{a}} {0}', 'b')", Context{}))
	require.Equal(t, "b", eval(t, "case(true, 'b', fromJSON(''))", Context{}), "case evaluates only the chosen value")
}

func TestEmptyExpressionIsNull(t *testing.T) {
	t.Parallel()
	require.Nil(t, eval(t, "  ", Context{}))
}

// BenchmarkEval: a parsed `if:`-sized expression evaluated against a job's needs and steps.
func BenchmarkEval(b *testing.B) {
	e, err := Parse("needs.build.result == 'success' && startsWith(steps.s1.outputs.ref, 'refs/heads/') && !contains(needs.*.result, 'failure')", []string{"needs", "steps"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := Context{Named: map[string]any{
		"needs": map[string]any{"build": map[string]any{"result": "success", "outputs": map[string]any{"a": "1", "b": "2"}}, "lint": map[string]any{"result": "success"}},
		"steps": map[string]any{"s1": map[string]any{"outputs": map[string]any{"ref": "refs/heads/main"}, "outcome": "success"}},
	}}
	for b.Loop() {
		if _, err := e.Eval(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse: the same expression parsed.
func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := Parse("needs.build.result == 'success' && startsWith(steps.s1.outputs.ref, 'refs/heads/') && !contains(needs.*.result, 'failure')", []string{"needs", "steps"}); err != nil {
			b.Fatal(err)
		}
	}
}
