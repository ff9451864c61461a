package client

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// TestSentinelsCoverEveryCode checks the sentinels against shared/apierr's table: one for
// each code the dispatcher answers with or the client makes, and none for another code.
func TestSentinelsCoverEveryCode(t *testing.T) {
	t.Parallel()
	var want []string
	for _, s := range apierr.Codes() {
		if s.Where&(apierr.Dispatcher|apierr.Client) != 0 {
			want = append(want, s.Code)
		}
	}
	slices.Sort(want)
	require.Equal(t, want, slices.Sorted(maps.Keys(sentinels)))
	for code, s := range sentinels {
		require.True(t, errors.Is(&APIError{Code: code}, s), code)
	}
}
