package expr_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow/expr"
)

// TestCacheAnswersAsTheFunctions: a cached condition or template evaluates as the package
// functions do, against each evaluation's own values; the contexts an expression may use
// are part of the key (a name allowed in one place is an error in another); a parse error
// is not kept; and concurrent use is safe (run with -race).
func TestCacheAnswersAsTheFunctions(t *testing.T) {
	var c expr.Cache
	ok := func(string) bool { return true }
	ctx := func(n float64) expr.Context {
		return expr.Context{Named: map[string]any{"inputs": map[string]any{"n": n}}, Status: ok}
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			n := float64(i)
			got, err := c.Interpolate("n=${{ inputs.n }}", []string{"inputs"}, ctx(n))
			require.NoError(t, err)
			want, err := expr.Interpolate("n=${{ inputs.n }}", []string{"inputs"}, ctx(n))
			require.NoError(t, err)
			require.Equal(t, want, got)
			yes, err := c.Condition("${{ inputs.n > 3 }}", []string{"inputs"}, ctx(n))
			require.NoError(t, err)
			require.Equal(t, i > 3, yes)
		})
	}
	wg.Wait()

	_, err := c.Interpolate("n=${{ inputs.n }}", []string{"env"}, ctx(1))
	require.Error(t, err, "inputs is not a context here")
	_, err = c.Condition("inputs.n > 3", []string{"env"}, ctx(1))
	require.Error(t, err)
	_, err = c.Condition("inputs.n >", []string{"inputs"}, ctx(1))
	require.Error(t, err)
	_, err = c.Condition("inputs.n >", []string{"inputs"}, ctx(1))
	require.Error(t, err, "a parse error is not kept as a parsed condition")
	yes, err := c.Condition("", nil, expr.Context{Status: ok})
	require.NoError(t, err)
	require.True(t, yes, "an empty condition is success()")
}
