package pipeline

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/routing"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// outstanding is a fake inner link that reads, while its call is admitted, which groups
// the bucket counts calls outstanding for.
type outstanding struct {
	lim    *limiter.Limiter
	key    limiter.BucketKey
	groups []string
}

func (o *outstanding) Chat(ctx context.Context, _ *Call) (*Result, error) {
	s, err := o.lim.State(ctx, o.key)
	if err != nil {
		return nil, err
	}
	o.groups = slices.Sorted(maps.Keys(s.Outstanding))
	return &Result{Resp: &provider.Response{}}, nil
}

// TestQueueOrderGroups: under the progress order a chain step's call counts for its chain
// (a plain run's for its run), under FIFO every call is a group of its own.
func TestQueueOrderGroups(t *testing.T) {
	t.Parallel()
	_, rdb := testkit.Redis(t)
	lim, err := limiter.New(rdb, limiter.Options{})
	require.NoError(t, err)
	require.NoError(t, lim.Start(t.Context()))
	t.Cleanup(lim.Stop)
	route := routing.Route{ProviderID: "cred-" + strings.ToLower(t.Name()), Model: "m"}
	key := limiter.BucketKey{Credential: route.ProviderID, Model: route.Model}
	require.NoError(t, lim.SetLimits(t.Context(), key, limiter.Limits{RPM: 1000}))

	for _, c := range []struct {
		order          QueueOrder
		chainID, jobID string
		want           string // the group counted; "~": one of its own
	}{
		{"", "chain-1", "job-1", "chain-1"},
		{OrderProgress, "chain-1", "job-1", "chain-1"},
		{OrderProgress, "", "job-1", "job-1"},
		{OrderFIFO, "chain-1", "job-1", "~"},
		{OrderFIFO, "", "job-1", "~"},
	} {
		inner := &outstanding{lim: lim, key: key}
		rl := &RateLimit{Next: inner, Limiter: lim, Order: c.order}
		res, err := rl.Chat(t.Context(), &Call{Route: route, ChainID: c.chainID, JobID: c.jobID, Tokens: 1})
		require.NoError(t, err)
		res.Settle(context.Background())
		require.Len(t, inner.groups, 1, "order %q", c.order)
		if c.want == "~" {
			require.True(t, strings.HasPrefix(inner.groups[0], "~"), "order %q counted %v", c.order, inner.groups)
		} else {
			require.Equal(t, c.want, inner.groups[0], "order %q", c.order)
		}
	}
}

// TestQueueOrderPending: only the remaining order tells the limiter what is left of a
// chain, and only for a chain step's call.
func TestQueueOrderPending(t *testing.T) {
	t.Parallel()
	chainStep := &Call{ChainID: "chain-1", JobID: "job-1", ChainPending: 4}
	plainRun := &Call{JobID: "job-1", ChainPending: 4}
	require.Equal(t, 4, OrderRemaining.pending(chainStep))
	require.Equal(t, "chain-1", OrderRemaining.group(chainStep))
	require.Zero(t, OrderRemaining.pending(plainRun))
	require.Zero(t, OrderProgress.pending(chainStep))
	require.Zero(t, OrderFIFO.pending(chainStep))
}
