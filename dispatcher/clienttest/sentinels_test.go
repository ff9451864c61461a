package client_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// TestClientSentinelsCoverEveryCode checks the client's sentinels against shared/apierr's
// table: one for each code the dispatcher answers with or the client makes, and none for
// another code.
func TestClientSentinelsCoverEveryCode(t *testing.T) {
	t.Parallel()
	var want []string
	for _, s := range apierr.Codes() {
		if s.Where&(apierr.Dispatcher|apierr.Client) != 0 {
			want = append(want, s.Code)
		}
	}
	slices.Sort(want)
	require.Equal(t, want, client.Codes())
}
