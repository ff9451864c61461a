package workflow_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow"
)

// matrixOf parses a job whose strategy is the given YAML (indented under `strategy:`).
func matrixOf(t *testing.T, strategy string) *workflow.Matrix {
	t.Helper()
	src := "name: t\non:\n  workflow_dispatch:\n    inputs: {sizes: {type: string}, tone: {type: string}, skip: {type: string}, matrix: {type: string}}\njobs:\n  a:\n    runs-on: any\n    strategy:\n" + strategy +
		"    steps:\n      - uses: ./skills/demo_llm\n        with: {prompt: hi}\n"
	wf, problems := workflow.Parse([]byte(src), workflow.Options{})
	require.Empty(t, problems)
	return wf.Jobs[0].Matrix
}

// TestExpandGitHubsIncludeExample is the example of GitHub's docs ("Running variations of
// jobs in a workflow", expanding or adding matrix configurations), with its documented result.
func TestExpandGitHubsIncludeExample(t *testing.T) {
	t.Parallel()
	m := matrixOf(t, `      matrix:
        fruit: [apple, pear]
        animal: [cat, dog]
        include:
          - color: green
          - color: pink
            animal: cat
          - fruit: apple
            shape: circle
          - fruit: banana
          - fruit: banana
            animal: cat
`)
	got, err := m.Expand(nil)
	require.NoError(t, err)
	require.Equal(t, []map[string]any{
		{"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
		{"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
		{"fruit": "pear", "animal": "cat", "color": "pink"},
		{"fruit": "pear", "animal": "dog", "color": "green"},
		{"fruit": "banana"},
		{"fruit": "banana", "animal": "cat"},
	}, got)
}

// TestExpandGitHubsExcludeExample: "An excluded configuration only has to be a partial match
// for it to be excluded" — 12 combinations, minus one, minus the two of windows 16: nine.
func TestExpandGitHubsExcludeExample(t *testing.T) {
	t.Parallel()
	m := matrixOf(t, `      matrix:
        os: [macos-latest, windows-latest]
        version: [12, 14, 16]
        environment: [staging, production]
        exclude:
          - os: macos-latest
            version: 12
            environment: production
          - os: windows-latest
            version: 16
`)
	got, err := m.Expand(nil)
	require.NoError(t, err)
	require.Len(t, got, 9)
	require.Equal(t, map[string]any{"os": "macos-latest", "version": 12.0, "environment": "staging"}, got[0])
	for _, c := range got {
		require.False(t, c["os"] == "windows-latest" && c["version"] == 16.0, "%v", c)
		require.False(t, c["os"] == "macos-latest" && c["version"] == 12.0 && c["environment"] == "production", "%v", c)
	}
}

// TestExpandIncludeOnly: without dimensions every include entry is an instance of its own
// (the product of no dimensions is empty, not one empty combination).
func TestExpandIncludeOnly(t *testing.T) {
	t.Parallel()
	m := matrixOf(t, `      matrix:
        include:
          - site: production
            datacenter: site-a
          - site: staging
            datacenter: site-b
`)
	got, err := m.Expand(nil)
	require.NoError(t, err)
	require.Equal(t, []map[string]any{
		{"site": "production", "datacenter": "site-a"},
		{"site": "staging", "datacenter": "site-b"},
	}, got)
}

func TestExpandEvaluatesExpressions(t *testing.T) {
	t.Parallel()
	m := matrixOf(t, `      matrix:
        size: ${{ fromJSON(inputs.sizes) }}
        tone: [dry, "${{ inputs.tone }}"]
        exclude: ${{ fromJSON(inputs.skip) }}
`)
	var asked []string
	eval := func(expr string) (any, error) {
		asked = append(asked, expr)
		switch expr {
		case "${{ fromJSON(inputs.sizes) }}":
			return []int{1, 2}, nil // any JSON-shaped value is read as JSON
		case "${{ inputs.tone }}":
			return "warm", nil
		case "${{ fromJSON(inputs.skip) }}":
			return []any{map[string]any{"size": 2, "tone": "dry"}}, nil
		}
		return nil, fmt.Errorf("unexpected %s", expr)
	}
	got, err := m.Expand(eval)
	require.NoError(t, err)
	require.Equal(t, []map[string]any{
		{"size": 1.0, "tone": "dry"}, {"size": 1.0, "tone": "warm"}, {"size": 2.0, "tone": "warm"},
	}, got)
	require.Len(t, asked, 3)

	_, err = m.Expand(func(string) (any, error) { return "not a list", nil })
	require.ErrorContains(t, err, `matrix dimension "size" must be a list, not a string`)
	_, err = m.Expand(func(string) (any, error) { return nil, errors.New("boom") })
	require.ErrorContains(t, err, "boom")
}

func TestExpandWholeMatrixExpression(t *testing.T) {
	t.Parallel()
	m := matrixOf(t, "      matrix: ${{ fromJSON(inputs.matrix) }}\n")
	require.Equal(t, "${{ fromJSON(inputs.matrix) }}", m.Expr)
	got, err := m.Expand(func(string) (any, error) {
		return map[string]any{"b": []any{"x"}, "a": []any{1, 2}, "include": []any{map[string]any{"a": 1, "c": true}}}, nil
	})
	require.NoError(t, err)
	require.Equal(t, []map[string]any{{"a": 1.0, "b": "x", "c": true}, {"a": 2.0, "b": "x"}}, got)

	_, err = m.Expand(func(string) (any, error) { return []any{1}, nil })
	require.ErrorContains(t, err, "must evaluate to an object, not a list")
}

func TestExpandCapsAt256(t *testing.T) {
	t.Parallel()
	list := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = float64(i)
		}
		return out
	}
	m := &workflow.Matrix{Dimensions: []workflow.Dimension{{Name: "a", Values: list(16)}, {Name: "b", Values: list(16)}}}
	got, err := m.Expand(nil)
	require.NoError(t, err)
	require.Len(t, got, 256, "256 is allowed")

	m.Include = []map[string]any{{"a": 99.0}}
	_, err = m.Expand(nil)
	require.ErrorIs(t, err, workflow.ErrMatrixTooLarge, "an appended include counts")

	m = &workflow.Matrix{Dimensions: []workflow.Dimension{{Name: "a", Values: list(1000)}, {Name: "b", Values: list(1000)}}}
	_, err = m.Expand(nil)
	require.ErrorIs(t, err, workflow.ErrMatrixTooLarge, "a huge product is refused before it is built")

	m = &workflow.Matrix{Dimensions: []workflow.Dimension{{Name: "a", Values: []any{}}}}
	_, err = m.Expand(nil)
	require.ErrorContains(t, err, `matrix dimension "a" has no values`)
}
