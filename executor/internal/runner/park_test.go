package runner

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
)

// Which router answers park a run instead of failing it, and for how long.
func TestParkable(t *testing.T) {
	t.Parallel()
	wrap := func(code string, after time.Duration) error {
		return fmt.Errorf("iteration 2: %w", &routerclient.Error{Code: code, RetryAfter: after})
	}
	for _, c := range []struct {
		err    error
		waited time.Duration
		reason string
		delay  time.Duration
	}{
		{wrap("RATE_LIMIT_WAIT", 7*time.Second), 0, ReasonCapacity, 7 * time.Second},
		{wrap("PROVIDER_CIRCUIT_OPEN", 5*time.Second), 0, ReasonProviderDown, 5 * time.Second},
		{wrap("PROVIDER_CIRCUIT_OPEN", 0), 0, ReasonProviderDown, 5 * time.Second},
		{wrap("ROUTER_UNREACHABLE", 0), 0, ReasonRouterDown, time.Second},
		{wrap("ROUTER_UNREACHABLE", 0), 10 * time.Second, ReasonRouterDown, 5 * time.Second},
		{wrap("ROUTER_UNREACHABLE", 0), time.Hour, ReasonRouterDown, 30 * time.Second},
	} {
		reason, delay, ok := parkable(c.err, c.waited)
		require.True(t, ok, "%v", c.err)
		require.Equal(t, c.reason, reason)
		require.Equal(t, c.delay, delay)
	}
	for _, err := range []error{wrap("PROVIDER_UNAVAILABLE", 0), wrap("BUDGET_EXCEEDED", 0),
		wrap("RATE_LIMIT_DEADLINE", time.Second), errors.New("boom")} {
		_, _, ok := parkable(err, 0)
		require.False(t, ok, "%v", err)
	}
}
